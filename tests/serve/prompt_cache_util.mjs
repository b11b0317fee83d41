// tests/serve/prompt_cache_util.mjs — what the prompt-cache tests share: seeded random token ids and
// /metrics read as numbers.

// A seeded generator (SEED in the environment repeats a run) of token ids in [3, 500): every test
// vocabulary has at least 512 (mini-llama3 and stories260K exactly), 0-2 are control tokens in some.
export function tokenSource(label) {
  const seed = Number(process.env.SEED ?? (Date.now() % 2147483647));
  console.log(`${label}: seed ${seed}`);
  let st = seed >>> 0;
  const rng = () => {   // mulberry32
    st = (st + 0x6D2B79F5) >>> 0;
    let t = st;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    tokens: (n) => Array.from({ length: n }, () => 3 + Math.floor(rng() * 497)),
    between: (lo, hi) => lo + Math.floor(rng() * (hi - lo + 1)),
  };
}

// GET /metrics of the server whose API is at url (".../v1"): { name: value }.
export async function metrics(url) {
  const r = await fetch(url.replace(/\/v1$/, '') + '/metrics');
  if (r.status !== 200) throw new Error(`/metrics: status ${r.status}`);
  const m = {};
  for (const line of (await r.text()).split('\n')) {
    const f = line.split(' ');
    if (f.length === 2 && !line.startsWith('#')) m[f[0]] = Number(f[1]);
  }
  return m;
}
