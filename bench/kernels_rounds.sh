#!/usr/bin/env bash
# bench/kernels_rounds.sh — bench_kernels repeated, with medians and spread per build, format and path.
# Each round is one bench_kernels run per build, which measures the memory read bandwidth again right
# before each format; %bw (2-thread weight GB/s / that bandwidth) is computed per round, so the ratio
# stays meaningful when other processes change the machine's load between rounds.  With several
# --build options (an old and a new library) the builds alternate within each round, in an order
# that rotates from round to round, so load from other processes hits them alike (an A/B).  The
# "prefetched read" column is bench_kernels' read loop with the kernels' software prefetch, once per
# run (a higher ceiling than the plain loop on some VMs; %bw stays against the plain loop).
# usage: bench/kernels_rounds.sh [--build DIR]... [--rounds N] [--mib M] [--secs S] [--paths P,P]
#                                [FORMAT...]
# (SL_BENCH_SIMD_ONLY=1 in the environment: SIMD paths only; --paths: e.g. avx2,avx512)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILDS=(); ROUNDS=3; MIB=512; SECS=0.3; PATHS=""   # 512 MiB: past the last-level cache
usage() { echo "usage: $0 [--build DIR]... [--rounds N] [--mib M] [--secs S] [--paths P,P] [FORMAT...]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) [ $# -ge 2 ] || usage; BUILDS+=("$2"); shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --mib) MIB=$2; shift 2 ;;
    --secs) SECS=$2; shift 2 ;;
    --paths) PATHS=$2; shift 2 ;;
    -*) usage ;;
    *) break ;;
  esac
done
[ ${#BUILDS[@]} -gt 0 ] || BUILDS=(build)
for b in "${BUILDS[@]}"; do
  [ -x "$b/bench_kernels" ] || { echo "$0: needs $b/bench_kernels (build it first)" >&2; exit 1; }
done
out=$(mktemp); trap 'rm -f "$out"' EXIT
formats=$(IFS=,; echo "$*")   # bench_kernels takes the formats as one comma list
if [ -n "$PATHS" ] && [ -z "$formats" ]; then echo "$0: --paths needs the formats listed" >&2; exit 2; fi
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) | load: $(cut -d' ' -f1-3 /proc/loadavg)"
nb=${#BUILDS[@]}
for r in $(seq "$ROUNDS"); do
  for k in $(seq 0 $((nb - 1))); do
    b=${BUILDS[$(( (k + r) % nb ))]}
    # prefix: round and build; the build's label has no spaces (its directory name)
    "$b/bench_kernels" "$MIB" "$SECS" ${formats:+"$formats"} ${PATHS:+"$PATHS"} | sed "s|^|$r $(basename "$b") |" >> "$out"
  done
done
echo "# after: load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| format | path | build | 2T GB/s wall | memory GB/s wall | %bw wall | 1T GB/s [CPU] | 2T GB/s [CPU] | memory GB/s [CPU] | %bw [CPU] | prefetched read GB/s [CPU] | nb=64 Gop/s [CPU] |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
# rows: round build format path 1T 2T %bw [1T] [2T] nb64; bandwidth rows: round build format "memory" ... GB/s
awk '
  # "R B FMT memory bandwidth now: 2 threads W GB/s wall, C GB/s CPU-time based"
  # "R B memory read bandwidth with software prefetch: 2 threads W GB/s [CPU-time based: C]"
  $3 == "memory" && $7 == "software" { pfr[$2] = pfr[$2] " " $15; next }
  $4 == "memory" { f = $2 " " $3; bw[f] = bw[f] " " $9; bwc[f] = bwc[f] " " $12; cur[f] = $12; next }
  NF == 10 && $4 != "path" { f = $2 " " $3; k = $3 " " $4 " " $2; keys[k] = 1; w2[k] = w2[k] " " $6; pct[k] = pct[k] " " $7;
                             c1[k] = c1[k] " " $8; c2[k] = c2[k] " " $9; b64[k] = b64[k] " " $10
                             pc[k] = pc[k] " " (cur[f] > 0 ? 100 * $9 / cur[f] : 0); bwof[k] = f }
  function med(s,   a, n, i, j, t) { n = split(s, a, " "); if (n == 0) return "-"; for (i = 1; i <= n; i++) { sub(/%/, "", a[i]); a[i] += 0 }
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return sprintf("%.1f (%.1f-%.1f)", (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2), a[1], a[n]) }
  END {
    for (k in keys) { split(k, p, " "); f = bwof[k]
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p[1], p[2], p[3], med(w2[k]), med(bw[f]),
             med(pct[k]), med(c1[k]), med(c2[k]), med(bwc[f]), med(pc[k]), med(pfr[p[3]]), med(b64[k]) }
  }' "$out" | sort -t'|' -k2,2 -k3,3 -k4,4
