// tests/serve/webui.mjs — the web page of `sluice serve` in a real browser (Debian's chromium, driven
// by playwright-core), run by serve_test.sh's webui part against a server it started on stories260K
// with --api-key, --ignore-eos and fixed rates.
//
// Env: SLUICE_URL (http://127.0.0.1:PORT), SLUICE_KEY, PLAN_JSON (what `sluice plan --json` printed for
// the server's options), SHOTS (folder for the screenshots), CHROMIUM (the browser; default: chromium
// on PATH), MODEL_NAME (the id the page must show), MODE (full, or moe: only the plan view of a
// mixture-of-experts model, its expert cache row and the live hit rate).  Checks, in order:
//   - the page's files: security headers, total size (printed; must stay under 60 KB), and no request
//     leaves the server (every other origin is aborted and fails the test; CSP also refuses them);
//   - the key: the page asks for it on a 401, refuses a wrong one, and works with the right one;
//   - the chat: temperature 0 and max_tokens from the settings, Enter sends, Shift+Enter is a new line;
//     the streamed answer (as Copy copies it, and as shown) equals the API's greedy answer;
//   - stop: a long answer stopped mid-way stops short (the server counts it cancelled, its slot frees)
//     and the page takes the next message; new conversation empties it;
//   - the plan view, opened with the keyboard: every budget figure equals sluice plan --json's, the
//     blocks drawn resident/streamed as planned, live figures equal /metrics' (idle), and move while
//     another client's answer streams;
//   - phone width: nothing wider than the screen.
import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const BASE = process.env.SLUICE_URL, KEY = process.env.SLUICE_KEY;
const PLAN = JSON.parse(fs.readFileSync(process.env.PLAN_JSON, 'utf8'));
const SHOTS = process.env.SHOTS;
const HERE = path.dirname(fileURLToPath(import.meta.url));
const MAX_PAGE_BYTES = 60 * 1024;
const PROMPT = 'Tell me a story about a little fox.', GREEDY_TOKENS = 48, LONG_TOKENS = 4000;
const MODE = process.env.MODE || 'full', MODEL_NAME = process.env.MODEL_NAME || 'stories260K.gguf';

let failures = 0;
function check(ok, what) {
  if (ok) console.log('webui: ok: ' + what);
  else { failures++; console.error('webui: FAIL: ' + what); }
}
function fatal(what) { console.error('webui: FAIL: ' + what); process.exit(1); }

function findChromium() {
  if (process.env.CHROMIUM) return process.env.CHROMIUM;
  for (const name of ['chromium', 'chromium-browser']) {
    try { return execFileSync('sh', ['-c', 'command -v ' + name], { encoding: 'utf8' }).trim(); } catch { /* next */ }
  }
  fatal('chromium is missing: scripts/install-deps.sh installs it (apt-get install chromium), or set CHROMIUM');
}

async function api(p, init = {}) {
  const r = await fetch(BASE + p, { ...init, headers: { Authorization: 'Bearer ' + KEY, ...(init.headers || {}) } });
  if (!r.ok) fatal(`${p}: HTTP ${r.status}: ${await r.text()}`);
  return r;
}
async function metrics() {
  const m = {};
  for (const line of (await (await api('/metrics')).text()).split('\n')) {
    if (!line || line[0] === '#') continue;
    const sp = line.lastIndexOf(' ');
    m[line.slice(0, sp)] = Number(line.slice(sp + 1));
  }
  return m;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- the renderer on its own (no browser): escaping first, code blocks, only http(s) links ----------
const { renderMarkdown } = await import(pathToFileURL(path.join(HERE, '../../runtime/serve/webui/markdown.js')));
{
  const h = renderMarkdown('<script>alert(1)</script> <img src=x onerror=alert(1)> "q"');
  check(!/<script|<img/.test(h) && h.includes('&lt;script&gt;') && h.includes('&quot;q&quot;'), 'markdown: HTML in the text stays text');
  const c = renderMarkdown('see `a<b`\n\n```c\nint x = 1 < 2;\n**not bold**\n```\n- one\n- **two**');
  check(c.includes('<code>a&lt;b</code>') && c.includes('<pre><code class="lang-c">int x = 1 &lt; 2;\n**not bold**</code></pre>') &&
        c.includes('<ul><li>one</li><li><strong>two</strong></li></ul>'), 'markdown: inline code, fenced code (verbatim), lists');
  const l = renderMarkdown('[ok](https://example.org/a?b=1&c=2) [bad](javascript:alert(1)) [q](https://x.org/"onmouseover=1)');
  check(l.includes('<a href="https://example.org/a?b=1&amp;c=2"') && !l.includes('href="javascript') && !/href="[^"]*"on/.test(l),
        'markdown: http(s) links only, no attribute breaks out');
  check(renderMarkdown('```\nstill streaming').includes('<pre><code>still streaming</code></pre>'), 'markdown: an unfinished fence is code so far');
}

// ---- what the API answers greedily for the prompt the page will send -------------------------------
async function greedyAnswer(maxTokens) {
  const r = await (await api('/v1/chat/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: PROMPT }], temperature: 0, max_tokens: maxTokens }),
  })).json();
  return r.choices[0].message.content;
}
const want = await greedyAnswer(GREEDY_TOKENS);
if (MODE === 'full' && (!want || want.length < 20)) fatal('the API\'s greedy answer is too short to compare: ' + JSON.stringify(want));

// ---- the browser -------------------------------------------------------------------------------------
const origin = new URL(BASE).origin;
const browser = await chromium.launch({ executablePath: findChromium(), headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update'] });
let exitCode = 1;
try {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
  const external = [], pageErrors = [], fileBytes = {};
  await context.route('**/*', (route) => {
    const u = route.request().url();
    if (new URL(u).origin !== origin) { external.push(u); return route.abort(); }
    return route.continue();
  });
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error' && !/401|Unauthorized|example\.org/.test(m.text())) pageErrors.push(m.text()); });
  page.on('response', async (r) => {
    const u = new URL(r.url());
    if (u.origin === origin && !u.pathname.startsWith('/v1/') && u.pathname !== '/metrics') {
      try { fileBytes[u.pathname] = (await r.body()).length; } catch { /* a body already gone */ }
    }
  });

  const resp = await page.goto(origin + '/');
  const hdr = resp.headers();
  check(/default-src 'self'/.test(hdr['content-security-policy'] || '') && hdr['x-content-type-options'] === 'nosniff',
        `the page's security headers (CSP "${hdr['content-security-policy']}", nosniff)`);

  // the key: asked on the first 401; a wrong one is refused and asked again
  const dialog = page.locator('#key-dialog');
  await dialog.waitFor({ state: 'visible', timeout: 10000 });
  await page.fill('#key-input', KEY + '-wrong');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('#key-dialog').open &&
    /refused/.test(document.querySelector('#key-dialog p').textContent), null, { timeout: 10000 });
  check(true, 'a wrong key is refused and asked for again');
  await page.fill('#key-input', KEY);
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('#model-name').textContent.length > 0, null, { timeout: 10000 });
  check(await page.textContent('#model-name') === MODEL_NAME, 'the right key: the model\'s name shown');
  check(await page.evaluate(() => sessionStorage.getItem('sluice.apiKey')) === KEY, 'the key is kept in sessionStorage');

  if (MODE === 'full') {   // the chat
    // the settings
    await page.click('#settings summary');
    await page.fill('#temperature', '0');
    await page.fill('#max_tokens', String(GREEDY_TOKENS));

    // Shift+Enter is a new line, not a send
    await page.focus('#input');
    await page.keyboard.type('a');
    await page.keyboard.press('Shift+Enter');
    await page.keyboard.type('b');
    check(await page.inputValue('#input') === 'a\nb' && await page.locator('.msg').count() === 0, 'Shift+Enter: a new line, nothing sent');
    await page.fill('#input', '');

    // Enter sends; the streamed answer equals the API's greedy one
    await page.keyboard.type(PROMPT);
    await page.keyboard.press('Enter');
    const answer = page.locator('.msg.assistant').last();
    await page.waitForFunction(() => { const a = [...document.querySelectorAll('.msg.assistant')].pop(); return a && a.dataset.finish; },
      null, { timeout: 60000 });
    check(await answer.getAttribute('data-finish') === 'length', 'the answer ran to max_tokens (finish_reason length)');
    await answer.locator('.msg-head button.copy').click();
    const copied = await page.evaluate(() => navigator.clipboard.readText());
    check(copied === want, `the streamed answer (as Copy copies it) equals the API's greedy answer\n  page: ${JSON.stringify(copied)}\n  API:  ${JSON.stringify(want)}`);
    const shown = (await answer.locator('.msg-body').textContent()).replace(/\s+/g, '');
    check(shown === want.replace(/\s+/g, ''), 'the answer shown equals it too (markdown-rendered, spaces aside)');
    await page.screenshot({ path: path.join(SHOTS, 'webui-chat.png') });

    // stop mid-answer: it stops short, the server cancels it, the page takes the next message
    const before = await metrics();
    await page.fill('#max_tokens', String(LONG_TOKENS));
    await page.fill('#input', 'Once upon a time, in a big forest,');
    await page.click('#send');
    await page.waitForFunction(() => { const a = [...document.querySelectorAll('.msg.assistant')].pop();
      return a.getAttribute('aria-busy') === 'true' && a.querySelector('.msg-body').textContent.length > 40; }, null, { timeout: 30000 });
    check(await page.isEnabled('#stop') && await page.isDisabled('#send'), 'while it streams: Stop enabled, Send disabled');
    await page.click('#stop');
    await page.waitForFunction(() => [...document.querySelectorAll('.msg.assistant')].pop().dataset.finish === 'stopped', null, { timeout: 10000 });
    let after = null;
    for (let i = 0; i < 50; i++) {
      after = await metrics();
      if (after.sluice_slots_busy === 0 && after['sluice_requests_total{outcome="cancelled"}'] > before['sluice_requests_total{outcome="cancelled"}']) break;
      await sleep(100);
    }
    const generated = after.sluice_completion_tokens_total - before.sluice_completion_tokens_total;
    check(after['sluice_requests_total{outcome="cancelled"}'] === before['sluice_requests_total{outcome="cancelled"}'] + 1 &&
          after.sluice_slots_busy === 0, 'stop: the server cancelled the request and freed its slot');
    check(generated > 0 && generated < LONG_TOKENS, `stop: the answer stopped short (${generated} of ${LONG_TOKENS} tokens)`);
    check(await page.isEnabled('#send') && await page.isDisabled('#stop') && !(await page.locator('#input').getAttribute('readonly')),
          'after stop: Send enabled, Stop disabled, the input editable');
    await page.fill('#max_tokens', '8');
    await page.fill('#input', 'And then?');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => [...document.querySelectorAll('.msg.assistant')].pop().dataset.finish === 'length', null, { timeout: 30000 });
    check(await page.locator('.msg').count() === 6, 'after stop the conversation goes on (three questions, three answers)');
    await page.click('#new-chat');
    check(await page.locator('.msg').count() === 0, 'new conversation: the messages are gone');

  }
  // the plan view, opened with the keyboard
  await page.focus('#tab-chat');
  await page.keyboard.press('ArrowRight');
  await page.waitForSelector('#plan-table tbody tr[data-field="total_bytes"]', { timeout: 10000 });
  check(await page.isVisible('#view-plan') && !(await page.isVisible('#view-chat')), 'the arrow key opens the plan view');
  const served = await (await api('/v1/plan')).json();
  const diff = Object.keys(PLAN).filter((k) => k !== 'smaller_files' && JSON.stringify(PLAN[k]) !== JSON.stringify(served[k]));
  check(diff.length === 0, 'GET /v1/plan is sluice plan --json\'s object' + (diff.length ? ': differs in ' + diff.join(', ') : ''));
  const rows = await page.$$eval('#plan-table tbody tr', (trs) => trs.map((tr) => [tr.dataset.field, tr.querySelector('.bytes').textContent]));
  const expect = { base_bytes: PLAN.base_bytes, meta_bytes: PLAN.meta_bytes, vocab_bytes: PLAN.vocab_bytes, norm_bytes: PLAN.norm_bytes,
    act_bytes: PLAN.act_bytes, kv_bytes: PLAN.kv_bytes, stream_buf_bytes: PLAN.stream_buf_bytes,
    resident_weights: PLAN.resident_bytes - (PLAN.expert_cache_bytes || 0), total_bytes: PLAN.total_bytes, budget: PLAN.budget,
    read_per_token: PLAN.read_per_token };
  if (PLAN.expert_cache_bytes != null) expect.expert_cache_bytes = PLAN.expert_cache_bytes;
  const shownRows = Object.fromEntries(rows.map(([k, v]) => [k, Number(v.replace(/,/g, ''))]));
  for (const [k, v] of Object.entries(expect)) check(shownRows[k] === v, `plan view: ${k} shows ${shownRows[k]}, sluice plan --json says ${v}`);
  const sumParts = rows.filter(([k]) => !['total_bytes', 'budget', 'read_per_token'].includes(k)).reduce((s, [, v]) => s + Number(v.replace(/,/g, '')), 0);
  check(sumParts === PLAN.total_bytes, 'plan view: the parts add up to the total');
  const resident = await page.locator('#blocks .block.resident:not(.head)').count();
  const streamed = await page.locator('#blocks .block.streamed:not(.head)').count();
  const headResident = await page.locator('#blocks .block.head.resident').count() === 1;
  check(resident === PLAN.blocks_resident && streamed === PLAN.n_layers - PLAN.blocks_resident && headResident === PLAN.lm_head_resident,
        `plan view: ${resident} blocks resident, ${streamed} streamed, LM head ${headResident ? 'resident' : 'streamed'} (as planned)`);
  // live figures: after two polls, the totals equal /metrics' (nothing runs meanwhile)
  await page.waitForFunction(() => /^[\d.]+$/.test(document.querySelector('[data-live="tok_s"] .value')?.textContent || ''), null, { timeout: 10000 });
  const m = await metrics();
  const live = await page.$$eval('#live [data-live]', (ds) => Object.fromEntries(ds.map((d) =>
    [d.dataset.live, { value: d.querySelector('.value').textContent, note: d.querySelector('.note')?.textContent }])));
  check(live.tok_s.value === '0.0' && live.tok_s.note === `${m.sluice_completion_tokens_total.toLocaleString('en-US')} generated in all` &&
        live.tokens_per_pass.note === `${m.sluice_tokens_per_pass.toFixed(2)} over all ${m.sluice_passes_total.toLocaleString('en-US')} passes` &&
        live.slots_busy.value === `0 of ${m.sluice_slots}` && live.queue.value === '0',
        `live figures agree with /metrics (${JSON.stringify(live)})`);
  if (MODE === 'moe') {   // the greedy request above looked experts up
    check(live.hit_rate.note === `${(100 * m.sluice_expert_cache_hit_rate).toFixed(1)}% in all`,
          `live: the expert cache hit rate is /metrics' (${live.hit_rate.note})`);
    check(await page.locator('#experts [data-field="experts"]').count() === 1, 'plan view: the expert cache described');
    await page.screenshot({ path: path.join(SHOTS, 'webui-plan-moe.png'), fullPage: true });
  }
  // while a long answer streams (a client of its own): tokens/s above 0, the slot busy
  if (MODE === 'full') {
    const longReq = new AbortController();
    const streaming = fetch(BASE + '/v1/chat/completions', { method: 'POST', signal: longReq.signal,
      headers: { Authorization: 'Bearer ' + KEY, 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: PROMPT }], max_tokens: LONG_TOKENS, stream: true }) })
      .then(async (r) => { for await (const _ of r.body) { /* drain */ } }).catch(() => {});
    try {
      await page.waitForFunction(() => document.querySelector('[data-live="slots_busy"] .value').textContent.startsWith('1 of') &&
        Number(document.querySelector('[data-live="tok_s"] .value').textContent) > 0, null, { timeout: 15000 });
      check(true, 'live figures while an answer streams: tokens/s above 0, 1 slot busy');
    } catch (e) {
      check(false, 'live figures while an answer streams: ' + e.message.split('\n')[0]);
    }
    await page.screenshot({ path: path.join(SHOTS, 'webui-plan.png'), fullPage: true });
    longReq.abort();
    await streaming;
  }

  // nothing may leave the server: CSP refuses it in the page, and the route check would fail it
  const blocked = await page.evaluate(() => fetch('https://example.org/x').then(() => false, () => true));
  check(blocked, 'a request to another origin is refused in the page (CSP)');

  // phone width: nothing wider than the screen
  await page.setViewportSize({ width: 380, height: 800 });
  for (const tab of ['#tab-plan', '#tab-chat']) {
    await page.click(tab);
    const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(over <= 0, `${tab}: readable at phone width (${over} px wider than the screen)`);
  }
  await page.screenshot({ path: path.join(SHOTS, MODE === 'moe' ? 'webui-phone-moe.png' : 'webui-phone.png') });

  const total = Object.values(fileBytes).reduce((a, b) => a + b, 0);
  console.log(`webui: the page's files: ${JSON.stringify(fileBytes)}, ${total} bytes in all`);
  check(Object.keys(fileBytes).length >= 5 && total < MAX_PAGE_BYTES, `the page is ${total} bytes (under ${MAX_PAGE_BYTES})`);
  check(external.length === 0, 'no request left the server' + (external.length ? ': ' + external.join(' ') : ''));
  check(pageErrors.length === 0, 'no script errors' + (pageErrors.length ? ': ' + pageErrors.join(' | ') : ''));
  exitCode = failures ? 1 : 0;
} catch (e) {
  console.error('webui: FAIL: ' + (e.stack || e));
} finally {
  await browser.close();
}
console.log(exitCode ? `webui: ${failures || 'an exception:'} failure(s)` : `webui: every check passed; screenshots in ${SHOTS}`);
process.exit(exitCode);
