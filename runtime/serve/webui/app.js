// runtime/serve/webui/app.js — the web page of `sluice serve`: a chat with the model (streamed from
// POST /v1/chat/completions) and the plan at work (plan.js).  No framework, no build step, nothing
// loaded from elsewhere (the server's Content-Security-Policy allows only itself).
import { renderMarkdown } from './markdown.js';
import { parseMetrics, renderLive, renderPlan } from './plan.js';

const $ = (id) => document.getElementById(id);
const KEY = 'sluice.apiKey', SETTINGS = 'sluice.settings';
const NUMBERS = ['temperature', 'top_p', 'top_k', 'min_p', 'repeat_penalty', 'max_tokens', 'seed'];
const INTEGERS = new Set(['top_k', 'max_tokens', 'seed']);

// ---- the API, with the key when the server wants one ------------------------------------------------

let keyPrompt = null;   // the dialog asking for the key, while it is open (one for every caller)

function askKey(wrong) {
  if (keyPrompt) return keyPrompt;
  const dlg = $('key-dialog'), input = $('key-input');
  dlg.querySelector('p').textContent = wrong
    ? 'The server refused this key. Give the --api-key it was started with.'
    : 'This server wants an API key (--api-key). It stays in this tab only.';
  input.value = '';
  keyPrompt = new Promise((resolve) => {
    const done = (key) => {
      dlg.close();
      $('key-form').onsubmit = null;
      $('key-cancel').onclick = null;
      dlg.oncancel = null;
      keyPrompt = null;
      resolve(key);
    };
    $('key-form').onsubmit = (e) => { e.preventDefault(); done(input.value.trim() || null); };
    $('key-cancel').onclick = () => done(null);
    dlg.oncancel = (e) => { e.preventDefault(); done(null); };
  });
  dlg.showModal();
  input.focus();
  return keyPrompt;
}

// fetch() on this server; a 401 asks for the key and tries again.  Throws when the key is refused.
async function api(path, init = {}) {
  for (let wrong = false; ; wrong = true) {
    const key = sessionStorage.getItem(KEY);
    const headers = { ...(init.headers || {}) };
    if (key) headers.Authorization = 'Bearer ' + key;
    const r = await fetch(path, { ...init, headers });
    if (r.status !== 401) return r;
    const given = await askKey(wrong || !!key);
    if (!given) throw new Error('an API key is needed (this server was started with --api-key)');
    sessionStorage.setItem(KEY, given);
  }
}

// The message of an error response ({"error":{"message":...}}) or its status.
async function errorText(r) {
  try { return (await r.json()).error.message; } catch { return `HTTP ${r.status}`; }
}

// ---- views ----------------------------------------------------------------------------------------

const tabs = [$('tab-chat'), $('tab-plan')];
let planTimer = null;

function select(tab) {
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute('aria-selected', String(on));
    t.tabIndex = on ? 0 : -1;
    $(t.getAttribute('aria-controls')).hidden = !on;
  }
  if (tab.id === 'tab-plan') startPlan(); else stopPlan();
}

tabs.forEach((t, i) => {
  t.addEventListener('click', () => select(t));
  t.addEventListener('keydown', (e) => {   // arrow keys move between tabs (WAI-ARIA tabs)
    const step = e.key === 'ArrowRight' ? 1 : e.key === 'ArrowLeft' ? -1 : 0;
    if (!step) return;
    const next = tabs[(i + step + tabs.length) % tabs.length];
    next.focus();
    select(next);
  });
});

// ---- settings ---------------------------------------------------------------------------------------

function loadSettings() {
  const s = JSON.parse(sessionStorage.getItem(SETTINGS) || '{}');
  for (const k of NUMBERS.concat('system')) if (s[k] != null) $(k).value = s[k];
}

function saveSettings() {
  const s = {};
  for (const k of NUMBERS.concat('system')) s[k] = $(k).value;
  sessionStorage.setItem(SETTINGS, JSON.stringify(s));
}

// The request's sampling fields: only those given (an empty field is the server's default).
function samplingFields() {
  const f = {};
  for (const k of NUMBERS) {
    const v = $(k).value.trim();
    if (v === '') continue;
    const n = Number(v);
    if (!Number.isFinite(n) || (INTEGERS.has(k) && !Number.isInteger(n))) throw new Error(`${k}: "${v}" is not a ${INTEGERS.has(k) ? 'whole ' : ''}number`);
    f[k] = n;
  }
  return f;
}

// ---- the chat -------------------------------------------------------------------------------------

let history = [];        // {role, content} of the conversation so far (the system prompt apart)
let running = null;      // { controller } of the answer being streamed
const rawText = new WeakMap();   // message element -> its text as written (what Copy copies)

function status(text) { $('chat-status').textContent = text; }

function addMessage(role, text) {
  const box = document.createElement('article');
  box.className = 'msg ' + role;
  const head = document.createElement('div');
  head.className = 'msg-head';
  const who = document.createElement('span');
  who.textContent = role === 'user' ? 'You' : 'Model';
  const copy = document.createElement('button');
  copy.type = 'button';
  copy.className = 'copy';
  copy.dataset.copy = 'message';
  copy.textContent = 'Copy';
  head.append(who, copy);
  const body = document.createElement('div');
  body.className = 'msg-body';
  box.append(head, body);
  $('messages').append(box);
  setText(box, text);
  return box;
}

function setText(box, text, reasoning) {
  rawText.set(box, text);
  const body = box.querySelector('.msg-body');
  if (box.classList.contains('user')) body.textContent = text;
  else body.innerHTML = (reasoning ? '<details class="reasoning"><summary>Reasoning</summary>' + renderMarkdown(reasoning) +
    '</details>' : '') + renderMarkdown(text);   // renderMarkdown escapes the text first (markdown.js)
  const log = $('messages');
  if (log.scrollHeight - log.scrollTop - log.clientHeight < 120) log.scrollTop = log.scrollHeight;
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {   // not a secure context (http to another machine): the old way
    const t = document.createElement('textarea');
    t.value = text;
    document.body.append(t);
    t.select();
    document.execCommand('copy');
    t.remove();
  }
}

$('messages').addEventListener('click', async (e) => {
  const b = e.target.closest('button.copy');
  if (!b) return;
  const text = b.dataset.copy === 'code' ? b.closest('.code').querySelector('code').textContent : rawText.get(b.closest('.msg'));
  await copyText(text);
  b.textContent = 'Copied';
  setTimeout(() => { b.textContent = 'Copy'; }, 1200);
});

function setRunning(r) {
  running = r;
  $('send').disabled = !!r;
  $('stop').disabled = !r;
  $('input').readOnly = !!r;
}

// Server-sent events: yields each "data:" payload as it arrives.
async function* sseEvents(body) {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const data = event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
      if (data) yield data;
    }
  }
}

async function send(text) {
  let fields;
  try { fields = samplingFields(); } catch (e) { status(e.message); return; }
  saveSettings();
  const system = $('system').value.trim();
  const conv = history;   // (New conversation replaces history: this answer stays with its own)
  conv.push({ role: 'user', content: text });
  addMessage('user', text);
  const box = addMessage('assistant', '');
  box.setAttribute('aria-busy', 'true');
  const controller = new AbortController();
  setRunning({ controller });
  status('Generating… (Esc or Stop ends it)');
  let answer = '', reasoning = '', finish = null, ended = 'done';
  const messages = (system ? [{ role: 'system', content: system }] : []).concat(conv);
  try {
    const r = await api('/v1/chat/completions', {
      method: 'POST', signal: controller.signal, headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages, stream: true, ...fields }),
    });
    if (!r.ok) throw new Error(await errorText(r));
    let frame = 0;
    for await (const data of sseEvents(r.body)) {
      if (data === '[DONE]') break;
      const ev = JSON.parse(data);
      if (ev.error) throw new Error(ev.error.message);
      const ch = ev.choices && ev.choices[0];
      if (!ch) continue;
      answer += ch.delta.content || '';
      reasoning += ch.delta.reasoning_content || '';
      if (ch.finish_reason) finish = ch.finish_reason;
      if (!frame) frame = requestAnimationFrame(() => { frame = 0; setText(box, answer, reasoning); });
    }
    if (!finish) ended = 'cut';
  } catch (e) {
    ended = controller.signal.aborted ? 'stopped' : 'error';
    if (ended === 'error') status('Error: ' + e.message);
  }
  setText(box, answer, reasoning);
  box.removeAttribute('aria-busy');
  box.dataset.finish = ended === 'done' ? finish : ended;
  if (answer || reasoning) conv.push({ role: 'assistant', content: answer });
  else if (ended !== 'done') conv.pop();   // nothing came: the question can be asked again
  if (ended === 'stopped') status('Stopped.');
  else if (ended === 'cut') status('The answer ended early (the server stopped).');
  else if (ended === 'done') status(finish === 'length' ? 'Stopped at max_tokens.' : '');
  setRunning(null);
  $('input').focus();
}

function stop() { if (running) running.controller.abort(); }

$('composer').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = $('input').value;
  if (running || !text.trim()) return;
  $('input').value = '';
  send(text);
});

$('input').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $('composer').requestSubmit();
  }
});

document.addEventListener('keydown', (e) => { if (e.key === 'Escape' && running && !$('key-dialog').open) stop(); });
$('stop').addEventListener('click', stop);
$('new-chat').addEventListener('click', () => {
  stop();
  history = [];
  $('messages').replaceChildren();
  status('New conversation.');
  $('input').focus();
});
$('settings-form').addEventListener('submit', (e) => e.preventDefault());
$('settings-form').addEventListener('change', saveSettings);

// ---- the plan view ----------------------------------------------------------------------------------

let lastMetrics = null, lastTime = 0;

async function pollMetrics() {
  try {
    const r = await api('/metrics');
    if (!r.ok) throw new Error(await errorText(r));
    const cur = parseMetrics(await r.text()), now = performance.now();
    renderLive(cur, lastMetrics, (now - lastTime) / 1000);
    lastMetrics = cur;
    lastTime = now;
    $('live-state').textContent = '';
  } catch (e) {
    $('live-state').textContent = '(' + e.message + ')';
  }
}

async function startPlan() {
  try {
    const r = await api('/v1/plan');
    if (!r.ok) throw new Error(await errorText(r));
    renderPlan(await r.json());
  } catch (e) {
    $('plan-summary').textContent = 'The plan could not be read: ' + e.message;
  }
  if (planTimer) return;
  pollMetrics();
  planTimer = setInterval(pollMetrics, 2000);
}

function stopPlan() {
  clearInterval(planTimer);
  planTimer = null;
  lastMetrics = null;
}

// ---- start --------------------------------------------------------------------------------------------

loadSettings();
api('/v1/models').then((r) => (r.ok ? r.json() : null)).then((m) => {
  if (m && m.data && m.data[0]) $('model-name').textContent = m.data[0].id;
}).catch((e) => status(e.message));
$('input').focus();
