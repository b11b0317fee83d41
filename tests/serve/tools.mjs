// tests/serve/tools.mjs — tool calls and reasoning through the official OpenAI client (npm `openai`),
// against one server (serve_test.sh starts one per chat template; the models have random weights).
// A tool-call round trip, not streamed and streamed: a request with tools and tool_choice naming
// the function (constrained decoding makes even random weights write a valid call) answers with a
// tool_call whose arguments parse as JSON valid against the tool's schema, finish_reason
// "tool_calls"; the tool's result sent back as a `tool` message gets a normal answer.
// tool_choice "required" calls one of two tools; "none" and a plain chat answer have no calls.
// REASONING=1 (Qwen3's template): an answer without a <think> block is all content, no
// reasoning_content (the split itself is tests/test_serve_tools.c's, on recorded output).
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.SLUICE_URL, apiKey: 'none', maxRetries: 0, timeout: 120000 });
const label = process.env.LABEL;

const weather = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'The weather in a city',
    parameters: {
      type: 'object', additionalProperties: false, required: ['city', 'unit'],
      properties: {
        city: { type: 'string', minLength: 1, maxLength: 12 },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        days: { type: 'integer', minimum: 1, maximum: 7 },
      },
    },
  },
};
const time = {
  type: 'function',
  function: { name: 'get_time', description: 'The time somewhere',
              parameters: { type: 'object', additionalProperties: false, required: ['zone'],
                            properties: { zone: { type: 'string', enum: ['UTC', 'CET'] }, exact: { type: 'boolean' } } } },
};

// The subset of JSON Schema the two tools use, checked by hand: every violation is named.
function validate(v, s, path = '$') {
  if (s.type === 'object') {
    assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), `${path}: not an object`);
    for (const k of s.required ?? []) assert.ok(k in v, `${path}: '${k}' missing`);
    for (const k of Object.keys(v)) {
      assert.ok(k in s.properties || s.additionalProperties !== false, `${path}: '${k}' not allowed`);
      if (k in s.properties) validate(v[k], s.properties[k], `${path}.${k}`);
    }
  } else if (s.type === 'string') {
    assert.equal(typeof v, 'string', `${path}: not a string`);
    const n = [...v].length;
    assert.ok(n >= (s.minLength ?? 0) && n <= (s.maxLength ?? Infinity), `${path}: length ${n}`);
  } else if (s.type === 'integer') {
    assert.ok(Number.isInteger(v) && v >= s.minimum && v <= s.maximum, `${path}: ${v} not an integer in range`);
  } else if (s.type === 'boolean') {
    assert.equal(typeof v, 'boolean', `${path}: not a boolean`);
  }
  if (s.enum) assert.ok(s.enum.includes(v), `${path}: ${JSON.stringify(v)} not in the enum`);
}

function checkCall(c, tools, what) {
  assert.match(c.id, /^call_[A-Za-z0-9]{24}$/, `${what}: id ${c.id}`);
  assert.equal(c.type, 'function', what);
  const tool = tools.find((t) => t.function.name === c.function.name);
  assert.ok(tool, `${what}: called ${c.function.name}, not one of the tools`);
  assert.equal(typeof c.function.arguments, 'string', `${what}: arguments must be a JSON string`);
  validate(JSON.parse(c.function.arguments), tool.function.parameters);
}

const base = [{ role: 'system', content: 'You can look up the weather.' }, { role: 'user', content: 'Weather in Paris?' }];

async function streamed(req) {
  const s = await client.chat.completions.create({ ...req, stream: true });
  let content = '', reasoning = '', finish = null;
  const calls = [];
  for await (const ch of s) {
    const d = ch.choices[0]?.delta ?? {};
    if (d.content) content += d.content;
    if (d.reasoning_content) reasoning += d.reasoning_content;
    for (const t of d.tool_calls ?? []) {
      if (!calls[t.index]) {   // a call's first chunk: index, id, type, name (arguments follow)
        assert.ok(t.id && t.type === 'function' && t.function?.name, `${label}: first tool_calls chunk ${JSON.stringify(t)}`);
        calls[t.index] = { id: t.id, type: t.type, function: { name: t.function.name, arguments: t.function.arguments ?? '' } };
      } else {
        calls[t.index].function.arguments += t.function?.arguments ?? '';
      }
    }
    if (ch.choices[0]?.finish_reason) finish = ch.choices[0].finish_reason;
  }
  return { message: { content, reasoning_content: reasoning || undefined, tool_calls: calls.length ? calls : undefined }, finish };
}

async function whole(req) {
  const r = await client.chat.completions.create(req);
  return { message: r.choices[0].message, finish: r.choices[0].finish_reason };
}

async function roundTrip(stream) {
  const what = `${label} ${stream ? 'streamed' : 'whole'}`;
  const ask = stream ? streamed : whole;
  const req = { model: 'm', messages: base, tools: [weather, time], max_tokens: 300, temperature: 1, seed: stream ? 7 : 3,
                tool_choice: { type: 'function', function: { name: 'get_weather' } } };
  const a = await ask(req);
  assert.equal(a.finish, 'tool_calls', `${what}: finish_reason ${a.finish} (${JSON.stringify(a.message)})`);
  assert.equal(a.message.tool_calls?.length, 1, `${what}: ${JSON.stringify(a.message)}`);
  const call = a.message.tool_calls[0];
  checkCall(call, [weather], what);
  // the result goes back; the answer is a normal one
  const messages = [...base, { role: 'assistant', content: null, tool_calls: [call] },
                    { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' }];
  const b = await ask({ model: 'm', messages, tools: [weather, time], max_tokens: 16, temperature: 0 });
  assert.ok(b.finish === 'stop' || b.finish === 'length', `${what}: answer after the result: ${b.finish}`);
  assert.equal(typeof b.message.content, 'string', `${what}: the answer has no content`);
  assert.equal(b.message.tool_calls, undefined, `${what}: the answer calls a tool: ${JSON.stringify(b.message)}`);
  return call;
}

const ids = new Set();
for (const stream of [false, true]) ids.add((await roundTrip(stream)).id);
assert.equal(ids.size, 2, `${label}: call ids repeat`);

// "required": one of the two tools (gpt-oss: its header names the tool, so one tool only; two are a 400)
const choices = process.env.HARMONY === '1' ? [time] : [weather, time];
for (const stream of [false, true]) {
  const ask = stream ? streamed : whole;
  for (const seed of [1, 2, 3]) {
    const a = await ask({ model: 'm', messages: base, tools: choices, tool_choice: 'required', max_tokens: 300,
                          temperature: 1, seed });
    assert.equal(a.finish, 'tool_calls', `${label} required: ${a.finish}`);
    checkCall(a.message.tool_calls[0], choices, `${label} required`);
  }
}
if (process.env.HARMONY === '1') {
  await assert.rejects(whole({ model: 'm', messages: base, tools: [weather, time], tool_choice: 'required' }),
                       (e) => e.status === 400 && /name the function/.test(e.message), `${label}: required with two tools`);
}

// "none": tools neither rendered nor parsed; a plain chat: content only
const none = await whole({ model: 'm', messages: base, tools: [weather], tool_choice: 'none', max_tokens: 12, temperature: 0 });
assert.equal(none.message.tool_calls, undefined);
assert.equal(typeof none.message.content, 'string');
if (process.env.REASONING === '1') {
  for (const ask of [whole, streamed]) {
    const r = await ask({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 12, temperature: 0 });
    assert.ok(r.message.content.length > 0, `${label}: no content`);
    assert.ok(!r.message.reasoning_content, `${label}: reasoning_content without a think block`);
  }
}
console.log(`tools.mjs: ${label}: forced calls valid against their schemas, round trips answered, streaming and not`);
