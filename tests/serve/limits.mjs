// tests/serve/limits.mjs — slow, hoarding and malformed clients against `sluice serve` (issue 41,
// items 1, 5 and 7).  serve_test.sh starts the server on 127.0.0.1 with --max-connections 200
// --max-per-client 40 --request-timeout 3 --timeout 30 --max-tokens 64 (mini-llama3, --parallel 2).
// Every attacker below is on loopback; its connections come from other loopback addresses
// (127.0.0.2 and up) than the well-behaved client's (127.0.0.1), as distinct hosts would, so the
// per-address cap does not hide the rest.  Every loop is bounded in count and time.
import net from 'node:net';
import assert from 'node:assert/strict';

const BASE = process.env.SLUICE_URL;
const { hostname: HOST, port: PORT } = new URL(BASE);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const LIMIT_MS = Number(process.env.SLUICE_ANSWER_MS || 2000);   // "within a second or two"
// SLUICE_ONLY=name,name: only those parts (to see each fail alone against an older server)
const want = (name) => !process.env.SLUICE_ONLY || process.env.SLUICE_ONLY.split(',').includes(name);

// One request on its own connection from `from`; { status, body, ms } or { status: 0 } when the
// server gave nothing within `ms` (the connection is then given up).
function request(method, path, body = null, { from = '127.0.0.1', ms = 10000 } = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const s = net.connect({ port: Number(PORT), host: HOST, localAddress: from });
    let got = Buffer.alloc(0);
    const done = () => {
      clearTimeout(timer);
      s.destroy();
      const text = got.toString('utf8');
      const m = /^HTTP\/1\.1 (\d+)/.exec(text);
      resolve({ status: m ? Number(m[1]) : 0, text, body: text.slice(text.indexOf('\r\n\r\n') + 4), ms: Date.now() - t0 });
    };
    const timer = setTimeout(done, ms);
    s.on('connect', () => {
      const b = body === null ? '' : body;
      s.write(`${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n` +
              `Content-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`);
    });
    s.on('data', (d) => { got = Buffer.concat([got, d]); });
    s.on('error', () => {});
    s.on('close', done);
  });
}

// The well-behaved client: /health and a short completion, each answered 200 within LIMIT_MS.
async function served(what) {
  const h = await request('GET', '/health', null, { ms: LIMIT_MS });
  assert.equal(h.status, 200, `${what}: /health: ${h.status ? h.status : 'no answer'} after ${h.ms} ms`);
  const c = await request('POST', '/v1/completions', JSON.stringify({ prompt: 'Once upon a time', max_tokens: 4, temperature: 0 }),
                          { ms: LIMIT_MS });
  assert.equal(c.status, 200, `${what}: a short completion: ${c.status ? c.status : 'no answer'} after ${c.ms} ms`);
  return Math.max(h.ms, c.ms);
}

// A slow-header client: the request line and a header, then one more header line every `every` ms
// (never the blank line).  Resolves when the server closes it, with what it answered.
function slowHeaders(from, every, maxMs) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const s = net.connect({ port: Number(PORT), host: HOST, localAddress: from });
    let got = '', n = 0, ticker = null, opened = false;
    const done = (closed) => {
      clearInterval(ticker);
      clearTimeout(timer);
      s.destroy();
      resolve({ opened, closed, text: got, ms: Date.now() - t0 });
    };
    const timer = setTimeout(() => done(false), maxMs);
    s.on('connect', () => {
      opened = true;
      s.write('GET /health HTTP/1.1\r\nHost: x\r\n');
      ticker = setInterval(() => { if (!s.destroyed) s.write(`X-Slow-${n++}: ${'a'.repeat(8)}\r\n`); }, every);
    });
    s.on('data', (d) => { got += d.toString('latin1'); });
    s.on('error', () => {});
    s.on('close', () => done(true));
  });
}

// ---- 1. slowloris from many addresses, more connections than --max-connections ----
if (want('slowloris')) {
  await served('before the attack');
  const N = 300;   // 30 from each of ten addresses (under the per-address cap of 40)
  const attackers = [];
  for (let i = 0; i < N; i++) {
    attackers.push(slowHeaders(`127.0.0.${2 + (i % 10)}`, 1000, 9000));
    if (i % 50 === 49) await sleep(20);
  }
  await sleep(1500);   // all of them in, headers dribbling
  let worst = 0;
  const t0 = Date.now();
  for (let k = 0; Date.now() - t0 < 5000 && k < 20; k++) {   // about 5 s under attack
    worst = Math.max(worst, await served(`${N} slow-header connections, round ${k}`));
    await sleep(200);
  }
  const res = await Promise.all(attackers);
  const answered = res.filter((r) => /^HTTP\/1\.1 (408|503)/.test(r.text)).length;
  const closed = res.filter((r) => r.closed).length;
  // each was closed by the server: cut at the connection limit (503) or at the deadline (408)
  assert.ok(closed >= N - 5, `only ${closed} of ${N} slow-header connections were closed by the server`);
  assert.ok(answered >= N / 2, `only ${answered} of ${N} slow-header connections got a 408 or 503`);
  const late = res.filter((r) => r.closed && r.ms > 3000 + 1500).length;
  assert.equal(late, 0, `${late} slow-header connections outlived the 3 s request deadline`);
  const m = (await request('GET', '/metrics')).body;
  const num = (name) => Number((m.split('\n').find((l) => l.startsWith(name + ' ')) || ' NaN').split(' ')[1]);
  assert.ok(num('sluice_request_timeouts_total') + num('sluice_connections_evicted_total') >= answered,
            `/metrics counts fewer timeouts and evictions than the ${answered} answered:\n${m}`);
  console.log(`limits.mjs: ${N} slow-header connections: the normal client answered within ${worst} ms at worst; ` +
              `${answered} got 408/503 (${num('sluice_request_timeouts_total')} timed out, ` +
              `${num('sluice_connections_evicted_total')} evicted, ${num('sluice_connections_refused_total')} refused)`);
}

// ---- 2. one address opening many connections: only --max-per-client of them are kept ----
if (want('per_client')) {
  const socks = [];
  let closedEarly = 0;
  for (let i = 0; i < 120; i++) {
    const s = net.connect({ port: Number(PORT), host: HOST, localAddress: '127.0.0.50' });
    s.on('error', () => {});
    s.on('close', () => { closedEarly++; });
    socks.push(s);
  }
  await sleep(700);
  assert.ok(closedEarly >= 120 - 40 - 2 && closedEarly <= 120 - 40 + 2,
            `120 connections from one address with --max-per-client 40: ${closedEarly} refused`);
  await served('with one address holding its 40 connections');
  for (const s of socks) s.destroy();
}

// ---- 3. the deadline: slow headers, a slow body, each 408 at the deadline and not at --timeout ----
if (want('deadline')) {
  const h = await slowHeaders('127.0.0.60', 500, 8000);
  assert.ok(h.closed && /^HTTP\/1\.1 408/.test(h.text), `slow headers: ${h.closed ? 'closed' : 'open'} after ${h.ms} ms: ${h.text.slice(0, 80)}`);
  assert.ok(h.ms >= 2500 && h.ms < 5000, `slow headers: closed after ${h.ms} ms, the deadline is 3 s`);
  assert.match(h.text, /did not arrive whole within 3 s/);
  const b = await new Promise((resolve) => {
    const t0 = Date.now();
    const s = net.connect({ port: Number(PORT), host: HOST, localAddress: '127.0.0.61' });
    let got = '';
    s.on('connect', () => s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"prom'));
    s.on('data', (d) => { got += d; });
    s.on('error', () => {});
    s.on('close', () => resolve({ text: got, ms: Date.now() - t0 }));
    setTimeout(() => { s.destroy(); }, 8000);
  });
  assert.ok(/^HTTP\/1\.1 408/.test(b.text) && b.ms < 5000, `slow body: after ${b.ms} ms: ${b.text.slice(0, 80)}`);
}

// ---- 4. at the connection limit, idle kept-alive connections make room first ----
if (want('idle_first')) {
  const idle = [];
  let idleClosed = 0;
  for (let i = 0; i < 200; i++) {   // 20 from each of ten addresses: the whole --max-connections
    idle.push(new Promise((resolve) => {
      const s = net.connect({ port: Number(PORT), host: HOST, localAddress: `127.0.0.${70 + (i % 10)}` });
      let answered = false;
      s.on('connect', () => s.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n'));   // kept alive afterwards
      s.on('data', () => { if (!answered) { answered = true; resolve(s); } });
      s.on('error', () => {});
      s.on('close', () => { if (answered) idleClosed++; else resolve(null); });
      setTimeout(() => resolve(null), 5000);
    }));
    if (i % 50 === 49) await sleep(20);
  }
  const socks = (await Promise.all(idle)).filter(Boolean);
  assert.ok(socks.length >= 190, `only ${socks.length} of 200 kept-alive connections got their answer`);
  const ms = await served(`${socks.length} idle kept-alive connections`);
  await sleep(300);
  assert.ok(idleClosed >= 1, 'at the connection limit no idle kept-alive connection was closed for the new one');
  console.log(`limits.mjs: at the limit with ${socks.length} idle kept-alive connections, the new client was answered ` +
              `in ${ms} ms; ${idleClosed} idle ones closed for it`);
  for (const s of socks) s.destroy();
}

// ---- 5. HTTP edge cases: one clean answer each ----
if (want('http_edges')) {
  const raw = (bytes, ms = 3000) => new Promise((resolve) => {
    const s = net.connect({ port: Number(PORT), host: HOST });
    let got = '';
    const t0 = Date.now();
    s.on('connect', () => s.write(bytes));
    s.on('data', (d) => { got += d.toString('latin1'); });
    s.on('error', () => {});
    s.on('close', () => resolve({ text: got, closed: true, ms: Date.now() - t0 }));
    setTimeout(() => { resolve({ text: got, closed: false, ms }); s.destroy(); }, ms);
  });
  for (const cl of ['-1', 'abc', '99999999999999999999999']) {
    const r = await raw(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${cl}\r\n\r\n`);
    const lines = r.text.match(/HTTP\/1\.1 \d+/g) || [];
    assert.equal(lines.length, 1, `Content-Length: ${cl}: ${lines.length} status lines in ${JSON.stringify(r.text.slice(0, 400))}`);
    assert.match(r.text, cl.length > 20 ? /^HTTP\/1\.1 413/ : /^HTTP\/1\.1 400/, `Content-Length: ${cl}`);
    assert.match(r.text, /Content-Length/, `Content-Length: ${cl}: the message does not name the header`);
    assert.ok(r.closed, `Content-Length: ${cl}: the connection stays open`);
  }
  // a line that is not a request line: closed at once (libmicrohttpd 0.9.75 shuts the socket before
  // telling anyone, so no answer can be written), never held
  for (const g of ['GARBAGE\r\n', 'hello world how are you\r\n\r\n', '\x16\x03\x01\x00\xa5\r\n']) {
    const r = await raw(g);
    assert.ok(r.closed && r.ms < 1000, `${JSON.stringify(g)}: ${r.closed ? 'closed after ' + r.ms + ' ms' : 'held open'}`);
    assert.ok(r.text === '' || /^HTTP\/1\.1 400/.test(r.text), `${JSON.stringify(g)}: ${r.text.slice(0, 80)}`);
  }
  // garbage without an end of line: held only until the request deadline, then 408
  const r = await raw('\x01\x02garbage without an end', 6000);
  assert.ok(r.closed && /^HTTP\/1\.1 408/.test(r.text) && r.ms < 5000, `garbage without an end of line: ${r.ms} ms: ${r.text.slice(0, 60)}`);
}

// ---- 7. max_tokens out of range names the real cap; a prompt that is a list of strings is refused clearly ----
if (want('body_edges')) {
  for (const mt of [-5, 0, 65, 100000]) {
    const r = await request('POST', '/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: mt }));
    assert.equal(r.status, 400, `max_tokens ${mt}: ${r.status}`);
    assert.match(JSON.parse(r.body).error.message, /'max_tokens'.*64/, `max_tokens ${mt}: ${r.body}`);
    assert.doesNotMatch(r.body, /1099511627776/, `max_tokens ${mt}: ${r.body}`);
  }
  const r = await request('POST', '/v1/completions', JSON.stringify({ prompt: ['Once upon', 'a time'] }));
  assert.equal(r.status, 400, `prompt as two strings: ${r.status}`);
  assert.match(JSON.parse(r.body).error.message, /'prompt'.*strings/, `prompt as two strings: ${r.body}`);
  await served('after the edge cases');
}
console.log('limits.mjs: slow, hoarding and malformed clients were cut off or answered; the normal client kept being served');
