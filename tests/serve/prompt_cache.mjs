// tests/serve/prompt_cache.mjs — the prompt cache of `sluice serve`, through the official OpenAI client.
// Two servers over the same model: CACHED_URL (the prompt cache on, the default) and PLAIN_URL
// (--no-prompt-cache), both with --parallel 2 and --ignore-eos (every answer has exactly N tokens).
// Two conversations of random token ids, interleaved: each second turn (the first turn's prompt, its
// answer, new tokens) must go to the slot holding its first turn and reuse exactly the tokens that
// slot's KV cache holds — the first turn's prompt and answer but the answer's last token, which was
// sampled and never evaluated — so usage.prompt_tokens_details.cached_tokens is that count, in a
// whole answer and in a stream's usage chunk; the same prompt resent reuses all but its last token;
// a chat conversation's second turn reuses some.  Every answer's tokens are those of the server
// without the cache, and /metrics counts what each server evaluated: the cached one exactly the
// reused tokens fewer (the prompt evaluation that the cache saves), hits and misses per request.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { metrics as metricsAt, tokenSource } from './prompt_cache_util.mjs';

const N = 12;
const { tokens: randTokens, between } = tokenSource('prompt_cache.mjs');

const opts = { apiKey: 'none', maxRetries: 0, timeout: 300000 };
const servers = {
  cached: { url: process.env.CACHED_URL, client: new OpenAI({ ...opts, baseURL: process.env.CACHED_URL }) },
  plain: { url: process.env.PLAIN_URL, client: new OpenAI({ ...opts, baseURL: process.env.PLAIN_URL }) },
};

async function metrics(srv) {
  const m = await metricsAt(srv.url);
  for (const k of ['sluice_prompt_tokens_total', 'sluice_prompt_tokens_cached_total', 'sluice_prompt_cache_hits_total',
                   'sluice_prompt_cache_misses_total'])
    assert.ok(Number.isInteger(m[k]), `/metrics has no ${k}`);
  return m;
}

// every answer is recorded per server: prompt tokens and cached tokens, for the /metrics check
const seen = { cached: [], plain: [] };

// A completion of token ids, streamed or not: { tokens, usage }.
async function complete(name, prompt, stream) {
  const c = servers[name].client;
  const req = { model: 'm', prompt, max_tokens: N, temperature: 0, return_tokens: true };
  let tokens, usage, finish;
  if (!stream) {
    const r = await c.completions.create(req);
    ({ tokens, finish_reason: finish } = r.choices[0]);
    usage = r.usage;
  } else {
    for await (const ch of await c.completions.create({ ...req, stream: true, stream_options: { include_usage: true } })) {
      if (ch.usage) usage = ch.usage;
      if (ch.choices.length && ch.choices[0].finish_reason) ({ tokens, finish_reason: finish } = ch.choices[0]);
    }
  }
  assert.equal(finish, 'length', `${name}: finish_reason ${finish} (the server runs with --ignore-eos)`);
  assert.equal(tokens.length, N);
  assert.ok(usage && usage.prompt_tokens === prompt.length, `${name}: usage ${JSON.stringify(usage)}`);
  assert.ok(usage.prompt_tokens_details && Number.isInteger(usage.prompt_tokens_details.cached_tokens),
            `${name}: no usage.prompt_tokens_details.cached_tokens in ${JSON.stringify(usage)}`);
  seen[name].push(usage);
  return { tokens, cached: usage.prompt_tokens_details.cached_tokens };
}

// The same request to both servers: identical tokens; the cached tokens of each.
async function both(prompt, stream, what) {
  const [a, b] = await Promise.all([complete('cached', prompt, stream), complete('plain', prompt, stream)]);
  assert.deepEqual(a.tokens, b.tokens, `${what}: the prompt cache changed the tokens`);
  assert.equal(b.cached, 0, `${what}: the server without the cache reports ${b.cached} cached tokens`);
  return a;
}

const m0 = { cached: await metrics(servers.cached), plain: await metrics(servers.plain) };

// first turns: two conversations whose first tokens differ (nothing in common)
const A1 = randTokens(between(60, 160)), B1 = randTokens(between(60, 160));
B1[0] = A1[0] === 3 ? 4 : 3;
const a1 = await both(A1, false, 'A turn 1');
assert.equal(a1.cached, 0, 'A turn 1: the server is fresh, nothing can be cached');
const b1 = await both(B1, true, 'B turn 1');
assert.equal(b1.cached, 0, 'B turn 1 shares nothing with A: it goes to the empty slot');

// second turns, at once: each reuses its own slot's prompt + answer (but the answer's last token)
const A2 = [...A1, ...a1.tokens, ...randTokens(between(5, 40))];
const B2 = [...B1, ...b1.tokens, ...randTokens(between(5, 40))];
const [a2, b2] = await Promise.all([both(A2, true, 'A turn 2'), both(B2, false, 'B turn 2')]);
assert.equal(a2.cached, A1.length + N - 1, 'A turn 2 (streamed): cached_tokens');
assert.equal(b2.cached, B1.length + N - 1, 'B turn 2: cached_tokens');

// the same prompt again: everything but its last token (whose logits the first sampled token needs)
const a3 = await both(A2, false, 'A turn 2 again');
assert.equal(a3.cached, A2.length - 1, 'the same prompt resent: cached_tokens');
assert.deepEqual(a3.tokens, a2.tokens);

// a prompt branching off conversation B's second turn halfway through its new tokens
const B3 = [...B2.slice(0, B1.length + N + 2), ...randTokens(10)];
B3[B1.length + N + 2] = B2[B1.length + N + 2] === 3 ? 4 : 3;
const b3 = await both(B3, false, 'B branch');
assert.equal(b3.cached, B1.length + N + 2, 'a branch off B turn 2: cached_tokens is the common prefix');

// a chat conversation: its second turn reuses (at least) part of the first turn's prompt
{
  const ask = (name, messages, stream) => servers[name].client.chat.completions.create(
    { model: 'm', messages, max_tokens: N, temperature: 0, return_tokens: true,
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}) });
  // a long first message, a short second one: the reused prefix is most of the second prompt
  const turn1 = [{ role: 'user', content: 'Tell me a story about a little dog called Max who found a red ball in the ' +
                   'park one sunny morning, played with it all day long with his friends the cat and the bird, lost it ' +
                   'in the tall grass near the pond, and looked for it everywhere until the sun went down.' }];
  const [c1, p1] = await Promise.all([ask('cached', turn1, false), ask('plain', turn1, false)]);
  assert.deepEqual(c1.choices[0].tokens, p1.choices[0].tokens, 'chat turn 1: tokens');
  seen.cached.push(c1.usage);
  seen.plain.push(p1.usage);
  const turn2 = [...turn1, { role: 'assistant', content: c1.choices[0].message.content },
                 { role: 'user', content: 'And then?' }];
  const [c2, p2] = [await ask('cached', turn2, true), await ask('plain', turn2, false)];
  let tokens, usage;
  for await (const ch of c2) {
    if (ch.usage) usage = ch.usage;
    if (ch.choices.length && ch.choices[0].finish_reason) tokens = ch.choices[0].tokens;
  }
  assert.deepEqual(tokens, p2.choices[0].tokens, 'chat turn 2: the prompt cache changed the tokens');
  assert.ok(usage, 'chat turn 2: no usage chunk in the stream');
  seen.cached.push(usage);
  seen.plain.push(p2.usage);
  const cached = usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached > 0 && cached < usage.prompt_tokens && cached >= c1.usage.prompt_tokens / 2,
            `chat turn 2: cached_tokens ${cached} of ${usage.prompt_tokens} (turn 1's prompt: ${c1.usage.prompt_tokens})`);
  console.log(`prompt_cache.mjs: chat turn 2 reused ${cached} of ${usage.prompt_tokens} prompt tokens`);
}

// /metrics: each server evaluated the prompt tokens it did not reuse; hits and misses per request
const m1 = { cached: await metrics(servers.cached), plain: await metrics(servers.plain) };
const d = (name, k) => m1[name][k] - m0[name][k];
const sum = (name, f) => seen[name].reduce((s, u) => s + f(u), 0);
for (const name of ['cached', 'plain']) {
  const prompt = sum(name, (u) => u.prompt_tokens), reused = sum(name, (u) => u.prompt_tokens_details.cached_tokens);
  assert.equal(d(name, 'sluice_prompt_tokens_total'), prompt - reused, `${name}: prompt tokens evaluated`);
  assert.equal(d(name, 'sluice_prompt_tokens_cached_total'), reused, `${name}: prompt tokens reused`);
  const hits = seen[name].filter((u) => u.prompt_tokens_details.cached_tokens > 0).length;
  assert.equal(d(name, 'sluice_prompt_cache_hits_total'), hits, `${name}: hits`);
  assert.equal(d(name, 'sluice_prompt_cache_misses_total'), name === 'cached' ? seen[name].length - hits : 0,
               `${name}: misses`);
}
const evCached = d('cached', 'sluice_prompt_tokens_total'), evPlain = d('plain', 'sluice_prompt_tokens_total');
assert.ok(evCached < evPlain / 2, `the cache evaluated ${evCached} prompt tokens, without it ${evPlain}`);
console.log(`prompt_cache.mjs: ${seen.cached.length} requests, token-identical with and without the cache; prompt ` +
            `tokens evaluated ${evCached} with the cache, ${evPlain} without`);
