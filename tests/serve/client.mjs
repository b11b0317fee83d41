// tests/serve/client.mjs — `sluice serve` through the official OpenAI client (npm `openai`).
// EXPECT names a JSON file with, per prompt, the token ids `sluice run --temp 0` gives for it alone
// (serve_test.sh writes it); every request below runs concurrently with the others (more requests
// than the server has slots), and each must return exactly those ids, streaming and not.
import fs from 'node:fs';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const expect = JSON.parse(fs.readFileSync(process.env.EXPECT, 'utf8'));
const client = new OpenAI({ baseURL: process.env.SLUICE_URL, apiKey: process.env.SLUICE_KEY, maxRetries: 0, timeout: 120000 });
const N = expect.max_tokens;

// The server's tokens are those of `sluice run` up to where the server stopped: all N of them, or
// fewer when it stopped at an end-of-generation token or a stop string (finish_reason "stop").
function check(what, got, want, finish) {
  assert.ok(Array.isArray(got) && got.length > 0, `${what}: no tokens in the answer`);
  assert.deepEqual(got, want.slice(0, got.length), `${what}: tokens differ from sluice run alone`);
  if (finish === 'length') assert.equal(got.length, N, `${what}: finish_reason length after ${got.length} tokens`);
  else assert.equal(finish, 'stop', `${what}: finish_reason ${finish}`);
}

async function completion(e, i) {
  const r = await client.completions.create({ model: 'm', prompt: e.prompt, max_tokens: N, temperature: 0, return_tokens: true });
  check(`completion ${i}`, r.choices[0].tokens, e.tokens, r.choices[0].finish_reason);
  assert.equal(r.usage.completion_tokens, r.choices[0].tokens.length);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  return r.choices[0].text;
}

async function completionStream(e, i) {
  const s = await client.completions.create({ model: 'm', prompt: e.prompt, max_tokens: N, temperature: 0, stream: true,
                                              return_tokens: true });
  let text = '', finish = null, tokens = null;
  for await (const ch of s) {
    text += ch.choices[0].text;
    if (ch.choices[0].finish_reason) { finish = ch.choices[0].finish_reason; tokens = ch.choices[0].tokens; }
  }
  check(`streamed completion ${i}`, tokens, e.tokens, finish);
  return text;
}

async function chat(e, i, stream) {
  const req = { model: 'm', messages: [{ role: 'user', content: e.content }], max_tokens: N, temperature: 0,
                return_tokens: true };
  if (!stream) {
    const r = await client.chat.completions.create(req);
    check(`chat ${i}`, r.choices[0].tokens, e.tokens, r.choices[0].finish_reason);
    assert.equal(r.choices[0].message.role, 'assistant');
    return r.choices[0].message.content;
  }
  const s = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = '', finish = null, tokens = null, usage = null, role = null;
  for await (const ch of s) {
    if (ch.usage) usage = ch.usage;
    if (!ch.choices.length) continue;
    if (ch.choices[0].delta.role) role = ch.choices[0].delta.role;
    text += ch.choices[0].delta.content ?? '';
    if (ch.choices[0].finish_reason) { finish = ch.choices[0].finish_reason; tokens = ch.choices[0].tokens; }
  }
  check(`streamed chat ${i}`, tokens, e.tokens, finish);
  assert.equal(role, 'assistant');
  assert.ok(usage && usage.completion_tokens === tokens.length, 'streamed chat: usage chunk');
  return text;
}

const models = await client.models.list();
assert.ok(models.data.length === 1 && models.data[0].id, 'models.list');

// everything at once: completions plain and streamed, chats plain and streamed
const jobs = [];
expect.completions.forEach((e, i) => { jobs.push(completion(e, i)); jobs.push(completionStream(e, i)); });
expect.chats.forEach((e, i) => { jobs.push(chat(e, i, false)); jobs.push(chat(e, i, true)); });
const texts = await Promise.all(jobs);
// a request's text is the same streamed or not
for (let i = 0; i < expect.completions.length; i++) assert.equal(texts[2 * i], texts[2 * i + 1], `completion ${i}: streamed text differs`);
const c0 = 2 * expect.completions.length;
for (let i = 0; i < expect.chats.length; i++) assert.equal(texts[c0 + 2 * i], texts[c0 + 2 * i + 1], `chat ${i}: streamed text differs`);

// stop strings: the text ends just before the first occurrence, streamed or not (the stream holds
// back what could be the start of a stop string, so no piece of it leaks out)
{
  const full = texts[0];
  const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 4);
  assert.ok(stop.length === 4, 'stop-string test: the reference text is too short');
  const want = full.slice(0, full.indexOf(stop));
  const base = { model: 'm', prompt: expect.completions[0].prompt, max_tokens: N, temperature: 0, stop: ['\u0001never', stop] };
  const r = await client.completions.create(base);
  assert.equal(r.choices[0].text, want, 'stop string: text');
  assert.equal(r.choices[0].finish_reason, 'stop');
  let streamed = '';
  for await (const ch of await client.completions.create({ ...base, stream: true })) streamed += ch.choices[0].text;
  assert.equal(streamed, want, 'stop string: streamed text');
}

// a wrong key is refused with 401 through the client too
const bad = new OpenAI({ baseURL: process.env.SLUICE_URL, apiKey: 'wrong', maxRetries: 0 });
await assert.rejects(bad.models.list(), (e) => e.status === 401);
console.log(`client.mjs: ${jobs.length} concurrent requests, every one token-identical to sluice run alone`);
