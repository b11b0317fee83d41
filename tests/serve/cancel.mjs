// tests/serve/cancel.mjs — clients that leave, and request fields (issue 41, items 2, 3 and 6).
// serve_test.sh starts the server with --parallel 1 --queue 2 -c 8192 -b 128 --max-tokens 8000
// --ignore-eos on mini-llama3, so that a request of 8000 tokens runs for many seconds (and a prompt
// of 2000 tokens takes 16 passes).
//   - a non-streaming request whose client leaves is cancelled and its slot freed within about a
//     second; queued requests (streaming or not) whose clients leave give their places up at once;
//   - every request field is honoured or refused with a 400 naming it; logprobs / top_logprobs are
//     honoured on both endpoints, streaming and not, in OpenAI's shapes, and agree with each other.
import net from 'node:net';
import assert from 'node:assert/strict';

const BASE = process.env.SLUICE_URL;
const { hostname: HOST, port: PORT } = new URL(BASE);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const want = (name) => !process.env.SLUICE_ONLY || process.env.SLUICE_ONLY.split(',').includes(name);

async function post(path, body) {
  const r = await fetch(BASE + path, { method: 'POST', body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, text, json };
}
const health = async () => (await fetch(BASE + '/health')).json();
async function metric(name) {
  const t = await (await fetch(BASE + '/metrics')).text();
  const line = t.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.split(' ')[1]) : NaN;
}

// A request on a raw socket that the test closes itself (leave()).
function open(body) {
  const s = net.connect(Number(PORT), HOST);
  const b = JSON.stringify(body);
  s.on('connect', () => s.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                                `Content-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`));
  s.on('error', () => {});
  return { leave: () => s.destroy() };
}

// Polls until cond(health) holds; the milliseconds it took, or fails after ms.
async function until(what, cond, ms) {
  const t0 = Date.now();
  for (;;) {
    const h = await health();
    if (cond(h)) return Date.now() - t0;
    assert.ok(Date.now() - t0 < ms, `${what}: still ${JSON.stringify(h)} after ${ms} ms`);
    await sleep(50);
  }
}

const LONG = { prompt: 'Once upon a time', max_tokens: 8000, temperature: 0 };

// ---- 2a. a non-streaming client that leaves: cancelled, slot freed within about a second ----
if (want('leave_running')) {
  const before = await metric('sluice_requests_total{outcome="cancelled"}');
  const c = open(LONG);
  await until('the long request starts', (h) => h.slots_busy === 1, 5000);
  await sleep(300);
  c.leave();
  const ms = await until('after its client left', (h) => h.slots_busy === 0, 1500);
  assert.equal(await metric('sluice_requests_total{outcome="cancelled"}'), before + 1, 'the request was not counted as cancelled');
  console.log(`cancel.mjs: a non-streaming request whose client left freed its slot in ${ms} ms`);
}

// ---- 2a'. a client that leaves while its long prompt is still being evaluated (no token yet) ----
if (want('leave_prefill')) {
  const c = open({ ...LONG, prompt: 'Once upon a time there was a little dog. '.repeat(200) });   // ~2200 tokens
  await until('the long prompt starts', (h) => h.slots_busy === 1, 5000);
  await sleep(300);
  c.leave();
  const ms = await until('after its client left during the prompt', (h) => h.slots_busy === 0, 1500);
  console.log(`cancel.mjs: a request whose client left during its prompt freed its slot in ${ms} ms`);
}

// ---- 2b. queued clients that leave give up their places at once ----
if (want('leave_queued')) {
  const a = open(LONG);
  await until('the running request starts', (h) => h.slots_busy === 1, 5000);
  const b = open(LONG), c = open({ ...LONG, stream: true });
  await until('two requests queued', (h) => h.queued === 2, 3000);
  b.leave();
  c.leave();
  const ms = await until('after the queued clients left', (h) => h.queued === 0, 1500);
  // their places are free: two more are queued (a third would get 503)
  const d = open(LONG), e = open(LONG);
  await until('two new requests queued', (h) => h.queued === 2, 3000);
  const f = await post('/v1/completions', LONG);
  assert.equal(f.status, 503, `a third queued request: ${f.status}`);
  for (const x of [a, d, e]) x.leave();
  await until('everything cancelled', (h) => h.slots_busy === 0 && h.queued === 0, 3000);
  console.log(`cancel.mjs: two queued requests whose clients left gave their places up in ${ms} ms`);
}

// ---- 3. request fields: honoured, or refused naming them ----
if (want('fields')) {
  const refuse = async (path, body, field) => {
    const r = await post(path, body);
    assert.equal(r.status, 400, `${field}: ${r.status} ${r.text.slice(0, 200)}`);
    assert.ok(r.json.error.message.includes(`'${field}'`), `${field}: ${r.json.error.message}`);
  };
  const msgs = [{ role: 'user', content: 'Tell me a story.' }];
  await refuse('/v1/chat/completions', { messages: msgs, tools: [{ type: 'function', function: { name: 'f' } }] }, 'tools');
  await refuse('/v1/chat/completions', { messages: msgs, tool_choice: 'required' }, 'tool_choice');
  // response_format is honoured (constrained decoding, tests/serve/json_schema.mjs); what it cannot enforce is refused
  await refuse('/v1/chat/completions', { messages: msgs, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: 'a' } } } }, 'pattern');
  await refuse('/v1/chat/completions', { messages: msgs, response_format: { type: 'xml' } }, 'response_format.type');
  {  // this server runs with --ignore-eos; a constrained answer still ends where its value does
    const r = await post('/v1/chat/completions', { messages: msgs, max_tokens: 60, response_format: { type: 'json_schema',
      json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] } } } });
    assert.equal(r.status, 200, `response_format with --ignore-eos: ${r.status} ${r.text.slice(0, 200)}`);
    assert.equal(r.json.choices[0].finish_reason, 'stop', r.text.slice(0, 300));
    assert.equal(typeof JSON.parse(r.json.choices[0].message.content).a, 'number', r.text.slice(0, 300));
  }
  await refuse('/v1/completions', { prompt: 'x', echo: true }, 'echo');
  await refuse('/v1/completions', { prompt: 'x', logit_bias: { 1: 5 } }, 'logit_bias');
  await refuse('/v1/completions', { prompt: 'x', suffix: 'and then' }, 'suffix');
  await refuse('/v1/completions', { prompt: 'x', best_of: 3 }, 'best_of');
  await refuse('/v1/completions', { prompt: 'x', mystery_option: 1 }, 'mystery_option');
  await refuse('/v1/completions', { prompt: 'x', top_logprobs: 2 }, 'top_logprobs');   // a chat field
  await refuse('/v1/completions', { prompt: 'x', logprobs: 6 }, 'logprobs');
  await refuse('/v1/chat/completions', { messages: msgs, top_logprobs: 3 }, 'top_logprobs');   // without logprobs: true
  await refuse('/v1/chat/completions', { messages: msgs, top_logprobs: 21, logprobs: true }, 'top_logprobs');
  await refuse('/v1/chat/completions', { messages: [{ role: 'user', content: 'x', name: 'bob' }] }, 'messages');
  await refuse('/v1/chat/completions', { messages: msgs, max_tokens: 5, max_completion_tokens: 7 }, 'max_completion_tokens');
  await refuse('/v1/completions', { prompt: 'x', stream: true, stream_options: { include_usage: true, obfuscate: true } }, 'stream_options');
  // the values that ask for nothing are accepted
  for (const extra of [{ echo: false }, { logit_bias: {} }, { user: 'u1' }]) {
    const r = await post('/v1/completions', { prompt: 'Once upon a time', max_tokens: 2, ...extra });
    assert.equal(r.status, 200, `${JSON.stringify(extra)}: ${r.status} ${r.text.slice(0, 200)}`);
  }
  for (const extra of [{ tools: [] }, { tool_choice: 'none' }, { response_format: { type: 'text' } }, { store: false }]) {
    const r = await post('/v1/chat/completions', { messages: msgs, max_tokens: 2, ...extra });
    assert.equal(r.status, 200, `${JSON.stringify(extra)}: ${r.status} ${r.text.slice(0, 200)}`);
  }
}

// ---- 3. logprobs, both endpoints, streaming and not ----
async function stream(path, body) {
  const r = await fetch(BASE + path, { method: 'POST', body: JSON.stringify({ ...body, stream: true }) });
  assert.equal(r.status, 200);
  const text = await r.text();
  const events = text.split('\n\n').filter((e) => e.startsWith('data: ') && e !== 'data: [DONE]').map((e) => JSON.parse(e.slice(6)));
  assert.ok(text.trim().endsWith('data: [DONE]'), 'the stream did not end with [DONE]');
  return events;
}
const close = (a, b) => Math.abs(a - b) < 1e-4;

if (want('logprobs')) {
  const N = 12;
  const base = { max_tokens: N, temperature: 0, return_tokens: true };
  // completions: logprobs N → tokens, token_logprobs, top_logprobs (N each, the chosen greedy token
  // first), text_offset; the tokens' texts make up the text
  const c = await post('/v1/completions', { prompt: 'Once upon a time', logprobs: 3, ...base });
  assert.equal(c.status, 200, c.text.slice(0, 300));
  const ch = c.json.choices[0], lp = ch.logprobs;
  assert.ok(lp && Array.isArray(lp.tokens), `completions: no logprobs in ${c.text.slice(0, 300)}`);
  assert.equal(lp.tokens.length, N);
  assert.equal(lp.tokens.join(''), ch.text, 'the logprobs tokens do not make up the text');
  assert.equal(lp.token_logprobs.length, N);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 0; i < N; i++) {
    assert.ok(lp.token_logprobs[i] <= 0, `token_logprobs[${i}] = ${lp.token_logprobs[i]}`);
    const top = Object.entries(lp.top_logprobs[i]);
    assert.ok(top.length >= 1 && top.length <= 3, `top_logprobs[${i}]: ${JSON.stringify(top)}`);
    // (the server runs with --ignore-eos: the chosen token is the most likely one but for end-of-text tokens)
    const best = Math.max(...top.map(([, v]) => v));
    assert.ok(best >= lp.token_logprobs[i] - 1e-4, `top_logprobs[${i}] are below the chosen token`);
    const self = lp.top_logprobs[i][lp.tokens[i]];
    if (self !== undefined) assert.ok(close(self, lp.token_logprobs[i]), `at ${i} the chosen token's two figures differ`);
    if (i) assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + [...lp.tokens[i - 1]].length);
  }
  // the same request streamed: the same tokens and figures, chunk by chunk
  const ev = await stream('/v1/completions', { prompt: 'Once upon a time', logprobs: 3, ...base });
  const sl = ev.flatMap((e) => (e.choices[0] && e.choices[0].logprobs ? e.choices[0].logprobs.token_logprobs : []));
  const st = ev.flatMap((e) => (e.choices[0] && e.choices[0].logprobs ? e.choices[0].logprobs.tokens : []));
  assert.deepEqual(st, lp.tokens, 'streamed logprobs tokens differ');
  assert.ok(sl.length === N && sl.every((v, i) => close(v, lp.token_logprobs[i])), 'streamed token_logprobs differ');
  // logprobs: 0 → the chosen tokens only
  const z = await post('/v1/completions', { prompt: 'Once upon a time', logprobs: 0, ...base });
  assert.ok(z.json.choices[0].logprobs.top_logprobs.every((t) => Object.keys(t).length === 0));
  // without logprobs: null
  const n = await post('/v1/completions', { prompt: 'Once upon a time', ...base });
  assert.equal(n.json.choices[0].logprobs, null);

  // chat: logprobs true, top_logprobs 2 → content[] of {token, logprob, bytes, top_logprobs[]}
  const body = { messages: [{ role: 'user', content: 'Tell me a story.' }], logprobs: true, top_logprobs: 2, ...base };
  const r = await post('/v1/chat/completions', body);
  assert.equal(r.status, 200, r.text.slice(0, 300));
  const content = r.json.choices[0].logprobs.content;
  assert.ok(content.length >= 1 && content.length <= N);
  assert.equal(content.map((t) => t.token).join(''), r.json.choices[0].message.content);
  for (const t of content) {
    assert.equal(Buffer.from(t.bytes).toString('utf8'), t.token);
    assert.equal(t.top_logprobs.length, 2);
    assert.ok(t.top_logprobs[0].logprob >= t.logprob - 1e-4, 'the top alternative is less likely than the chosen token');
    assert.ok(t.top_logprobs[1].logprob <= t.top_logprobs[0].logprob);
    const self = t.top_logprobs.find((a) => a.token === t.token);
    if (self) assert.ok(close(self.logprob, t.logprob), "the chosen token's two figures differ");
  }
  const cev = await stream('/v1/chat/completions', body);
  const sc = cev.flatMap((e) => (e.choices[0] && e.choices[0].logprobs ? e.choices[0].logprobs.content : []));
  assert.deepEqual(sc.map((t) => t.token), content.map((t) => t.token), 'streamed chat logprobs differ');
  assert.ok(sc.every((t, i) => close(t.logprob, content[i].logprob)));
  // a stop string cuts the text: no logprobs for what was cut
  const s = await post('/v1/completions', { prompt: 'Once upon a time', logprobs: 1, stop: [lp.tokens[3]], ...base });
  assert.equal(s.json.choices[0].finish_reason, 'stop');
  const kept = s.json.choices[0].logprobs.tokens;
  assert.ok(kept.length <= 4 && kept.join('').startsWith(s.json.choices[0].text), `after a stop string: ${JSON.stringify(kept)}`);
  console.log('cancel.mjs: logprobs on both endpoints, streamed and not, agree and follow the text');
}
console.log('cancel.mjs: departed clients freed their places; every field honoured or refused by name');
