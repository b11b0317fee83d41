#!/usr/bin/env bash
# bench/budget_identity.sh — the planner keeps its word and never changes the answer:
# for each budget, run the model greedily with the top-10 logits of every step in JSON, and check
#   (1) peak RSS (VmHWM) <= budget, (2) the JSON (ids and logits) is byte-identical to the
#   run without a budget (resident when the model fits in memory).
# usage: bench/budget_identity.sh MODEL [BUDGETS...]   (default budgets: min 128M 512M 1G 2G)
set -euo pipefail
case "${1:-}" in
  -h|--help|"") sed -n 's/^# \{0,1\}//p' "$0" | sed -n '1,6p'; [ -n "${1:-}" ]; exit $?;;
esac
cd "$(dirname "$0")/.."
S=${SLUICE:-build/sluice}
M=$1; shift || true
BUDGETS=${*:-"min 128M 512M 1G 2G"}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ARGS=(-m "$M" -p "Once upon a time" -n 6 --temp 0 -c 256 --json --top-logits 10)
"$S" run "${ARGS[@]}" --stats-json "$T/ref.json" > "$T/ref.out" 2>/dev/null
printf "%-8s %12s %12s %10s %s\n" budget "peak MiB" "planned MiB" "blocks" "logits vs unlimited"
printf "%-8s %12.1f %12s %10s %s\n" unlimited "$(sed -n 's/.*"peak_rss":\([0-9]*\).*/\1/p' "$T/ref.json" | awk '{print $1/1048576}')" - - reference
fail=0
for b in $BUDGETS; do
  if [ "$b" = min ]; then
    b=$("$S" plan -m "$M" --ram-budget 1T -c 256 --json | sed -n 's/.*"min_budget":\([0-9]*\).*/\1/p')
    b=$(( (b + 1048575) / 1048576 ))M
  fi
  "$S" run "${ARGS[@]}" --ram-budget "$b" --stats-json "$T/b.json" > "$T/b.out" 2>/dev/null
  peak=$(sed -n 's/.*"peak_rss":\([0-9]*\).*/\1/p' "$T/b.json")
  planned=$(sed -n 's/.*"planned_bytes":\([0-9]*\).*/\1/p' "$T/b.json")
  blocks=$(sed -n 's/.*"blocks_resident":\([0-9]*\).*/\1/p' "$T/b.json")
  bytes=$(echo "$b" | awk '{n=$1+0; u=substr($1,length($1)); if(u=="K")n*=1024; if(u=="M")n*=1048576; if(u=="G")n*=1073741824; printf "%d", n}')
  same=identical; cmp -s "$T/ref.out" "$T/b.out" || { same=DIFFERENT; fail=1; }
  over=""; [ "$peak" -le "$bytes" ] || { over=" OVER BUDGET"; fail=1; }
  printf "%-8s %12.1f %12.1f %10s %s%s\n" "$b" "$(echo "$peak" | awk '{print $1/1048576}')" \
    "$(echo "$planned" | awk '{print $1/1048576}')" "$blocks" "$same" "$over"
done
exit $fail
