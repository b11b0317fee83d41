#!/usr/bin/env bash
# bench/resident_compare.sh — resident prefill and decode speed of sluice, and of llama.cpp's
# llama-bench on the same file in the same run (issue: fast kernels; results in docs/benchmarks.md).
#
#   bench/resident_compare.sh [--build DIR] [--llama-bench PATH] [--runs N] [-t N] MODEL...
#
# Per model and run, interleaved (sluice, llama-bench, sluice, ...):
#   sluice run -f PROMPT128 -n 33 -c 512 --temp 0: prefill tok/s of the 128-token prompt (BOS
#     included) and decode tok/s of the 32 tokens after it (weights resident: no --ram-budget, the
#     model fits);
#   llama-bench -p 128 -n 32 -t T -r 1: its pp128 and tg32.
# Medians and min-max over the runs.  The project neither builds nor vendors llama.cpp: give the
# path of a binary you built yourself.  The prompt is a fixed word list (127 words, 128 tokens with
# BOS on the llama-spm and llama-bpe vocabularies; the script checks the count).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build LB="" RUNS=3 T=2
MODELS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --llama-bench) LB=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    -t) T=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) MODELS+=("$1"); shift ;;
  esac
done
[ ${#MODELS[@]} -gt 0 ] || { echo "usage: $0 [--build DIR] [--llama-bench PATH] [--runs N] [-t N] MODEL..." >&2; exit 2; }
S=$BUILD/sluice
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
words=(the a cat dog ran over under house tree river stone blue green quickly slowly said went came saw)
P=""
for i in $(seq 0 126); do P+="${words[$(( (i * 7 + i / 19) % ${#words[@]} ))]} "; done
P=${P% }
echo "$P" > "$OUT/p.txt"
field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" "$1" | tr -d '"'; }
stat() { sort -g | awk '{a[NR]=$1} END {if (NR) printf "%.2f (%.2f-%.2f)", a[int((NR+1)/2)], a[1], a[NR]; else printf "-"}'; }

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); threads $T; $RUNS runs, interleaved"
[ -z "$LB" ] || echo "llama-bench: $LB"
echo
echo "| model | sluice prefill tok/s (128) | sluice decode tok/s | llama.cpp pp128 | llama.cpp tg32 | decode ratio | prefill ratio |"
echo "|---|---|---|---|---|---|---|"
for m in "${MODELS[@]}"; do
  n=$("$S" tokenize -m "$m" --ids "$P" | tr ' ,' '\n\n' | grep -c '[0-9]')
  [ "$n" = 128 ] || echo "note: the prompt is $n tokens on $(basename "$m")" >&2
  : > "$OUT/s.txt"; : > "$OUT/l.txt"
  for r in $(seq "$RUNS"); do
    "$S" run -m "$m" -f "$OUT/p.txt" -n 33 -c 512 -t "$T" --temp 0 --quiet --stats-json "$OUT/j.json" >/dev/null 2>&1
    echo "$(field "$OUT/j.json" prompt_tok_s) $(field "$OUT/j.json" decode_tok_s)" >> "$OUT/s.txt"
    if [ -n "$LB" ]; then
      "$LB" -m "$m" -p 128 -n 32 -t "$T" -r 1 -o csv </dev/null 2>/dev/null |
        awk -F, 'NR==1 {for (i=1;i<=NF;i++) {gsub(/"/,"",$i); c[$i]=i}; next}
                 {gsub(/"/,""); if ($c["n_prompt"] > 0) pp=$c["avg_ts"]; else tg=$c["avg_ts"]} END {print pp, tg}' >> "$OUT/l.txt"
    fi
  done
  sp=$(cut -d' ' -f1 "$OUT/s.txt" | stat); sd=$(cut -d' ' -f2 "$OUT/s.txt" | stat)
  lp=$(cut -d' ' -f1 "$OUT/l.txt" | stat); ld=$(cut -d' ' -f2 "$OUT/l.txt" | stat)
  rd=$(paste -d' ' "$OUT/s.txt" "$OUT/l.txt" | awk '$4 > 0 {print $2/$4}' | stat)
  rp=$(paste -d' ' "$OUT/s.txt" "$OUT/l.txt" | awk '$3 > 0 {print $1/$3}' | stat)
  echo "| $(basename "$m") | $sp | $sd | $lp | $ld | $rd | $rp |"
done
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
