#!/usr/bin/env bash
# bench/spec_bench.sh — speculative decoding under a RAM budget: decode tok/s against tokens per pass (τ).
#
#   bench/spec_bench.sh --model FILE [--budgets 128M,1G,4G] [-n 32] [--ks 1,2,4,8] [--runs 1] [-p PROMPT]
#
# 1. One greedy run without drafting (no budget, no cgroup) gives the reference continuation R.
# 2. Lookup texts made from R, token by token (its --json pieces): `exact` = R itself (the drafts are
#    right until the end of R: an upper bound, not a use case), `every8` / `every4` = R with every
#    8th / 4th token's text replaced by another token's text from R (drafts match partly).
# 3. Per budget, interleaved in one pass over the configurations (and again per --runs): no drafting;
#    then for each lookup text, --lookup with the adaptive draft length (--draft-max = the largest k)
#    and with each fixed k (--draft-max k --draft-fixed).  Every run: page cache dropped, its own
#    memory cgroup (v1) limited to the budget, `sluice run --temp 0 --ram-budget B --stats-json`.
# 4. Each run's output must equal R (greedy speculative decoding is exact); a run that differs is
#    reported as a failure, not averaged.
# --replay T1:T_TOK[,...]: instead of step 3, replay the drafting over R with each lookup text under
#    those pass-time models (build/draft_replay: the production drafter and draft-length choice,
#    no model, no disk; see bench/draft_replay.c), into replay.md.
# Outputs: results/spec-<timestamp>/runs.csv and table.md (also printed).  Needs root for the cgroup and
# drop_caches (without it, says so and measures anyway).
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
T0=$(date +%s)
log() { printf '[spec_bench %s +%ss] %s\n' "$(date +%H:%M:%S)" "$(( $(date +%s) - T0 ))" "$*" >&2; }
die() { log "error: $*"; exit 1; }
. "$REPO/bench/lib.sh"

usage() {
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    cat <<'EOF'
options:
  --model FILE     GGUF model (required)
  --budgets LIST   comma list of --ram-budget sizes (default 128M,1G,4G)
  -n N             tokens generated per run (default 32)
  --ks LIST        fixed draft lengths to run (default 1,2,4,8); the adaptive runs use the largest as --draft-max
  --runs N         passes over all configurations (default 1)
  -p TEXT          prompt (default "The history of the city")
  -t N             threads (default 2)
  --lookups LIST   which lookup texts (default exact,every8,every4)
  --build DIR      build directory (default ./build)
  --out DIR        results directory (default results/spec-<timestamp>)
  --run-timeout S  kill a run after S seconds (default 900)
  --replay LIST    T1:T_TOK pass-time models (seconds) to replay instead of running, e.g. 3.0:0.1,1.2:0.12
EOF
    exit "${1:-0}"
}

MODEL="" BUDGETS="128M,1G,4G" NTOK=32 KS="1,2,4,8" RUNS=1 PROMPT="The history of the city" THREADS=2
LOOKUPS="exact,every8,every4" BUILD=$REPO/build OUT="" RUN_TIMEOUT=900 REPLAY=""
while [ $# -gt 0 ]; do
    case "$1" in -h|--help) usage 0 ;; esac
    [ $# -ge 2 ] || { echo "spec_bench: $1 needs a value" >&2; usage 2; }
    case "$1" in
        --model) MODEL=$2 ;; --budgets) BUDGETS=$2 ;; -n) NTOK=$2 ;; --ks) KS=$2 ;; --runs) RUNS=$2 ;;
        -p) PROMPT=$2 ;; -t) THREADS=$2 ;; --lookups) LOOKUPS=$2 ;; --build) BUILD=$2 ;; --out) OUT=$2 ;;
        --run-timeout) RUN_TIMEOUT=$2 ;; --replay) REPLAY=$2 ;;
        *) echo "spec_bench: unknown option $1" >&2; usage 2 ;;
    esac
    shift 2
done
[ -n "$MODEL" ] && [ -r "$MODEL" ] || die "--model FILE is required and must be readable"
SLUICE=$BUILD/sluice
[ -x "$SLUICE" ] || die "$SLUICE not found: build first (bash scripts/build.sh)"
OUT=${OUT:-$REPO/results/spec-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" || die "cannot create $OUT"
CHILD_PID=""
trap '[ -z "$CHILD_PID" ] || kill "$CHILD_PID" 2>/dev/null; cg_remove; exit 130' INT TERM
cg_detect
kmax=$(tr ',' '\n' <<<"$KS" | sort -n | tail -n1)

# ---------------------------------------------------------------- 1. reference continuation
log "reference: greedy, no drafting, -n $NTOK"
drop_caches
"$SLUICE" run -m "$MODEL" -p "$PROMPT" -n "$NTOK" -t "$THREADS" --temp 0 --draft off -q --json \
    >"$OUT/ref.jsonl" 2>"$OUT/ref.err" || die "reference run failed (see $OUT/ref.err)"
# the pieces, one per line, JSON-unescaped by python (the one place this script needs it)
python3 - "$OUT" <<'EOF' || die "cannot make the lookup texts"
import json, sys, os
out = sys.argv[1]
pieces = [json.loads(l)["text"] for l in open(os.path.join(out, "ref.jsonl")) if l.strip()]
n = len(pieces)
def changed(every):
    # token i (i % every == every-1) gets the text of a token from the other half of R that differs
    res = list(pieces)
    for i in range(every - 1, n, every):
        for j in range(1, n):
            cand = pieces[(i + n // 2 + j) % n]
            if cand != pieces[i]:
                res[i] = cand
                break
    return res
texts = {"exact": pieces, "every8": changed(8), "every4": changed(4)}
for name, p in texts.items():
    with open(os.path.join(out, "lookup-" + name + ".txt"), "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write("".join(p))
with open(os.path.join(out, "ref.txt"), "w", encoding="utf-8", errors="surrogateescape") as f:
    f.write("".join(pieces))
EOF
log "reference: $(wc -l <"$OUT/ref.jsonl") tokens"

# ---------------------------------------------------------------- 2'. or the replay
if [ -n "$REPLAY" ]; then
    [ -x "$BUILD/draft_replay" ] || die "$BUILD/draft_replay not found: build first"
    ids_of() { "$SLUICE" tokenize -m "$MODEL" --ids "$@" | tr -d '[],'; }
    { ids_of -p "$PROMPT"; echo; grep -o '"id":[0-9]*' "$OUT/ref.jsonl" | cut -d: -f2 | tr '\n' ' '; } >"$OUT/truth.ids"
    np=$(ids_of -p "$PROMPT" | wc -w)
    {
        echo "| pass time t(k) | lookup text | adaptive τ | adaptive tok/s | best fixed k | its τ | its tok/s | adaptive ÷ best fixed |"
        echo "|---|---|---:|---:|---:|---:|---:|---:|"
        for cost in ${REPLAY//,/ }; do
            t1=${cost%%:*} tt=${cost##*:}
            for lk in ${LOOKUPS//,/ }; do
                ids_of --no-bos -p "$(cat "$OUT/lookup-$lk.txt")" >"$OUT/lookup-$lk.ids"
                "$BUILD/draft_replay" "$OUT/truth.ids" "$np" "$OUT/lookup-$lk.ids" "$t1" "$tt" "$kmax" >"$OUT/replay-$lk-$cost.txt" ||
                    die "draft_replay failed"
                awk -v c="$t1 + k·$tt s" -v lk="$lk" '
                    /^adaptive \(/ { at = $(NF-1); ar = $NF }
                    /^fixed / { if ($NF + 0 > br) { br = $NF + 0; bk = $2; bt = $(NF-1) } }
                    END { printf "| %s | %s | %s | %s | %s | %s | %.3f | %.2f |\n", c, lk, at, ar, bk, bt, br, ar / br }' \
                    "$OUT/replay-$lk-$cost.txt"
            done
        done
    } >"$OUT/replay.md"
    cat "$OUT/replay.md"
    log "replay of $(wc -w <"$OUT/truth.ids") tokens ($np of prompt) in $OUT/replay.md"
    exit 0
fi

# ---------------------------------------------------------------- 2. the runs
CSV=$OUT/runs.csv
echo "budget,run,lookup,mode,k,status,decode_tok_s,tokens_per_pass,passes,drafted,accepted,peak_rss,cg_max,wall_s" >"$CSV"
# run_cfg BUDGET RUN LOOKUP MODE K: one run; appends a row
run_cfg() {
    local budget=$1 run=$2 lk=$3 mode=$4 k=$5 args=() js=$OUT/s.json bytes status=ok
    case $mode in
        off) args=(--draft off) ;;
        adaptive) args=(--lookup "$OUT/lookup-$lk.txt" --draft-max "$k") ;;
        fixed) args=(--lookup "$OUT/lookup-$lk.txt" --draft-max "$k" --draft-fixed) ;;
    esac
    bytes=$(size_bytes "$budget") || die "bad budget $budget"
    rm -f "$js"
    drop_caches
    [ "$CG_OK" != 1 ] || cg_create "$bytes" || { log "warning: cgroup setup failed"; cg_remove; }
    local t0; t0=$(date +%s.%N)
    in_cgroup "$SLUICE" run -m "$MODEL" -p "$PROMPT" -n "$NTOK" -t "$THREADS" --temp 0 -q --ram-budget "$budget" \
        --stats-json "$js" "${args[@]}" >"$OUT/out.txt" 2>"$OUT/err.txt"
    local rc=$? wall; wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    CG_MAX=""
    if [ -n "$CG_CUR" ]; then cg_read; cg_remove; fi
    if [ $rc -ne 0 ]; then status="exit$rc"; cp "$OUT/err.txt" "$OUT/err-$budget-$run-$lk-$mode-$k.txt"
    # (run ends its output with a newline; $(...) drops it)
    elif [ "$(cat "$OUT/out.txt")" != "$(cat "$OUT/ref.txt")" ]; then status=differs; cp "$OUT/out.txt" "$OUT/differs-$budget-$run-$lk-$mode-$k.txt"; fi
    local v=() key
    for key in decode_tok_s tokens_per_pass passes drafted accepted peak_rss; do v+=("$(json_get "$js" "$key")"); done
    echo "$budget,$run,$lk,$mode,$k,$status,${v[0]},${v[1]},${v[2]},${v[3]},${v[4]},${v[5]},$CG_MAX,$wall" >>"$CSV"
    log "$budget run $run $lk $mode k=$k: $status, ${v[0]} tok/s, τ ${v[1]}, ${wall} s"
}
for run in $(seq 1 "$RUNS"); do
    for budget in ${BUDGETS//,/ }; do
        run_cfg "$budget" "$run" - off 0
        for lk in ${LOOKUPS//,/ }; do
            run_cfg "$budget" "$run" "$lk" adaptive "$kmax"
            for k in ${KS//,/ }; do run_cfg "$budget" "$run" "$lk" fixed "$k"; done
        done
    done
done

# ---------------------------------------------------------------- 3. the table
awk -F, -v runs="$RUNS" '
function med(list,   a, n, i, j, t) { n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
NR == 1 { next }
{ key = $1 SUBSEP $3 SUBSEP $4 SUBSEP $5
  if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
  if ($6 != "ok") { bad[key] = bad[key] " " $6; next }
  tps[key] = tps[key] " " $7; tau[key] = tau[key] " " $8; rss[key] = rss[key] " " $12; cg[key] = cg[key] " " $13 }
END {
  print "| budget | lookup text | draft length | τ tokens/pass | decode tok/s | ÷ no drafting | 0.8·τ | peak RSS MiB | cgroup max MiB | notes |"
  print "|---:|---|---|---:|---:|---:|---:|---:|---:|---|"
  for (i = 1; i <= nk; i++) { split(order[i], f, SUBSEP); key = order[i]
    if (f[3] == "off") base[f[1]] = med(tps[key]) }
  for (i = 1; i <= nk; i++) { split(order[i], f, SUBSEP); key = order[i]
    s = tps[key] == "" ? "" : med(tps[key]); t = tau[key] == "" ? "" : med(tau[key])
    r = (s != "" && base[f[1]] > 0) ? sprintf("%.2f", s / base[f[1]]) : ""
    k = f[3] == "off" ? "no drafting" : f[3] == "adaptive" ? "adaptive (max " f[4] ")" : "fixed " f[4]
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f[1], f[2] == "-" ? "" : f[2], k,
      t == "" ? "" : sprintf("%.2f", t), s == "" ? "" : sprintf("%.3f", s), r,
      (t != "" && f[3] != "off") ? sprintf("%.2f", 0.8 * t) : "",
      rss[key] == "" ? "" : sprintf("%.0f", med(rss[key]) / 1048576), cg[key] == "" || med(cg[key]) == 0 ? "" : sprintf("%.0f", med(cg[key]) / 1048576),
      bad[key] == "" ? "" : "failed:" bad[key] }
}' "$CSV" >"$OUT/table.md"
cat "$OUT/table.md"
log "results in $OUT (runs.csv, table.md); load now: $(cut -d' ' -f1-3 /proc/loadavg)"
