#!/usr/bin/env bash
# bench/serve_bench.sh [-m MODEL] [-n MAX_TOKENS] [-r REPEATS] [-N "1 2 4 8"] [-- SERVER_ARGS...]
# `sluice serve` under N = 1, 2, 4, 8 concurrent streaming requests (bench/serve_load.mjs): time to
# first token, each request's decode tok/s and the aggregate, for each N its own server with
# --parallel N.  Repeats are interleaved (N = 1,2,4,8, 1,2,4,8, ...) so that a loaded machine
# weighs on every N alike; the table gives the median of the repeats and their spread.
# Performance goals live here, not in the tests.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
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
    --) shift; break ;;
    *) echo "usage: $0 [-m MODEL] [-n MAX_TOKENS] [-r REPEATS] [-- SERVER_ARGS...]" >&2; exit 2 ;;
  esac
done
WORK=$(mktemp -d)
PID=""
trap '[ -n "$PID" ] && kill -KILL $PID 2>/dev/null; rm -rf "$WORK"' EXIT
run_one() {   # N -> appends a JSON line to $WORK/N.jsonl
  local n=$1; shift
  rm -f "$WORK/port"
  "$SLUICE" serve -m "$MODEL" --port 0 --port-file "$WORK/port" --parallel "$n" "$@" > "$WORK/server.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 600); do [ -s "$WORK/port" ] && break; sleep 0.1; done
  [ -s "$WORK/port" ] || { cat "$WORK/server.log" >&2; exit 1; }
  local url="http://127.0.0.1:$(cat "$WORK/port")"
  node "$ROOT/bench/serve_load.mjs" "$url" 1 4 > /dev/null   # warm-up: first pass, page cache, probes
  node "$ROOT/bench/serve_load.mjs" "$url" "$n" "$TOKENS" >> "$WORK/$n.jsonl"
  kill -TERM $PID; wait $PID || true; PID=""
}
for r in $(seq 1 "$REPEATS"); do for n in $NS; do run_one "$n" "$@"; done; done
echo "model $(basename "$MODEL"), $TOKENS tokens per request, $REPEATS interleaved repeats, server args: ${*:-none}"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) on $(nproc) CPUs"
echo "| N | TTFT median s | per-request decode tok/s | aggregate decode tok/s | aggregate / first N |"
echo "|---|---|---|---|---|"
node -e '
const fs = require("fs"), dir = process.argv[1];
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
const f = (x) => x.toPrecision(3), spread = (a) => `${f(Math.min(...a))}-${f(Math.max(...a))}`;
let base = 0;
for (const n of process.argv[2].split(" ").map(Number)) {
  const rs = fs.readFileSync(`${dir}/${n}.jsonl`, "utf8").trim().split("\n").map(JSON.parse);
  const agg = rs.map((r) => r.agg_tok_s), per = rs.map((r) => r.req_tok_s_median), tt = rs.map((r) => r.ttft_median_s);
  if (!base) base = med(agg);
  console.log(`| ${n} | ${f(med(tt))} | ${f(med(per))} (${spread(per)}) | ${f(med(agg))} (${spread(agg)}) | ${(med(agg) / base).toFixed(2)}x |`);
}' "$WORK" "$NS"
for n in $NS; do echo "raw N=$n: $(tr '\n' ' ' < "$WORK/$n.jsonl")"; done
