#!/usr/bin/env bash
# bench/prefill_paths.sh — resident prompt processing of one model under each prefill GEMM path this CPU
# can run (kernels/gemm.c: SLUICE_GEMM=amx|vnni|avx2|off, and auto), interleaved per round (issue 44).  On
# an AMX machine this shows what a CPU with only AVX-512 VNNI, or only AVX2, would get from the same
# code — the same core and clock, so an estimate for those CPUs, not a measurement on them.  The prompt
# is " hello" N-1 times plus BOS (N tokens, checked with `sluice tokenize`), as in bench/prefill_compare.sh.
#
#   bench/prefill_paths.sh MODEL [ROUNDS] [LENGTH] [PATHS] [THREADS]
#   e.g. bench/prefill_paths.sh /var/tmp/llama3-8b.Q4_K_M.gguf 2 512 "auto vnni avx2 off"
#
# Prints one line per run (round, path, prompt tok/s, load average) and the median per path.  A path the
# CPU lacks is refused by sluice (SLUICE_GEMM is checked) and shows as "refused".
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
MODEL=$1 ROUNDS=${2:-2} N=${3:-512} PATHS=${4:-auto amx vnni avx2 off} THREADS=${5:-2}
SLUICE=${SLUICE_BUILD:-$REPO/build}/sluice
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 -c "import sys; sys.stdout.write(' '.join(['hello'] * ($N - 1)))" > "$WORK/p.txt"
got=$("$SLUICE" tokenize -m "$MODEL" --ids -p "$(cat "$WORK/p.txt")" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "$got" = "$N" ] || { echo "prompt of $N tokens came out as $got" >&2; exit 1; }
echo "sluice: $("$SLUICE" --version 2>&1 | grep -i 'prefill GEMM' || true)"
printf 'round\tpath\ttok_s\tload1\n' | tee "$WORK/runs.tsv"
for r in $(seq 1 "$ROUNDS"); do
    for p in $PATHS; do
        if SLUICE_GEMM=$p "$SLUICE" run -m "$MODEL" -f "$WORK/p.txt" -n 1 -c $((N + 16)) -t "$THREADS" --temp 0 --quiet \
            --stats-json "$WORK/s.json" > /dev/null 2> "$WORK/err"; then
            s=$(python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["prompt_tok_s"])' "$WORK/s.json")
        else
            s=refused; head -n 2 "$WORK/err" >&2
        fi
        printf '%s\t%s\t%s\t%s\n' "$r" "$p" "$s" "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$WORK/runs.tsv"
    done
done
python3 - "$WORK/runs.tsv" "$N" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter='\t'))
print(f"\n| path | prompt tok/s ({sys.argv[2]} tokens) median (min–max) | runs |")
print("|---|---|---|")
for p in dict.fromkeys(r['path'] for r in rows):
    v = [float(r['tok_s']) for r in rows if r['path'] == p and r['tok_s'] != 'refused']
    print(f"| {p} | " + (f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f}) | {len(v)} |" if v else "refused | 0 |"))
PY
