// tests/serve/prompt_cache_disk.mjs — the prompt cache's disk tier (`sluice serve --prompt-cache-dir`).
// CACHED_URL: one slot, the disk tier in CACHE_DIR; PLAIN_URL: one slot, --no-prompt-cache; both
// --ignore-eos.  Two conversations of random token ids (over 256 tokens: a whole block) take turns in
// the one slot, so each turn first writes the other conversation's KV to the directory and then loads
// its own back: usage.prompt_tokens_details.cached_tokens is exactly the tokens the loaded file holds
// (the first turn's prompt and answer but its last token), the tokens are those of the server without
// the cache, /metrics counts the files written and read, and files in the directory that the server
// did not write (one named like its own) are still there, unchanged.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import OpenAI from 'openai';
import { metrics as metricsAt, tokenSource } from './prompt_cache_util.mjs';

const N = 8;
const { tokens: randTokens } = tokenSource('prompt_cache_disk.mjs');
const opts = { apiKey: 'none', maxRetries: 0, timeout: 300000 };
const cached = new OpenAI({ ...opts, baseURL: process.env.CACHED_URL });
const plain = new OpenAI({ ...opts, baseURL: process.env.PLAIN_URL });
const dir = process.env.CACHE_DIR;

const metrics = () => metricsAt(process.env.CACHED_URL);

async function both(prompt, what) {
  const req = { model: 'm', prompt, max_tokens: N, temperature: 0, return_tokens: true };
  const [a, b] = await Promise.all([cached.completions.create(req), plain.completions.create(req)]);
  assert.deepEqual(a.choices[0].tokens, b.choices[0].tokens, `${what}: the prompt cache changed the tokens`);
  assert.equal(a.choices[0].tokens.length, N);
  return { tokens: a.choices[0].tokens, cached: a.usage.prompt_tokens_details.cached_tokens };
}

// files that are not the server's: never touched
fs.writeFileSync(`${dir}/sluice-pcache-00000000deadbeef-300.session`, 'not the server\'s');
fs.writeFileSync(`${dir}/notes.txt`, 'mine');

const m0 = await metrics();
const A1 = randTokens(300), B1 = randTokens(300);
B1[0] = A1[0] === 3 ? 4 : 3;
const a1 = await both(A1, 'A turn 1');
const b1 = await both(B1, 'B turn 1');
assert.equal(a1.cached + b1.cached, 0, 'first turns share nothing');
const A2 = [...A1, ...a1.tokens, ...randTokens(20)], B2 = [...B1, ...b1.tokens, ...randTokens(20)];
const a2 = await both(A2, 'A turn 2');
assert.equal(a2.cached, A1.length + N - 1, 'A turn 2: cached_tokens from the file');
const b2 = await both(B2, 'B turn 2');
assert.equal(b2.cached, B1.length + N - 1, 'B turn 2: cached_tokens from the file');
const m1 = await metrics();
const d = (k) => m1[k] - m0[k];
assert.equal(d('sluice_prompt_cache_saves_total'), 3, 'files written: A (for B), B (for A 2), A 2 (for B 2)');
assert.equal(d('sluice_prompt_cache_loads_total'), 2, 'files read: A, B');
assert.equal(d('sluice_prompt_cache_disk_errors_total'), 0);
assert.equal(m1.sluice_prompt_cache_disk_files, 3);
const ours = fs.readdirSync(dir).filter((f) => /^sluice-pcache-[0-9a-f]{16}-\d+\.session$/.test(f) && !f.includes('deadbeef'));
assert.equal(ours.length, 3, `the directory holds ${ours.join(', ')}`);
const bytes = ours.reduce((s, f) => s + fs.statSync(`${dir}/${f}`).size, 0);
assert.equal(m1.sluice_prompt_cache_disk_bytes, bytes, '/metrics: the files\' bytes');
assert.equal(fs.readFileSync(`${dir}/sluice-pcache-00000000deadbeef-300.session`, 'utf8'), 'not the server\'s');
assert.equal(fs.readFileSync(`${dir}/notes.txt`, 'utf8'), 'mine');
console.log(`prompt_cache_disk.mjs: 2 conversations through 1 slot, each second turn loaded from the disk tier ` +
            `(${bytes} bytes in 3 files), tokens identical to --no-prompt-cache`);
