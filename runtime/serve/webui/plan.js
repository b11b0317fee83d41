// runtime/serve/webui/plan.js — the plan view: the budget as a bar of its parts (GET /v1/plan, the
// object `sluice plan --json` prints), the blocks resident or streamed, the expert cache of a MoE
// model, and live figures from GET /metrics.

const MiB = 1024 * 1024;

// 1234567 -> "1,234,567" (the exact figure; the test compares it with sluice plan --json's)
export function groupDigits(n) {
  return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
}

// The parts of the budget, in the order `sluice plan` lists them (they add up to total_bytes).
export function budgetParts(p) {
  const cache = p.expert_cache_bytes || 0;
  const parts = [
    { key: 'base_bytes', label: 'runtime (code, libraries, stacks)', bytes: p.base_bytes },
    { key: 'meta_bytes', label: 'GGUF metadata', bytes: p.meta_bytes },
    { key: 'vocab_bytes', label: 'tokenizer', bytes: p.vocab_bytes },
    { key: 'norm_bytes', label: 'norm weights', bytes: p.norm_bytes },
    { key: 'act_bytes', label: `activations (batch ${p.n_batch})`, bytes: p.act_bytes },
    { key: 'kv_bytes', bytes: p.kv_bytes, label: (p.kv === 'spill'
      ? `KV cache: a layer's buffer (spilled to a ${(p.kv_file_bytes / MiB).toFixed(2)} MiB file)` : `KV cache ${p.kv}`) +
      (p.n_parallel > 1 ? ` (${p.n_parallel} sequences)` : '') },
    { key: 'stream_buf_bytes', label: `stream buffers (${p.prefetch} in flight + 1)`, bytes: p.stream_buf_bytes },
    { key: 'resident_weights', label: 'resident weights', bytes: p.resident_bytes - cache },
  ];
  if (p.expert_cache_bytes != null) {
    parts.push({ key: 'expert_cache_bytes', label: `expert cache (${p.expert_cache_entries} experts)`, bytes: cache });
  }
  return parts;
}

function row(key, label, bytes, budget, cls) {
  return el('tr', { 'data-field': key, class: cls || '' },
    el('th', { scope: 'row', text: label }),
    el('td', { class: 'num bytes', text: groupDigits(bytes) }),
    el('td', { class: 'num', text: (bytes / MiB).toFixed(2) }),
    el('td', { class: 'num', text: budget ? (100 * bytes / budget).toFixed(1) + '%' : '' }));
}

function renderBar(p, parts) {
  const bar = document.getElementById('budget-bar');
  const legend = document.getElementById('budget-legend');
  bar.replaceChildren();
  legend.replaceChildren();
  const free = Math.max(0, p.budget - p.total_bytes);
  const all = parts.concat([{ key: 'free', label: 'left of the budget', bytes: free }]);
  all.forEach((part, i) => {
    if (part.bytes <= 0) return;
    const share = 100 * part.bytes / p.budget;
    const title = `${part.label}: ${(part.bytes / MiB).toFixed(2)} MiB (${share.toFixed(1)}%)`;
    bar.append(el('div', { class: `seg seg-${part.key === 'free' ? 'free' : i}`, title, 'data-part': part.key }));
    bar.lastChild.style.flexGrow = String(part.bytes);
    legend.append(el('li', null, el('span', { class: `swatch seg-${part.key === 'free' ? 'free' : i}` }), title));
  });
}

function renderBlocks(p) {
  const box = document.getElementById('blocks');
  box.replaceChildren();
  const streaming = p.mode === 'streaming';
  for (let l = 0; l < p.n_layers; l++) {
    const resident = !streaming || l < p.blocks_resident;
    box.append(el('span', { class: 'block ' + (resident ? 'resident' : 'streamed'),
      title: `block ${l}: ${resident ? 'resident' : 'streamed (wholly or in part) every pass'}`, text: String(l) }));
  }
  box.append(el('span', { class: 'block head ' + (p.lm_head_resident || !streaming ? 'resident' : 'streamed'),
    title: 'LM head', text: 'head' }));
  const moe = p.n_expert ? ' (their dense weights; the routed experts are read when a token picks them: the expert cache below)' : '';
  document.getElementById('blocks-note').textContent = streaming
    ? `${p.blocks_resident} of ${p.n_layers} blocks resident${moe}; ${(p.stream_bytes / MiB).toFixed(2)} MiB streams ` +
      `per pass in pieces of at most ${(p.chunk_bytes / MiB).toFixed(2)} MiB; LM head ${p.lm_head_resident ? 'resident' : 'streams'}.`
    : `all ${p.n_layers} blocks and the LM head resident: nothing is read per token.`;
}

function renderExperts(p) {
  const box = document.getElementById('experts');
  box.replaceChildren();
  if (p.expert_cache_bytes == null) return;
  const head = `${p.n_expert} routed experts per block, ${p.n_expert_used} per token, ${(p.expert_bytes / MiB).toFixed(2)} MiB each.`;
  if (p.mode === 'resident') {
    box.append(el('h2', { text: 'The experts' }), el('p', { 'data-field': 'experts', text: head + ' All resident.' }));
    return;
  }
  box.append(el('h2', { text: 'The expert cache' }),
    el('p', { 'data-field': 'experts', text: head + ' The cache holds ' +
      `${p.expert_cache_entries} experts in ${(p.expert_cache_bytes / MiB).toFixed(2)} MiB ` +
      `(${(100 * p.expert_cache_bytes / p.budget).toFixed(1)}% of the budget); at the predicted hit rate of ` +
      `${(100 * p.expert_hit_rate).toFixed(1)}% experts read ${(p.expert_stream_bytes / MiB).toFixed(2)} MiB per token.` }));
}

// Draw the plan object (GET /v1/plan).
export function renderPlan(p) {
  const summary = document.getElementById('plan-summary');
  const tbody = document.querySelector('#plan-table tbody');
  tbody.replaceChildren();
  if (p.planned === false) {
    summary.textContent = 'No plan: a streaming mode was forced without a budget (--ram-budget SIZE plans one).';
    return;
  }
  if (!p.feasible) { summary.textContent = 'Infeasible: ' + p.why; return; }
  summary.textContent = `${p.mode === 'resident' ? 'Resident: the whole model fits.' : 'Streaming.'} ` +
    `Budget ${(p.budget / MiB).toFixed(2)} MiB for a ${(p.model_bytes / MiB).toFixed(2)} MiB model, context ${p.n_ctx}, ` +
    `${p.n_parallel} slot${p.n_parallel > 1 ? 's' : ''}. Reads ${(p.read_per_token / MiB).toFixed(2)} MiB per token; ` +
    `predicted ${p.pred_tok_s.toFixed(2)} tok/s` + (p.n_parallel > 1 ? ` per request, ${p.pred_agg_tok_s.toFixed(2)} together.` : '.');
  const parts = budgetParts(p);
  renderBar(p, parts);
  for (const part of parts) tbody.append(row(part.key, part.label, part.bytes, p.budget));
  tbody.append(row('total_bytes', 'total', p.total_bytes, p.budget, 'total'));
  tbody.append(row('budget', 'budget', p.budget, p.budget, 'total'));
  tbody.append(row('read_per_token', 'read per token', p.read_per_token, 0));
  renderBlocks(p);
  renderExperts(p);
}

// Prometheus text -> { name: value } (labelled series under name{labels}).
export function parseMetrics(text) {
  const m = {};
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const sp = line.lastIndexOf(' ');
    m[line.slice(0, sp)] = Number(line.slice(sp + 1));
  }
  return m;
}

function fmtBytes(b) {
  return b >= MiB ? (b / MiB).toFixed(2) + ' MiB' : b >= 1024 ? (b / 1024).toFixed(1) + ' KiB' : Math.round(b) + ' B';
}

// The live figures from two successive /metrics samples (prev may be null: totals only).
export function renderLive(cur, prev, dt) {
  const d = (k) => (prev ? cur[k] - prev[k] : 0);
  const perPass = d('sluice_passes_total') > 0 ? d('sluice_pass_tokens_total') / d('sluice_passes_total') : null;
  const carried = d('sluice_pass_tokens_total');
  const lookups = d('sluice_expert_cache_hits_total') + d('sluice_expert_cache_misses_total');
  const allLookups = cur.sluice_expert_cache_hits_total + cur.sluice_expert_cache_misses_total;
  const rows = [
    ['tokens/s', 'tok_s', prev && dt > 0 ? (d('sluice_completion_tokens_total') / dt).toFixed(1) : '—',
      `${groupDigits(cur.sluice_completion_tokens_total)} generated in all`],
    ['tokens per pass', 'tokens_per_pass', perPass != null ? perPass.toFixed(2) : '—',
      `${cur.sluice_tokens_per_pass.toFixed(2)} over all ${groupDigits(cur.sluice_passes_total)} passes`],
    ['bytes read per token', 'bytes_per_token', carried > 0 ? fmtBytes(d('sluice_stream_bytes_read_total') / carried) : '—',
      cur.sluice_pass_tokens_total > 0
        ? `${fmtBytes(cur.sluice_stream_bytes_read_total / cur.sluice_pass_tokens_total)} over all tokens the passes carried`
        : 'nothing decoded yet'],
    ['expert cache hit rate', 'hit_rate', lookups > 0 ? (100 * d('sluice_expert_cache_hits_total') / lookups).toFixed(1) + '%' : '—',
      allLookups > 0 ? `${(100 * cur.sluice_expert_cache_hit_rate).toFixed(1)}% in all` : 'no expert looked up (a dense model, or nothing decoded)'],
    ['slots busy', 'slots_busy', `${cur.sluice_slots_busy} of ${cur.sluice_slots}`, ''],
    ['queue', 'queue', String(cur.sluice_queue_length), 'requests waiting for a slot'],
  ];
  const dl = document.getElementById('live');
  dl.replaceChildren();
  for (const [label, key, value, note] of rows) {
    dl.append(el('div', { 'data-live': key }, el('dt', { text: label }), el('dd', null,
      el('span', { class: 'value', text: value }), note ? el('span', { class: 'note', text: note }) : null)));
  }
}
