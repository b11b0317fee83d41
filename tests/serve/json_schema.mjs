// tests/serve/json_schema.mjs — structured output through the official OpenAI client (npm `openai`):
// 100 answers sampled at temperature 1 on a random-weight model with response_format json_schema
// (streaming and not, concurrently, the server drafting n-grams so that batched draft verification
// runs under the mask), each parsed with JSON.parse and validated by ajv (an independent JSON Schema
// validator).  Every schema bounds its strings and arrays, so an answer is at most a few hundred
// bytes (each token at least one): with max_tokens 700 every answer must end by itself
// (finish_reason "stop"), which is asserted, not assumed.  json_object answers are JSON objects;
// unsupported keywords and malformed response_format are 400s naming what is wrong.
import assert from 'node:assert/strict';
import Ajv from 'ajv';
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.SLUICE_URL, apiKey: 'none', maxRetries: 0, timeout: 300000 });
const ajv = new Ajv({ strict: true, allErrors: true });
const MAX_TOKENS = 700;

const schemas = [
  { name: 'person', schema: {
      type: 'object', additionalProperties: false, required: ['name', 'age'],
      properties: {
        name: { type: 'string', minLength: 1, maxLength: 12 },
        age: { type: 'integer', minimum: 0, maximum: 120 },
        email: { type: ['string', 'null'], maxLength: 10 },
        tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, maxItems: 3 },
        score: { type: 'number', minimum: -1, maximum: 1 },
        ok: { type: 'boolean' },
      } } },
  { name: 'tool_call', schema: {
      anyOf: [
        { type: 'object', additionalProperties: false, required: ['name', 'arguments'],
          properties: { name: { const: 'get_weather' },
                        arguments: { type: 'object', additionalProperties: false, required: ['city'],
                                     properties: { city: { type: 'string', maxLength: 8 },
                                                   days: { type: 'integer', minimum: 1, maximum: 7 } } } } },
        { type: 'object', additionalProperties: false, required: ['name', 'arguments'],
          properties: { name: { const: 'get_time' },
                        arguments: { type: 'object', additionalProperties: false, required: ['tz'],
                                     properties: { tz: { enum: ['UTC', 'CET', 'PST'] } } } } },
      ] } },
  { name: 'list', schema: {
      $defs: { item: { type: 'object', additionalProperties: false, required: ['id'],
                       properties: { id: { type: 'integer', minimum: 1, maximum: 999 },
                                     label: { type: 'string', maxLength: 6 } } } },
      type: 'object', additionalProperties: false, required: ['items'],
      properties: { items: { type: 'array', items: { $ref: '#/$defs/item' }, minItems: 1, maxItems: 3 } } } },
];
const validators = schemas.map((s) => ajv.compile(s.schema));

async function ask(k, i, stream) {
  const req = { model: 'm', messages: [{ role: 'user', content: `Answer in JSON ${i}: {"name": "get_weather", "arguments": {"city": "Oslo"}}` }],
                temperature: 1, top_p: 1, top_k: 0, min_p: 0, seed: 1000 + i, max_tokens: MAX_TOKENS,
                response_format: { type: 'json_schema', json_schema: { name: schemas[k].name, schema: schemas[k].schema, strict: true } } };
  let content = '', finish = null, drafted = 0;
  if (stream) {
    const s = await client.chat.completions.create({ ...req, stream: true });
    for await (const ch of s) {
      content += ch.choices[0]?.delta?.content ?? '';
      if (ch.choices[0]?.finish_reason) finish = ch.choices[0].finish_reason;
    }
  } else {
    const r = await client.chat.completions.create(req);
    content = r.choices[0].message.content;
    finish = r.choices[0].finish_reason;
    drafted = r.timings?.drafted ?? 0;
  }
  assert.equal(finish, 'stop', `${schemas[k].name} #${i}: finish_reason ${finish} (the bounds should end every answer): ${content}`);
  let v;
  try { v = JSON.parse(content); } catch (e) { assert.fail(`${schemas[k].name} #${i}: not JSON (${e.message}): ${content}`); }
  assert.ok(validators[k](v), `${schemas[k].name} #${i}: ajv: ${ajv.errorsText(validators[k].errors)}: ${content}`);
  return drafted;
}

// 100 answers, 4 at a time (the server's slots), every third streamed
let drafted = 0, done = 0;
const jobs = Array.from({ length: 100 }, (_, i) => i);
async function worker() {
  while (jobs.length) {
    const i = jobs.shift();
    drafted += await ask(i % schemas.length, i, i % 3 === 0);
    done++;
  }
}
await Promise.all([worker(), worker(), worker(), worker()]);
assert.equal(done, 100);
assert.ok(drafted > 0, 'no drafts were verified: the batched verification under the mask was not exercised');

// json_object: any JSON object, which bounds nothing (a string may go on as long as the model likes):
// ten answers at temperature 1 (fixed seeds), every one that ends by itself is a JSON object; those
// that reach max_tokens are counted, not hidden, and most must end (random weights end a string when
// they happen to draw a quote)
let ended = 0;
for (let i = 0; i < 10; i++) {
  const req = { model: 'm', messages: [{ role: 'user', content: 'Give me an object.' }], temperature: 1, top_k: 0, top_p: 1,
                min_p: 0, seed: 7 + i, max_tokens: MAX_TOKENS, response_format: { type: 'json_object' } };
  let content = '', finish = null;
  if (i % 2) {
    for await (const ch of await client.chat.completions.create({ ...req, stream: true })) {
      content += ch.choices[0]?.delta?.content ?? '';
      if (ch.choices[0]?.finish_reason) finish = ch.choices[0].finish_reason;
    }
  } else {
    const r = await client.chat.completions.create(req);
    content = r.choices[0].message.content;
    finish = r.choices[0].finish_reason;
  }
  assert.ok(finish === 'stop' || finish === 'length', `json_object: ${finish}`);
  if (finish === 'length') continue;
  ended++;
  const v = JSON.parse(content);
  assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), `json_object gave ${content}`);
}
assert.ok(ended >= 5, `only ${ended} of 10 json_object answers ended within ${MAX_TOKENS} tokens`);

// refused: a 400 naming the problem
async function refused(rf, want) {
  try {
    await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }], max_tokens: 5, response_format: rf });
    assert.fail(`${JSON.stringify(rf)} was accepted`);
  } catch (e) {
    assert.equal(e.status, 400, `${JSON.stringify(rf)}: ${e}`);
    assert.ok(e.message.includes(want), `${JSON.stringify(rf)}: '${e.message}' does not say '${want}'`);
  }
}
await refused({ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^a+$' } } },
              "unsupported JSON Schema keyword 'pattern' (supported:");
await refused({ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { oneOf: [] } } } } },
              "unsupported JSON Schema keyword 'oneOf'");
await refused({ type: 'json_schema', json_schema: { name: 'x' } }, "needs 'schema'");
await refused({ type: 'json_schema', json_schema: { name: 'x', schema: {}, extra: 1 } }, "'response_format.json_schema.extra' is not supported");
await refused({ type: 'xml' }, 'not supported (supported: text, json_object, json_schema)');
await refused({ type: 'json_object', schema: {} }, "'response_format.schema' is not supported");
console.log(`json_schema: 100 sampled answers valid (ajv), all ended by themselves; ${drafted} drafts verified under the mask; ` +
            `json_object: ${ended} of 10 ended (each a JSON object)`);
