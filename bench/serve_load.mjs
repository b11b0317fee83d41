// bench/serve_load.mjs URL N MAX_TOKENS — N concurrent streaming completions against `sluice serve`
// (node's own fetch, no packages); prints one JSON line: per-request time to first token and decode
// tok/s, and the aggregate decode rate (all tokens after each request's first, over the span from
// the first first-token to the last token).
const [url, nArg, tArg] = process.argv.slice(2);
const N = Number(nArg), T = Number(tArg);
const prompts = ['Once upon a time', 'The little dog', 'In a small town', 'One day, a bird', 'Sam was sad because',
                 'The sun was hot and', 'Lily found a box', 'Tom liked to run'];

async function one(i) {
  const t0 = performance.now();
  const r = await fetch(url + '/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: prompts[i % prompts.length] + ' '.repeat(Math.floor(i / prompts.length)), max_tokens: T,
                           temperature: 0, stream: true, stream_options: { include_usage: true } }) });
  if (r.status !== 200) throw new Error(`status ${r.status}: ${await r.text()}`);
  const dec = new TextDecoder();
  let buf = '', tFirst = 0, tLast = 0, tokens = 0;
  for await (const chunk of r.body) {
    buf += dec.decode(chunk, { stream: true });
    let k;
    while ((k = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, k); buf = buf.slice(k + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const o = JSON.parse(ev.slice(6));
      if (o.usage) tokens = o.usage.completion_tokens;
      else if (o.choices.length && o.choices[0].text) { const now = performance.now(); if (!tFirst) tFirst = now; tLast = now; }
    }
  }
  return { t0, tFirst, tLast, tokens };
}

const rs = await Promise.all(Array.from({ length: N }, (_, i) => one(i)));
const ttft = rs.map((r) => (r.tFirst - r.t0) / 1000);
const per = rs.map((r) => (r.tokens > 1 && r.tLast > r.tFirst ? (r.tokens - 1) / ((r.tLast - r.tFirst) / 1000) : 0));
const span = (Math.max(...rs.map((r) => r.tLast)) - Math.min(...rs.map((r) => r.tFirst))) / 1000;
const agg = rs.reduce((a, r) => a + Math.max(0, r.tokens - 1), 0) / span;
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
console.log(JSON.stringify({ n: N, tokens: rs.map((r) => r.tokens), ttft_median_s: med(ttft), ttft_max_s: Math.max(...ttft),
                             req_tok_s_median: med(per), agg_tok_s: agg }));
