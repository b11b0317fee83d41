#!/usr/bin/env bash
# bench/prefill_compare.sh — resident prompt processing, sluice against llama.cpp's llama-bench, the two
# interleaved (issue 44).  For each round and each prompt length N: sluice prefills a prompt of exactly N
# tokens (BOS included: " hello" N-1 times, checked with `sluice tokenize`), then llama-bench -p N -n 0
# (random tokens, N of them).  Both 2 threads by default; sluice's figure is the prefill alone
# (--stats-json prompt_tok_s), llama-bench's its pp t/s.  The script runs the llama-bench binary it is
# given; it never builds it.
#
#   bench/prefill_compare.sh MODEL LLAMA_BENCH [ROUNDS] [LENGTHS] [THREADS]
#   e.g. bench/prefill_compare.sh /var/tmp/llama3-8b.Q4_K_M.gguf ../llama.cpp/build/bin/llama-bench 3 "64 512 2048"
#
# Prints one line per run (round, length, tool, tok/s, load average) and the medians per length.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
MODEL=$1 LLAMA=$2 ROUNDS=${3:-3} LENGTHS=${4:-64 512 2048} THREADS=${5:-2}
SLUICE=${SLUICE_BUILD:-$REPO/build}/sluice
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for n in $LENGTHS; do
    python3 -c "import sys; sys.stdout.write(' '.join(['hello'] * ($n - 1)))" > "$WORK/p$n.txt"
    got=$("$SLUICE" tokenize -m "$MODEL" --ids -p "$(cat "$WORK/p$n.txt")" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
    [ "$got" = "$n" ] || { echo "prompt of $n tokens came out as $got" >&2; exit 1; }
done
printf 'round\tlength\ttool\ttok_s\tload1\n' | tee "$WORK/runs.tsv"
for r in $(seq 1 "$ROUNDS"); do
    for n in $LENGTHS; do
        "$SLUICE" run -m "$MODEL" -f "$WORK/p$n.txt" -n 1 -c $((n + 16)) -t "$THREADS" --temp 0 --quiet \
            --stats-json "$WORK/s.json" > /dev/null
        s=$(python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["prompt_tok_s"])' "$WORK/s.json")
        printf '%s\t%s\tsluice\t%s\t%s\n' "$r" "$n" "$s" "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$WORK/runs.tsv"
        l=$("$LLAMA" -m "$MODEL" -p "$n" -n 0 -t "$THREADS" -r 1 -o csv 2>/dev/null |
            python3 -c 'import csv,sys; rows=list(csv.DictReader(sys.stdin)); print("%.2f" % float(rows[-1]["avg_ts"]))')
        printf '%s\t%s\tllama.cpp\t%s\t%s\n' "$r" "$n" "$l" "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$WORK/runs.tsv"
    done
done
python3 - "$WORK/runs.tsv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter='\t'))
print("\n| prompt tokens | sluice tok/s median (min–max) | llama.cpp tok/s median (min–max) | ratio of medians |")
print("|---|---|---|---|")
for n in dict.fromkeys(r["length"] for r in rows):
    s = [float(r["tok_s"]) for r in rows if r["length"] == n and r["tool"] == "sluice"]
    l = [float(r["tok_s"]) for r in rows if r["length"] == n and r["tool"] == "llama.cpp"]
    ms, ml = statistics.median(s), statistics.median(l)
    print(f"| {n} | {ms:.2f} ({min(s):.2f}–{max(s):.2f}) | {ml:.2f} ({min(l):.2f}–{max(l):.2f}) | {ms / ml:.2f}× |")
PY
