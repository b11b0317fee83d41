#!/usr/bin/env bash
# bench/ab_budget.sh — two builds of sluice (BEFORE and AFTER a change) on one model, interleaved in one
# invocation, at a few budget x backend cells: same tokens? same speed? same memory?
#
#   bench/ab_budget.sh --before DIR --after DIR --model FILE [--cells 1G:uring,4G:uring,1G:pread] [--runs 4]
#                      [-n 6] [-c 512] [-t 2] [-p Hello] [--out DIR] [--run-timeout S] [--time-limit S]
#                      [--args "EXTRA SLUICE RUN ARGS"]
#   bench/ab_budget.sh --report DIR          (rebuild DIR/summary.md from DIR/runs.csv)
#
# DIR is a build directory holding `sluice` (e.g. a second worktree's build/).  Runs go in rounds: in
# round r, every cell runs one BEFORE and one AFTER, in the order before,after or after,before by the
# parity of r + the cell's index, so each cell sees B A A B B A A B ... and neither build is always
# first.  Each run: `sync; echo 3 > /proc/sys/vm/drop_caches`, a fresh cgroup-v1 memory cgroup with
# memory.limit_in_bytes = the budget (bench/lib.sh), inside it
#   sluice run -m MODEL --ram-budget B --io BACKEND -p PROMPT -n N -c CTX -t T --temp 0
#              --json --top-logits 5 --stats --stats-json FILE
# then the cgroup's memory.max_usage_in_bytes (RSS + page cache), failcnt and oom_kill.  The --json
# lines (token ids, texts and the top-5 logits of every step) of every run of a cell must be
# byte-identical across both builds; the summary says so.  Outputs in OUT (default
# results/ab-<timestamp>): runs.csv (one row per run), runs/<tag>.{json,out,err}, summary.md (medians,
# min-max, after/before ratio of the medians, and the after/before ratio of each round's adjacent pair).
# Needs root (drop_caches, cgroup); without it, it says so and measures peak RSS only.
set -uo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BEFORE="" AFTER="" MODEL="" CELLS="1G:uring,4G:uring,1G:pread" RUNS=4 NTOK=6 CTX=512 THREADS=2 PROMPT=Hello
OUT="" RUN_TIMEOUT=900 TIME_LIMIT=10800 REPORT="" EXTRA=""
usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case "$1" in
        --before) BEFORE=$2; shift ;;
        --after) AFTER=$2; shift ;;
        --model) MODEL=$2; shift ;;
        --cells) CELLS=$2; shift ;;
        --runs) RUNS=$2; shift ;;
        -n) NTOK=$2; shift ;;
        -c) CTX=$2; shift ;;
        -t) THREADS=$2; shift ;;
        -p|--prompt) PROMPT=$2; shift ;;
        --out) OUT=$2; shift ;;
        --run-timeout) RUN_TIMEOUT=$2; shift ;;   # read by in_cgroup (bench/lib.sh)
        --time-limit) TIME_LIMIT=$2; shift ;;
        --report) REPORT=$2; shift ;;
        --args) EXTRA=$2; shift ;;
        -h|--help) usage 0 ;;
        *) echo "ab_budget: unknown option $1" >&2; usage 2 ;;
    esac
    shift
done
summarize() {   # OUT/runs.csv -> OUT/summary.md
# summary.md: per cell x side medians (min-max); after/before ratio of medians; token identity per cell
awk -F, '
function sortv(s, v,   n, i, j, t) { n = split(s, v, " ")
    for (i = 2; i <= n; i++) { t = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
    return n }
function med(s,   v, n) { n = sortv(s, v); if (!n) return ""; return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
function rng(s, f,   v, n) { n = sortv(s, v); if (!n) return "–"; return sprintf(f "–" f, v[1], v[n]) }
function mx(s,   v, n) { n = sortv(s, v); return n ? v[n] : "" }
NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
{   k = $c["budget"] " " $c["backend"]; s = $c["side"]
    if (!(k in seen)) { seen[k] = 1; ord[++nk] = k }
    n[k, s]++; sha[k] = sha[k] " " $c["out_sha"]
    if ($c["status"] != "ok") { bad[k, s]++; next }
    ok[k, s]++
    D[k, s] = D[k, s] " " $c["decode_tok_s"]; P[k, s] = P[k, s] " " $c["prompt_tok_s"]
    R[k, s] = R[k, s] " " $c["peak_rss"] / 1048576; G[k, s] = G[k, s] " " $c["cg_max"] / 1048576
    F[k, s] = F[k, s] " " $c["failcnt"]; O[k, s] += $c["oom"]
    L[k, s] = L[k, s] " " $c["load_s"]; W[k, s] = W[k, s] " " $c["wait_s"]; C[k, s] = C[k, s] " " $c["compute_s"]
    p = $c["blocks_resident"] " blocks" ($c["lm_head_resident"] == "true" ? " + head" : "") " resident, " $c["pieces_per_pass"] " pieces / " sprintf("%.1f", $c["pass_bytes"] / 1048576) " MiB per pass, chunk " $c["chunk_bytes"] / 1048576 " MiB, prefetch " $c["prefetch"] ", batch " $c["n_batch"]
    if (index(plan[k, s], "[" p "]") == 0) plan[k, s] = plan[k, s] " [" p "]"
}
END {
    print "| budget | backend | build | runs ok | decode tok/s median (min–max) | prompt tok/s median (min–max) | peak RSS MiB max | cgroup max MiB max | failcnt max | OOM | load s median | stream wait s median | compute s median | after ÷ before (decode, prompt) |"
    print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    for (i = 1; i <= nk; i++) { k = ord[i]; split(k, kb, " ")
        for (j = 1; j <= 2; j++) { s = j == 1 ? "before" : "after"
            ratio = ""
            if (s == "after" && med(D[k, "before"]) > 0 && med(P[k, "before"]) > 0)
                ratio = sprintf("**%.3f**, %.3f", med(D[k, "after"]) / med(D[k, "before"]), med(P[k, "after"]) / med(P[k, "before"]))
            printf "| %s | %s | %s | %d/%d | %.3f (%s) | %.3f (%s) | %.1f | %.1f | %s | %d | %.1f | %.2f | %.2f | %s |\n", kb[1], kb[2], s,
                ok[k, s], n[k, s], med(D[k, s]), rng(D[k, s], "%.3f"), med(P[k, s]), rng(P[k, s], "%.3f"),
                mx(R[k, s]), mx(G[k, s]), mx(F[k, s]), O[k, s], med(L[k, s]), med(W[k, s]), med(C[k, s]), ratio
        }
    }
    print ""
    for (i = 1; i <= nk; i++) { k = ord[i]; m = split(sha[k], v, " "); u = 0; delete h
        for (j = 1; j <= m; j++) if (!(v[j] in h)) { h[v[j]] = 1; u++ }
        printf "- %s: %d runs, %s (--json ids + texts + top-5 logits)\n", k, m, u == 1 ? "output IDENTICAL in every run of both builds" : "**outputs DIFFER** (" u " distinct)"
        printf "  - plan before:%s; after:%s\n", plan[k, "before"], plan[k, "after"]
    }
}' "$OUT/runs.csv" >"$OUT/summary.md"
# paired: in each round a cell's two runs are adjacent in time, so their ratio cancels most of the drift
awk -F, '
NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
$c["status"] == "ok" { k = $c["budget"] " " $c["backend"]; v[k, $c["round"], $c["side"]] = $c["decode_tok_s"]
    if (!(k in seen)) { seen[k] = 1; ord[++nk] = k }; if ($c["round"] + 0 > R) R = $c["round"] + 0 }
END { print ""; print "After ÷ before decode tok/s of each round'"'"'s pair (the two runs adjacent in time):"; print ""
    for (i = 1; i <= nk; i++) { k = ord[i]; line = ""; m = 0; up = 0; lg = 0
        for (r = 1; r <= R; r++) if (v[k, r, "before"] > 0 && v[k, r, "after"] > 0) {
            x = v[k, r, "after"] / v[k, r, "before"]; a[++m] = x; line = line sprintf(" %.2f", x); up += x > 1; lg += log(x) }
        if (!m) continue
        for (p = 2; p <= m; p++) { t = a[p]; for (q = p - 1; q >= 1 && a[q] > t; q--) a[q + 1] = a[q]; a[q + 1] = t }
        printf "- %s:%s — median **%.3f**, geometric mean %.3f, after faster in %d of %d\n", k, line,
            m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2, exp(lg / m), up, m } }' "$OUT/runs.csv" >>"$OUT/summary.md"
}
if [ -n "$REPORT" ]; then OUT=$REPORT; summarize; cat "$OUT/summary.md"; exit 0; fi
[ -x "$BEFORE/sluice" ] && [ -x "$AFTER/sluice" ] && [ -r "$MODEL" ] || usage 2
T0=$(date +%s)
log() { printf '[ab_budget %s +%ss] %s\n' "$(date +%H:%M:%S)" "$(( $(date +%s) - T0 ))" "$*" >&2; }
. "$REPO/bench/lib.sh"
: "$RUN_TIMEOUT"   # used by in_cgroup

[ -n "$OUT" ] || OUT=$REPO/results/ab-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT/runs" || exit 1
CSV=$OUT/runs.csv
COLS="round cell budget backend side status exit wall_s decode_tok_s prompt_tok_s n_decode peak_rss cg_max failcnt oom
blocks_resident lm_head_resident kv n_batch chunk_bytes prefetch planned_bytes pass_bytes bytes_read passes wait_s
compute_s read_gbs load_s pieces_per_pass load1 out_sha"
echo $COLS | tr ' ' , >"$CSV"
CHILD_PID=""
trap '[ -z "$CHILD_PID" ] || kill "$CHILD_PID" 2>/dev/null; cg_remove' EXIT
trap 'log interrupted; exit 130' INT TERM
cg_detect
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "before: $BEFORE ($(git -C "$BEFORE/.." describe --always --dirty 2>/dev/null))"
    echo "after: $AFTER ($(git -C "$AFTER/.." describe --always --dirty 2>/dev/null))"
    echo "model: $MODEL ($(stat -L -c %s "$MODEL") bytes)"
    echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) cores"
    echo "extra sluice args: ${EXTRA:-none}"
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"

IFS=, read -r -a CELL <<<"$CELLS"
run_one() {   # ROUND CELLIDX SIDE
    local r=$1 ci=$2 side=$3 b=${CELL[$2]%%:*} be=${CELL[$2]#*:} bin
    [ "$side" = before ] && bin=$BEFORE/sluice || bin=$AFTER/sluice
    local tag="$b-$be-$side-$r" js out err rc t1 t2 k
    js=$OUT/runs/$tag.json out=$OUT/runs/$tag.out err=$OUT/runs/$tag.err
    declare -A V=()
    CG_MAX="" CG_FAILCNT="" CG_OOM=""
    drop_caches
    [ "$CG_OK" != 1 ] || cg_create "$(size_bytes "$b")" || { log "cgroup setup failed"; cg_remove; }
    t1=$(date +%s.%N)
    in_cgroup "$bin" run -m "$MODEL" --ram-budget "$b" --io "$be" -p "$PROMPT" -n "$NTOK" -c "$CTX" -t "$THREADS" \
        --temp 0 --json --top-logits 5 --stats --stats-json "$js" $EXTRA </dev/null >"$out" 2>"$err"
    rc=$?
    t2=$(date +%s.%N)
    [ -z "$CG_CUR" ] || { cg_read; cg_remove; }
    V[status]=ok
    if [ "${CG_OOM:-0}" -gt 0 ] || [ $rc = 137 ]; then V[status]=oom; elif [ $rc != 0 ]; then V[status]=fail; fi
    [ -s "$js" ] || V[status]=fail
    for k in decode_tok_s prompt_tok_s n_decode peak_rss blocks_resident lm_head_resident kv n_batch chunk_bytes \
             prefetch planned_bytes pass_bytes bytes_read passes wait_s compute_s read_gbs; do
        V[$k]=$(json_get "$js" "$k")
    done
    V[round]=$r V[cell]=$ci V[budget]=$b V[backend]=$be V[side]=$side V[exit]=$rc V[cg_max]=$CG_MAX
    V[failcnt]=$CG_FAILCNT V[oom]=$CG_OOM V[load1]=$(cut -d' ' -f1 /proc/loadavg)
    V[wall_s]=$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.1f", b - a }')
    V[out_sha]=$(sha256sum <"$out" | cut -c1-16)
    # from --stats on stderr: model load time (includes a disk probe when the cached rate is stale) and pieces per pass
    V[load_s]=$(sed -n 's/^sluice: load \([0-9.]*\) s .*/\1/p' "$err" | head -n1)
    V[pieces_per_pass]=$(sed -n 's/^sluice: stream: backend [a-z]*, \([0-9]*\) pieces per pass.*/\1/p' "$err" | head -n1)
    local row="" sep=""
    for k in $COLS; do row+="$sep${V[$k]:-}"; sep=,; done
    echo "$row" >>"$CSV"
    log "  $tag: ${V[status]} decode ${V[decode_tok_s]} tok/s, prompt ${V[prompt_tok_s]}, peak RSS $(mib "${V[peak_rss]}") MiB," \
        "cgroup max $(mib "$CG_MAX") MiB, failcnt ${CG_FAILCNT:-?}, out ${V[out_sha]}, ${V[wall_s]} s"
}

log "cells $CELLS, $RUNS runs per side per cell, model $MODEL; results in $OUT"
for r in $(seq 1 "$RUNS"); do
    for ci in "${!CELL[@]}"; do
        if [ $(( $(date +%s) - T0 )) -ge "$TIME_LIMIT" ]; then log "time limit: round $r cell $ci skipped"; continue; fi
        if [ $(( (r + ci) % 2 )) = 1 ]; then order="before after"; else order="after before"; fi
        for side in $order; do run_one "$r" "$ci" "$side"; done
    done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"

summarize
cat "$OUT/summary.md"
log "done: $OUT"
