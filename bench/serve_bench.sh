#!/usr/bin/env bash
# bench/serve_bench.sh [-m MODEL] [-n MAX_TOKENS] [-r REPEATS] [-N "1 2 4 8"] [-b BUDGET] [-- SERVER_ARGS...]
# `sluice serve` under N = 1, 2, 4, 8 concurrent streaming requests (bench/serve_load.mjs): time to
# first token, each request's decode tok/s and the aggregate, for each N its own server with
# --parallel N.  Repeats are interleaved (N = 1,2,4,8, 1,2,4,8, ...) so that a loaded machine
# weighs on every N alike; the table gives the median of the repeats and their spread.
# Around the measured load (not the warm-up) /metrics is read twice: the table's passes, tokens per
# pass, weight bytes read per pass and, for mixture-of-experts models, expert bytes per pass (the union
# of the batch's experts is read once per pass) and the expert cache's hit rate are those differences.
# -b BUDGET: each server gets --ram-budget BUDGET, runs in a fresh child memory cgroup (v1) of that
# size (RSS + page cache; bench/lib.sh), started after the page cache is dropped; the cgroup's peak
# usage is reported.  Needs root; without a writable cgroup it says so and only passes the budget.
# Performance goals live here, not in the tests.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
log() { printf '[serve_bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
RUN_TIMEOUT=86400
# shared helpers: size_bytes mib drop_caches cg_*
. "$ROOT/bench/lib.sh"
BUDGET=""
SLUICE=${SLUICE:-$ROOT/build/sluice}
MODEL=$ROOT/models/stories260K.gguf
TOKENS=64
REPEATS=3
NS="1 2 4 8"
while [ $# -gt 0 ]; do
  case "$1" in
    -m) MODEL=$2; shift 2 ;;
    -n) TOKENS=$2; shift 2 ;;
    -r) REPEATS=$2; shift 2 ;;
    -N) NS=$2; shift 2 ;;
    -b) BUDGET=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 [-m MODEL] [-n MAX_TOKENS] [-r REPEATS] [-N LIST] [-b BUDGET] [-- SERVER_ARGS...]" >&2; exit 2 ;;
  esac
done
WORK=$(mktemp -d)
PID=""
trap '[ -n "$PID" ] && kill -KILL $PID 2>/dev/null; cg_remove; rm -rf "$WORK"' EXIT
BUDGET_ARGS=()
if [ -n "$BUDGET" ]; then
  BUDGET_BYTES=$(size_bytes "$BUDGET") || { echo "bad -b $BUDGET" >&2; exit 2; }
  BUDGET_ARGS=(--ram-budget "$BUDGET_BYTES")
  cg_detect
fi
# metric NAME FILE: a counter's value in a /metrics snapshot (0 when absent).
metric() { awk -v n="$1" '$1 == n { print $2; f = 1 } END { if (!f) print 0 }' "$2"; }
run_one() {   # N -> appends a JSON line to $WORK/N.jsonl
  local n=$1; shift
  rm -f "$WORK/port"
  if [ -n "$BUDGET" ]; then
    drop_caches
    if [ "$CG_OK" = 1 ]; then cg_create "$BUDGET_BYTES" || { echo "cgroup setup failed" >&2; exit 1; }; fi
  fi
  if [ -n "$CG_CUR" ]; then
    sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG_CUR" "$SLUICE" serve -m "$MODEL" --port 0 \
      --port-file "$WORK/port" --parallel "$n" "${BUDGET_ARGS[@]}" "$@" > "$WORK/server.log" 2>&1 &
  else
    "$SLUICE" serve -m "$MODEL" --port 0 --port-file "$WORK/port" --parallel "$n" "${BUDGET_ARGS[@]}" "$@" \
      > "$WORK/server.log" 2>&1 &
  fi
  PID=$!
  for _ in $(seq 1 600); do [ -s "$WORK/port" ] && break; sleep 0.1; done
  [ -s "$WORK/port" ] || { cat "$WORK/server.log" >&2; exit 1; }
  local url="http://127.0.0.1:$(cat "$WORK/port")"
  node "$ROOT/bench/serve_load.mjs" "$url" 1 4 > /dev/null   # warm-up: first pass, page cache, probes
  curl -sf "$url/metrics" > "$WORK/m0"
  node "$ROOT/bench/serve_load.mjs" "$url" "$n" "$TOKENS" > "$WORK/load.json"
  curl -sf "$url/metrics" > "$WORK/m1"
  kill -TERM $PID; wait $PID || true; PID=""
  local peak=""
  if [ -n "$CG_CUR" ]; then peak=$(cat "$CG_CUR/memory.max_usage_in_bytes"); cg_remove; fi
  local k d extra=""
  for k in sluice_passes_total sluice_pass_tokens_total sluice_stream_bytes_read_total sluice_expert_bytes_read_total \
           sluice_expert_cache_hits_total sluice_expert_cache_misses_total; do
    d=$(awk -v a="$(metric $k "$WORK/m0")" -v b="$(metric $k "$WORK/m1")" 'BEGIN { printf "%.0f", b - a }')
    extra="$extra,\"${k#sluice_}\":$d"
  done
  sed "s/}\$/$extra,\"cgroup_peak_bytes\":${peak:-0}}/" "$WORK/load.json" >> "$WORK/$n.jsonl"
}
for r in $(seq 1 "$REPEATS"); do for n in $NS; do run_one "$n" "$@"; done; done
echo "model $(basename "$MODEL"), $TOKENS tokens per request, $REPEATS interleaved repeats, server args: ${*:-none}"
[ -z "$BUDGET" ] || echo "budget $BUDGET: --ram-budget, page cache dropped before each server, $([ "$CG_OK" = 1 ] &&
  echo "each server in a fresh memory cgroup of that size" || echo "**no** memory cgroup (budget not enforced)")"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) on $(nproc) CPUs"
echo "| N | TTFT median s | per-request decode tok/s | aggregate decode tok/s | aggregate / first N | passes | tokens/pass | MiB read/pass | expert MiB/pass | expert hit rate | cgroup peak MiB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
node -e '
const fs = require("fs"), dir = process.argv[1];
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
const f = (x) => x.toPrecision(3), spread = (a) => `${f(Math.min(...a))}-${f(Math.max(...a))}`;
let base = 0;
for (const n of process.argv[2].split(" ").map(Number)) {
  const rs = fs.readFileSync(`${dir}/${n}.jsonl`, "utf8").trim().split("\n").map(JSON.parse);
  const agg = rs.map((r) => r.agg_tok_s), per = rs.map((r) => r.req_tok_s_median), tt = rs.map((r) => r.ttft_median_s);
  if (!base) base = med(agg);
  const M = (b) => (b / 1048576).toFixed(1), pp = (r, k) => (r.passes_total ? r[k] / r.passes_total : 0);
  const asks = (r) => r.expert_cache_hits_total + r.expert_cache_misses_total;
  const hit = rs.map((r) => (asks(r) ? r.expert_cache_hits_total / asks(r) : NaN));
  const peak = med(rs.map((r) => r.cgroup_peak_bytes));
  console.log(`| ${n} | ${f(med(tt))} | ${f(med(per))} (${spread(per)}) | ${f(med(agg))} (${spread(agg)}) | ${(med(agg) / base).toFixed(2)}x` +
              ` | ${med(rs.map((r) => r.passes_total))} | ${med(rs.map((r) => pp(r, "pass_tokens_total"))).toFixed(2)}` +
              ` | ${M(med(rs.map((r) => pp(r, "stream_bytes_read_total"))))} | ${M(med(rs.map((r) => pp(r, "expert_bytes_read_total"))))}` +
              ` | ${isNaN(hit[0]) ? "-" : (100 * med(hit)).toFixed(1) + "%"} | ${peak ? M(peak) : "-"} |`);
}' "$WORK" "$NS"
for n in $NS; do echo "raw N=$n: $(tr '\n' ' ' < "$WORK/$n.jsonl")"; done
