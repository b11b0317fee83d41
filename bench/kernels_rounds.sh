#!/usr/bin/env bash
# bench/kernels_rounds.sh — bench_kernels repeated, with medians and spread per format and path.
# Each round is one bench_kernels run, which measures the memory read bandwidth again right before
# each format; %bw (2-thread weight GB/s / that bandwidth) is computed per round, so the ratio stays
# meaningful when other processes change the machine's load between rounds.
# usage: bench/kernels_rounds.sh [--build DIR] [--rounds N] [--mib M] [--secs S] [FORMAT...]
# (SL_BENCH_SIMD_ONLY=1 in the environment: SIMD paths only)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build; ROUNDS=3; MIB=512; SECS=0.3   # 512 MiB: past the last-level cache
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --mib) MIB=$2; shift 2 ;;
    --secs) SECS=$2; shift 2 ;;
    -*) echo "usage: $0 [--build DIR] [--rounds N] [--mib M] [--secs S] [FORMAT...]" >&2; exit 2 ;;
    *) break ;;
  esac
done
out=$(mktemp); trap 'rm -f "$out"' EXIT
formats=$(IFS=,; echo "$*")   # bench_kernels takes the formats as one comma list
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) | load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  "$BUILD/bench_kernels" "$MIB" "$SECS" ${formats:+"$formats"} | sed "s/^/$r /" >> "$out"
done
echo "# after: load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| format | path | 2T GB/s wall | memory GB/s wall | %bw wall | 1T GB/s [CPU] | 2T GB/s [CPU] | memory GB/s [CPU] | %bw [CPU] |"
echo "|---|---|---|---|---|---|---|---|---|"
# rows: round format path 1T 2T %bw [1T] [2T] nb64; bandwidth rows: round format "memory" ... GB/s
awk '
  # "R FMT memory bandwidth now: 2 threads W GB/s wall, C GB/s CPU-time based"
  $3 == "memory" { bw[$2] = bw[$2] " " $8; bwc[$2] = bwc[$2] " " $11; cur[$2] = $11; next }
  NF == 9 && $3 != "path" { k = $2 " " $3; keys[k] = 1; w2[k] = w2[k] " " $5; pct[k] = pct[k] " " $6; c1[k] = c1[k] " " $7;
                            c2[k] = c2[k] " " $8; pc[k] = pc[k] " " (cur[$2] > 0 ? 100 * $8 / cur[$2] : 0) }
  function med(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) { sub(/%/, "", a[i]); a[i] += 0 }
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return sprintf("%.1f (%.1f-%.1f)", (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2), a[1], a[n]) }
  END {
    for (k in keys) { split(k, p, " "); printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p[1], p[2], med(w2[k]), med(bw[p[1]]),
                      med(pct[k]), med(c1[k]), med(c2[k]), med(bwc[p[1]]), med(pc[k]) }
  }' "$out" | sort -t'|' -k2,2 -k3,3
