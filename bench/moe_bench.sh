#!/usr/bin/env bash
# bench/moe_bench.sh — Mixture-of-Experts under a RAM budget, sluice against llama.cpp (issue #38): decode and
# prompt tok/s, real peak memory (RSS + page cache), OOM kills, bytes read per token and the disk bound.
#
#   bench/moe_bench.sh --model FILE --llama-cpp PATH/llama-completion [options]   (options: usage() below)
#
#   e.g.  bench/moe_bench.sh --model /var/tmp/sluice-models/qwen3-30b-a3b.Q4_K_M.gguf \
#             --llama-cpp /path/to/llama.cpp/build/bin/llama-completion --budgets 2G,4G,8G --runs 3 -n 16
#
# Three configurations per budget, interleaved (sluice, llama.cpp, llama.cpp -nr, sluice, ...) so that drift in
# the machine spreads over all of them:
#   sluice        build/sluice run -m M --ram-budget B -p P -n N -c C -t T --temp 0 --stats-json F
#   llama.cpp     LLAMA -m M -p P -n N -c C -t T --temp 0 -no-cnv            (its defaults: mmap, repacking on)
#   llama.cpp-nr  the same with -nr (--no-repack: the weights stay in the mmap instead of being copied into RAM)
# -no-cnv only stops llama-completion from entering interactive chat mode when the file has a chat template;
# it changes nothing about how the weights are held.  LLAMA_ARG_* variables are cleared so that the
# environment cannot change llama.cpp's defaults.  The script only runs the llama.cpp binary given with
# --llama-cpp; it never builds it.  Its decode and prompt tok/s come from its "eval time" and "prompt eval time"
# lines on stderr; its logger is asynchronous and now and then loses those last lines at exit, and such a run
# is run again (--llama-retries).
#
# Every run: page cache dropped, a fresh child memory cgroup (v1) limited to the budget (memory and
# memory+swap), the run inside it under a timeout; afterwards the cgroup's memory.max_usage_in_bytes (peak
# RSS + page cache), failcnt and oom_kill.  bench_io measures the device's O_DIRECT sequential read rate on the
# model at the start (and at the end): the disk bound of a row is that rate ÷ the bytes the row read per token.
# sluice's --stats-json is kept whole: every key of every run goes to stats.csv, and the table shows the medians
# of its expert / hit / miss / cache / prefetch keys, whatever keys this build of sluice writes.
#
# Outputs in results/<timestamp>-moe-<model>/ (gitignored): runs.csv (one row per run), stats.csv (every
# --stats-json key of every sluice run, long format), summary.csv (one row per budget × configuration), table.md
# (also printed on stdout), machine.txt, bench_io-*.txt, runs/ (each run's output and JSON).
# --report DIR rebuilds summary.csv and table.md from an earlier run.
#
# Needs bash, coreutils, awk; root for the cgroup and drop_caches (without root it says so, passes the budget
# to sluice but cannot enforce it, and measures with whatever is in the page cache).
set -uo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
T0=$(date +%s)

usage() {
    cat <<'EOF'
usage: bench/moe_bench.sh --model FILE [--llama-cpp PATH] [options]
  --model FILE         GGUF model (e.g. a qwen3-30b-a3b-shaped file made by build/sluice-gen)
  --llama-cpp PATH     llama.cpp's non-interactive completion binary (build/bin/llama-completion of a 2026
                       build); run, never built, by this script.  Without it only sluice runs
  --budgets LIST       comma list of sizes, K/M/G = KiB/MiB/GiB (default 2G,4G,8G)
  --configs LIST       comma list of sluice,sluice-prefetch,llama.cpp,llama.cpp-nr (default: sluice and the two
                       llama.cpp ones, which need --llama-cpp; sluice-prefetch is sluice with --expert-prefetch)
  --runs N             runs per budget × configuration (default 3)
  -n N                 tokens to generate per run (default 16: 1 from the prompt pass + 15 decode steps)
  -c N                 context length (default 512)
  -p, --prompt TEXT    prompt (default "Hello")
  -t N                 threads for both (default 2)
  --sluice-args A      extra arguments for sluice run (e.g. "--draft off")
  --llama-cpp-args A   extra arguments for both llama.cpp configurations (e.g. "--no-warmup")
  --llama-cpp-label T  what to call that build in machine.txt and the table (e.g. "d32676d7 2026-08-18, GGML_NATIVE")
  --llama-retries N    rerun a llama.cpp run that exited 0 without its timing lines up to N times (default 2;
                       the 2026 logger is asynchronous and loses its last lines at exit in ~1 run of 6)
  --time-limit S       total wall-clock limit in seconds; runs not started by then are skipped (default 14400)
  --run-timeout S      kill a single run after S seconds (default 1800)
  --disk-gbs X         skip bench_io and use X GB/s as the device's read rate
  --no-end-io          skip the second bench_io at the end
  --build DIR          directory holding sluice and bench_io (default $SLUICE_BUILD or ./build)
  --out DIR            results directory (default results/<timestamp>-moe-<model>)
  --report DIR         only rebuild summary.csv and table.md from the results in DIR
  -h, --help
EOF
    exit "${1:-0}"
}

log() { printf '[moe_bench %s +%s] %s\n' "$(date +%H:%M:%S)" "$(elapsed_hms)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
elapsed_hms() { local s=$(( $(date +%s) - T0 )); printf '%d:%02d:%02d' $((s / 3600)) $((s / 60 % 60)) $((s % 60)); }

# ---------------------------------------------------------------- options
MODEL="" LLAMA="" BUDGETS="2G,4G,8G" CONFIGS="" RUNS=3 NTOK=16 CTX=512 PROMPT="Hello" THREADS=2
SLUICE_ARGS="" LLAMA_ARGS="" LLAMA_RETRIES=2 LLAMA_LABEL="" TIME_LIMIT=14400 RUN_TIMEOUT=1800 DISK_GBS="" END_IO=1
BUILD=${SLUICE_BUILD:-$REPO/build} OUT="" REPORT_DIR=""
ARGV_STR="bench/moe_bench.sh $*"
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || case "$1" in --no-end-io|-h|--help) ;; *) echo "moe_bench: $1 needs a value" >&2; usage 2 ;; esac
    case "$1" in
        --model|-m) MODEL=$2; shift ;;
        --llama-cpp) LLAMA=$2; shift ;;
        --budgets) BUDGETS=$2; shift ;;
        --configs) CONFIGS=$2; shift ;;
        --runs) RUNS=$2; shift ;;
        -n) NTOK=$2; shift ;;
        -c) CTX=$2; shift ;;
        -p|--prompt) PROMPT=$2; shift ;;
        -t) THREADS=$2; shift ;;
        --sluice-args) SLUICE_ARGS=$2; shift ;;
        --llama-cpp-args) LLAMA_ARGS=$2; shift ;;
        --llama-retries) LLAMA_RETRIES=$2; shift ;;
        --llama-cpp-label) LLAMA_LABEL=$2; shift ;;
        --time-limit) TIME_LIMIT=$2; shift ;;
        --run-timeout) RUN_TIMEOUT=$2; shift ;;
        --disk-gbs) DISK_GBS=$2; shift ;;
        --no-end-io) END_IO=0 ;;
        --build) BUILD=$2; shift ;;
        --out) OUT=$2; shift ;;
        --report) REPORT_DIR=$2; shift ;;
        -h|--help) usage 0 ;;
        *) echo "moe_bench: unknown option $1" >&2; usage 2 ;;
    esac
    shift
done

# shared helpers: json_get size_bytes mib dev_sectors drop_caches cg_* in_cgroup
. "$REPO/bench/lib.sh"

# json_pairs FILE: every "key":value of a flat one-line JSON object, as key<TAB>value lines (quotes removed).
json_pairs() {
    sed -e 's/^[[:space:]]*{//' -e 's/}[[:space:]]*$//' "$1" 2>/dev/null | awk '
    { s = $0
      while (match(s, /"[^"]*":("[^"]*"|[^,]*)/)) {
          kv = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
          k = kv; sub(/":.*/, "", k); sub(/^"/, "", k)
          v = kv; sub(/^"[^"]*":/, "", v); gsub(/"/, "", v)
          printf "%s\t%s\n", k, v } }'
}

# bench_io_rate TAG: bench_io on the model after dropping the cache; prints the best of its raw O_DIRECT
# sequential figures in GB/s (the output is kept in bench_io-TAG.txt).
bench_io_rate() {
    local f=$OUT/bench_io-$1.txt
    drop_caches
    "$BENCH_IO" "$MODEL" --raw-only >"$f" 2>&1 || { log "bench_io failed (see $f)"; return 1; }
    awk -F': ' '/^raw O_DIRECT sequential/ { v = $NF + 0; if (v > best) best = v } END { if (best > 0) print best }' "$f"
}

# ---------------------------------------------------------------- one run
# runs.csv columns.  passes_total = prompt passes (ceil(n_prompt / n_batch)) + decode passes; read_per_pass =
# bytes_read / passes_total.  For llama.cpp, bytes read come only from the device counters (dev_read_bytes:
# the whole device, model load and warmup included).
RUN_COLS="model model_bytes budget_label budget_bytes config run status exit_code wall_s cg_max cg_memsw_max
cg_failcnt oom_kills peak_rss n_prompt prompt_tok_s n_decode decode_tok_s passes_total tokens_per_pass bytes_read
read_per_pass expert_bytes expert_per_pass read_gbs wait_s compute_s pred_tok_s blocks_resident backend drafter
dev_read_bytes load1 attempts note"
declare -A R
emit_row() {
    local c row="" sep=""
    for c in $RUN_COLS; do row+="$sep${R[$c]:-}"; sep=,; done
    echo "$row" >>"$RUNS_CSV"
}

# run_one BUDGET_INDEX CONFIG RUN: one measured run; a llama.cpp run that exited 0 without its timing lines
# (llama.cpp's asynchronous logger loses its last lines at exit now and then) is run again, up to
# --llama-retries times, each attempt from a dropped cache in a fresh cgroup; R[attempts] counts them.
run_one() {
    local attempt=1
    while :; do
        run_attempt "$@"
        R[attempts]=$attempt
        [ "${R[status]}" = nolog ] && [ "$attempt" -le "$LLAMA_RETRIES" ] || break
        log "  llama.cpp exited 0 but its timing lines were lost (asynchronous logger); running it again"
        mv "$OUT/runs/$(run_tag "$@").log" "$OUT/runs/$(run_tag "$@").lost$attempt.log" 2>/dev/null
        attempt=$((attempt + 1))
    done
    [ "${R[status]}" != nolog ] || R[status]=fail
    emit_row
    log "  -> ${R[status]}: decode ${R[decode_tok_s]:-?} tok/s, prompt ${R[prompt_tok_s]:-?} tok/s," \
        "cgroup max $(mib "${R[cg_max]}") MiB, oom_kill ${R[oom_kills]:-?}, read $(mib "${R[bytes_read]:-${R[dev_read_bytes]:-}}") MiB," \
        "${R[wall_s]} s${R[note]:+ (${R[note]})}"
}
run_tag() { printf '%s-%s-%s' "${BLABEL[$1]}" "$2" "$3" | tr -c 'A-Za-z0-9.-' '_'; }

run_attempt() {
    local idx=$1 cfg=$2 run=$3 rc t1 t2 k v
    local label=${BLABEL[$idx]} bytes=${BBYTES[$idx]}
    local tag; tag=$(run_tag "$idx" "$cfg" "$run")
    local js=$OUT/runs/$tag.json errf=$OUT/runs/$tag.log
    R=([model]=$MODEL_NAME [model_bytes]=$MODEL_BYTES [budget_label]=$label [budget_bytes]=$bytes [config]=$cfg
       [run]=$run)
    rm -f "$js"
    CG_MAX="" CG_MEMSW="" CG_FAILCNT="" CG_OOM=""
    drop_caches
    if [ "$CG_OK" = 1 ]; then cg_create "$bytes" || { log "warning: cgroup setup failed"; cg_remove; }; fi
    local d0; d0=$(dev_sectors)
    local timef=()
    [ ! -x /usr/bin/time ] || timef=(/usr/bin/time -f 'moe-bench-maxrss-kib %M')
    t1=$(date +%s.%N)
    case "$cfg" in
        sluice|sluice-prefetch)
            local pf=(); [ "$cfg" = sluice ] || pf=(--expert-prefetch)
            # shellcheck disable=SC2086  # SLUICE_ARGS is a list of words by design
            in_cgroup "$SLUICE" run -m "$MODEL" --ram-budget "$bytes" -p "$PROMPT" -n "$NTOK" -c "$CTX" -t "$THREADS" \
                --temp 0 --stats-json "$js" "${pf[@]}" $SLUICE_ARGS </dev/null >"$errf.out" 2>"$errf"
            rc=$? ;;
        llama.cpp|llama.cpp-nr)
            local nr=(); [ "$cfg" = llama.cpp ] || nr=(-nr)
            # shellcheck disable=SC2086  # LLAMA_ARGS is a list of words by design
            in_cgroup "${timef[@]}" "$LLAMA" -m "$MODEL" -p "$PROMPT" -n "$NTOK" -c "$CTX" -t "$THREADS" --temp 0 \
                -no-cnv "${nr[@]}" $LLAMA_ARGS </dev/null >"$errf.out" 2>"$errf"
            rc=$? ;;
    esac
    t2=$(date +%s.%N)
    local d1; d1=$(dev_sectors)
    [ -z "$d0" ] || [ -z "$d1" ] || R[dev_read_bytes]=$(( (d1 - d0) * 512 ))
    R[load1]=$(cut -d' ' -f1 /proc/loadavg)
    if [ -n "$CG_CUR" ]; then cg_read; cg_remove; fi
    R[exit_code]=$rc R[cg_max]=$CG_MAX R[cg_memsw_max]=$CG_MEMSW R[cg_failcnt]=$CG_FAILCNT R[oom_kills]=$CG_OOM
    R[wall_s]=$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.1f", b - a }')

    if [ "${CG_OOM:-0}" -gt 0 ] || [ "$rc" = 137 ]; then R[status]=oom; R[note]="killed (exit $rc; cgroup oom_kill ${CG_OOM:-?})"
    elif [ "$rc" = 124 ]; then R[status]=timeout; R[note]="killed after --run-timeout $RUN_TIMEOUT s"
    elif [ "$rc" != 0 ]; then R[status]=fail; R[note]=$(grep -v '^moe-bench-maxrss-kib' "$errf" | tail -n1 | tr ',"' ";'" | cut -c1-160)
    else R[status]=ok; fi

    if [ "$cfg" = sluice ] || [ "$cfg" = sluice-prefetch ]; then
        if [ -s "$js" ]; then
            json_pairs "$js" | while IFS=$'\t' read -r k v; do
                printf '%s,%s,%s,%s,%s,%s\n' "$label" "$bytes" "$cfg" "$run" "$k" "${v//,/;}"
            done >>"$STATS_CSV"
            for k in peak_rss n_prompt prompt_tok_s n_decode decode_tok_s tokens_per_pass bytes_read expert_bytes \
                     read_gbs wait_s compute_s pred_tok_s blocks_resident backend drafter; do
                R[$k]=$(json_get "$js" "$k")
            done
            [ "${R[n_decode]:-0}" != 0 ] || R[decode_tok_s]=""   # -n 1: a prompt measurement, no decode rate
            [ "$(json_get "$js" status)" = 0 ] || [ "${R[status]}" != ok ] || { R[status]=fail; R[note]="stats status $(json_get "$js" status)"; }
            local np=${R[n_prompt]:-0} nb dp
            nb=$(json_get "$js" n_batch); [ "${nb:-0}" -gt 0 ] 2>/dev/null || nb=512
            dp=$(json_get "$js" passes); [ -n "$dp" ] || dp=${R[n_decode]:-0}
            R[passes_total]=$(( (np + nb - 1) / nb + dp ))
            if [ "${R[passes_total]}" -gt 0 ]; then
                [ -z "${R[bytes_read]}" ] || R[read_per_pass]=$(( ${R[bytes_read]} / ${R[passes_total]} ))
                [ -z "${R[expert_bytes]}" ] || R[expert_per_pass]=$(( ${R[expert_bytes]} / ${R[passes_total]} ))
            fi
        elif [ "${R[status]}" = ok ]; then
            R[status]=fail R[note]="no stats JSON"
        fi
    else
        # llama.cpp's timing lines (stderr):
        #   llama_perf_context_print: prompt eval time = X ms / N tokens ( Y ms per token, Z tokens per second)
        #   llama_perf_context_print:        eval time = X ms / N runs   ( Y ms per token, Z tokens per second)
        R[decode_tok_s]=$(grep 'eval time' "$errf" | grep -v 'prompt eval' |
                          sed -n 's/.*, *\([0-9.]*\) tokens per second.*/\1/p' | tail -n1)
        R[n_decode]=$(grep 'eval time' "$errf" | grep -v 'prompt eval' | sed -n 's/.*\/ *\([0-9]*\) runs.*/\1/p' | tail -n1)
        R[prompt_tok_s]=$(grep 'prompt eval time' "$errf" | sed -n 's/.*, *\([0-9.]*\) tokens per second.*/\1/p' | tail -n1)
        R[n_prompt]=$(grep 'prompt eval time' "$errf" | sed -n 's/.*\/ *\([0-9]*\) tokens.*/\1/p' | tail -n1)
        R[peak_rss]=$(awk '$1 == "moe-bench-maxrss-kib" { printf "%.0f\n", $2 * 1024 }' "$errf" | tail -n1)
        # -n 1: the prompt pass makes the only token and the eval line reads "0.00 ms / 1 runs ... inf tokens
        # per second"; the run is a prompt measurement then, not a lost log.
        local no_decode=""
        [ "$NTOK" -gt 1 ] || ! grep 'eval time' "$errf" | grep -v 'prompt eval' | grep -q 'inf tokens per second' || no_decode=1
        if [ "${R[status]}" = ok ] && [ -z "${R[decode_tok_s]}" ] && { [ -z "$no_decode" ] || [ -z "${R[prompt_tok_s]}" ]; }; then
            R[status]=nolog R[note]="no 'eval time' line in llama.cpp's output"
        fi
    fi
}

# ---------------------------------------------------------------- the report
# summary.csv: one row per budget × configuration in the order run.  tok/s: median, min, max over the ok runs;
# memory: the max over all runs (a budget is kept only if every run keeps it); disk bound = device GB/s ÷
# bytes read per pass × tokens per pass.  Expert keys: medians of every stats.csv key matching
# expert|hit|miss|cache|prefetch (ok runs; not "prefetch", the plan's depth, nor page_cache_at_exit), as
# "key=value" pairs separated by spaces.
make_report() {
DISK_GBS_USED=$(awk -v a="$DISK_START" -v b="$DISK_END" 'BEGIN {
    if (a != "" && b != "") printf "%.3f", (a + b) / 2; else if (a != "") print a; else if (b != "") print b }')
SUMMARY=$OUT/summary.csv
awk -F, -v disk="$DISK_GBS_USED" -v statsf="$OUT/stats.csv" -v runsf="$RUNS_CSV" '
function sortv(s, v,   n, i, j, t) { n = split(s, v, " ")
    for (i = 2; i <= n; i++) { t = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
    return n }
function med(s,   n, v) { n = sortv(s, v); if (n == 0) return ""; return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
function mn(s,   n, v) { n = sortv(s, v); return n ? v[1] : "" }
function mx(s,   n, v) { n = sortv(s, v); return n ? v[n] : "" }
function add(k, c, v) { if (v != "") L[k, c] = L[k, c] " " v }
BEGIN {
    # ok sluice runs, to pick their stats
    while ((getline line < runsf) > 0) {
        n = split(line, f, ",")
        if (!hdr++) { for (i = 1; i <= n; i++) rc[f[i]] = i; continue }
        if (f[rc["status"]] == "ok") okrun[f[rc["budget_label"]], f[rc["config"]], f[rc["run"]]] = 1
    }
    close(runsf)
    while ((getline line < statsf) > 0) {
        n = split(line, f, ",")
        if (f[1] == "budget_label") continue
        if (!((f[1], f[3], f[4]) in okrun)) continue
        key = f[5]
        if (key !~ /expert|hit|miss|cache|prefetch/ || key == "page_cache_at_exit" || key == "prefetch") continue
        if (f[6] !~ /^-?[0-9.eE+-]+$/) continue
        k = f[1] SUBSEP f[3]
        if (!((k, key) in SK)) { SK[k, key] = 1; skeys[k] = skeys[k] " " key }
        S[k, key] = S[k, key] " " f[6]
    }
}
NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
{
    k = $col["budget_label"] SUBSEP $col["config"]
    if (!(k in seen)) { seen[k] = 1; order[++nk] = k; B[k] = $col["budget_label"]; BB[k] = $col["budget_bytes"]
                        CF[k] = $col["config"]; MB = $col["model_bytes"]; MN = $col["model"] }
    st = $col["status"]; nruns[k]++; cnt[k, st]++
    add(k, "cg", $col["cg_max"]); add(k, "fail", $col["cg_failcnt"])
    if ($col["attempts"] > 1) rerun[k] += $col["attempts"] - 1
    if (st != "ok") next
    nok[k]++
    split("decode_tok_s prompt_tok_s peak_rss read_per_pass expert_per_pass tokens_per_pass dev_read_bytes n_decode n_prompt passes_total bytes_read read_gbs", cs, " ")
    for (i in cs) add(k, cs[i], $col[cs[i]])
    DR[k] = $col["drafter"]; BK[k] = $col["backend"]; BR[k] = $col["blocks_resident"]
}
END {
    print "model,model_bytes,budget_label,budget_bytes,config,n_ok,n_runs,decode_med,decode_min,decode_max,prompt_med,prompt_min,prompt_max,cg_max_max,peak_rss_max,failcnt_max,oom_runs,timeout_runs,fail_runs,read_per_pass,expert_per_pass,tokens_per_pass,read_per_token,dev_read_bytes_med,disk_gbs,bound_tok_s,pct_bound,backend,drafter,blocks_resident,reruns,expert_stats"
    for (o = 1; o <= nk; o++) {
        k = order[o]
        d = med(L[k, "decode_tok_s"]); rpp = med(L[k, "read_per_pass"]); tpp = med(L[k, "tokens_per_pass"])
        if (tpp == "" || tpp <= 0) tpp = 1
        rpt = rpp != "" ? rpp / tpp : ""
        bound = (disk != "" && rpt > 0) ? disk * 1e9 / rpt : ""
        pct = (bound != "" && d != "") ? 100 * d / bound : ""
        es = ""; n = split(skeys[k], ks, " ")
        for (i = 1; i <= n; i++) es = es (es ? " " : "") ks[i] "=" med(S[k, ks[i]])
        printf "%s,%s,%s,%s,%s,%d,%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%d,%d,%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%d,%s\n",
            MN, MB, B[k], BB[k], CF[k], nok[k], nruns[k], d, mn(L[k, "decode_tok_s"]), mx(L[k, "decode_tok_s"]),
            med(L[k, "prompt_tok_s"]), mn(L[k, "prompt_tok_s"]), mx(L[k, "prompt_tok_s"]),
            mx(L[k, "cg"]), mx(L[k, "peak_rss"]), mx(L[k, "fail"]), cnt[k, "oom"], cnt[k, "timeout"], cnt[k, "fail"],
            rpp == "" ? "" : sprintf("%.0f", rpp), med(L[k, "expert_per_pass"]), (L[k, "tokens_per_pass"] == "" ? "" : tpp),
            rpt == "" ? "" : sprintf("%.0f", rpt), med(L[k, "dev_read_bytes"]), disk, bound, pct, BK[k], DR[k], BR[k], rerun[k] + 0, es
    }
}' "$RUNS_CSV" >"$SUMMARY"

TABLE=$OUT/table.md
{
    echo "Model \`$MODEL_NAME\` ($(awk -v b="$MODEL_BYTES" 'BEGIN { printf "%.2f GB", b / 1e9 }')); \`-p \"$PROMPT\" -n $NTOK -c $CTX -t $THREADS --temp 0\`;" \
         "$RUNS runs per row, configurations interleaved; page cache $([ "$DROP_OK" = 1 ] && echo "dropped before every run" || echo "**not** dropped (no permission)");" \
         "$([ "$CG_OK" = 1 ] && echo "each run in a fresh memory cgroup limited to the budget" || echo "**no** memory cgroup (budget not enforced)")."
    [ -z "$LLAMA_LABEL" ] || echo "llama.cpp: $LLAMA_LABEL."
    echo "Disk: bench_io O_DIRECT sequential read ${DISK_START:-?} GB/s at the start, ${DISK_END:-?} GB/s at the end."
    echo
    awk -F, -v disk="$DISK_GBS_USED" '
    function f(v, fmt) { return v == "" ? "–" : sprintf(fmt, v) }
    function m(v) { return v == "" ? "–" : sprintf("%.0f", v / 1048576) }
    function rng(a, b, c, fmt) { return a == "" ? "–" : sprintf(fmt " (" fmt "–" fmt ")", a, b, c) }
    NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    {
        if (!hdr++) {
            printf "| budget | config | decode tok/s median (min–max) | prompt tok/s median (min–max) | cgroup max MiB | peak RSS MiB | OOM-killed | read/token MiB | expert read/pass MiB | disk bound tok/s | %% of bound | device read MiB (median) | sluice expert stats (medians) | notes |\n"
            printf "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        }
        note = ""
        if ($c["n_ok"] < $c["n_runs"]) note = sprintf("%d of %d runs ok", $c["n_ok"], $c["n_runs"])
        if ($c["timeout_runs"] > 0) note = note (note ? "; " : "") sprintf("%d timed out", $c["timeout_runs"])
        if ($c["fail_runs"] > 0) note = note (note ? "; " : "") sprintf("%d failed", $c["fail_runs"])
        if ($c["reruns"] > 0) note = note (note ? "; " : "") sprintf("%d reruns (timing lines lost at exit)", $c["reruns"])
        bb = $c["budget_bytes"]
        if (bb != "" && $c["cg_max_max"] != "" && $c["cg_max_max"] > bb + 0) note = note (note ? "; " : "") sprintf("**over budget by %.1f MiB**", ($c["cg_max_max"] - bb) / 1048576)
        if ($c["failcnt_max"] > 0) note = note (note ? "; " : "") sprintf("limit reached (failcnt %d)", $c["failcnt_max"])
        if ($c["backend"] != "") note = note (note ? "; " : "") "io " $c["backend"] ($c["blocks_resident"] != "" ? ", " $c["blocks_resident"] " blocks resident" : "")
        if ($c["drafter"] != "") note = note (note ? "; " : "") "drafter " $c["drafter"] sprintf(", %.2f tok/pass", $c["tokens_per_pass"])
        oom = $c["oom_runs"] > 0 ? sprintf("**%d of %d**", $c["oom_runs"], $c["n_runs"]) : "no"
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $c["budget_label"], $c["config"],
            rng($c["decode_med"], $c["decode_min"], $c["decode_max"], "%.3f"),
            rng($c["prompt_med"], $c["prompt_min"], $c["prompt_max"], "%.2f"),
            m($c["cg_max_max"]), m($c["peak_rss_max"]), oom,
            $c["read_per_token"] == "" ? "–" : sprintf("%.1f", $c["read_per_token"] / 1048576),
            $c["expert_per_pass"] == "" ? "–" : sprintf("%.1f", $c["expert_per_pass"] / 1048576),
            f($c["bound_tok_s"], "%.3f"), f($c["pct_bound"], "%.0f%%"),
            $c["dev_read_bytes_med"] == "" ? "–" : sprintf("%.0f", $c["dev_read_bytes_med"] / 1048576),
            $c["expert_stats"] == "" ? "–" : $c["expert_stats"], note
    }' "$SUMMARY"
    echo
    echo "read/token = sluice's bytes_read ÷ (prompt passes + decode passes) ÷ tokens per pass (the prompt pass counts"
    echo "as one pass); disk bound = the bench_io rate ÷ read/token.  device read = sectors read from the model's"
    echo "block device during the run (/proc/diskstats: the whole device, model load and llama.cpp's warmup included)."
} >"$TABLE"
}

# ================================================================ main
if [ -n "$REPORT_DIR" ]; then
    [ -r "$REPORT_DIR/params.sh" ] && [ -r "$REPORT_DIR/runs.csv" ] || die "$REPORT_DIR has no params.sh/runs.csv"
    OUT=$(cd "$REPORT_DIR" && pwd) RUNS_CSV=$OUT/runs.csv STATS_CSV=$OUT/stats.csv
    # shellcheck disable=SC1091
    . "$OUT/params.sh"
    make_report
    cat "$OUT/table.md"
    exit 0
fi

[ -n "$MODEL" ] || usage 2
for v in RUNS NTOK CTX THREADS TIME_LIMIT RUN_TIMEOUT; do
    case "${!v}" in ''|*[!0-9]*|0) die "$v must be a positive integer (got '${!v}')" ;; esac
done
case "$LLAMA_RETRIES" in ''|*[!0-9]*) die "--llama-retries must be a number (got '$LLAMA_RETRIES')" ;; esac
SLUICE=$BUILD/sluice BENCH_IO=$BUILD/bench_io
[ -n "$CONFIGS" ] || { CONFIGS=sluice; [ -z "$LLAMA" ] || CONFIGS+=",llama.cpp,llama.cpp-nr"; }
IFS=, read -r -a CONFIG_LIST <<<"$CONFIGS"
for c in "${CONFIG_LIST[@]}"; do
    case "$c" in
        sluice|sluice-prefetch) [ -x "$SLUICE" ] || die "$SLUICE not found: build first (bash scripts/build.sh) or pass --build DIR" ;;
        llama.cpp|llama.cpp-nr) [ -n "$LLAMA" ] || die "configuration $c needs --llama-cpp PATH"
                                [ -x "$LLAMA" ] || die "--llama-cpp $LLAMA is not executable" ;;
        *) die "unknown configuration $c (sluice, sluice-prefetch, llama.cpp, llama.cpp-nr)" ;;
    esac
done
if [ -n "$LLAMA" ]; then
    case "$(basename "$LLAMA")" in
        llama-cli*) log "warning: 2026 llama-cli is interactive; use llama-completion (same directory) for timed runs" ;;
    esac
    # the environment must not change llama.cpp's defaults
    for v in $(env | sed -n 's/^\(LLAMA_ARG_[A-Za-z0-9_]*\)=.*/\1/p'); do log "note: unsetting $v"; unset "$v"; done
fi
[ -r "$MODEL" ] || die "cannot read $MODEL"
MODEL_BYTES=$(stat -L -c %s "$MODEL")
MODEL_NAME=$(basename "$MODEL" .gguf)
DEV_NAME=$(lsblk -no PKNAME "$(df -P "$MODEL" | awk 'NR == 2 { print $1 }')" 2>/dev/null | head -n1)
[ -n "$DEV_NAME" ] || DEV_NAME=$(basename "$(df -P "$MODEL" | awk 'NR == 2 { print $1 }')")
awk -v d="$DEV_NAME" '$3 == d { f = 1 } END { exit !f }' /proc/diskstats || DEV_NAME=""

IFS=, read -r -a BUDGET_LIST <<<"$BUDGETS"
BLABEL=() BBYTES=()
for b in "${BUDGET_LIST[@]}"; do
    v=$(size_bytes "$b") || die "bad budget '$b'"
    BLABEL+=("$b"); BBYTES+=("$v")
done

CHILD_PID=""
on_exit() {
    [ -z "$CHILD_PID" ] || kill "$CHILD_PID" 2>/dev/null
    cg_remove
}
trap on_exit EXIT
trap 'log "interrupted"; exit 130' INT TERM

[ -n "$OUT" ] || OUT=$REPO/results/$(date +%Y%m%d-%H%M%S)-moe-$MODEL_NAME
mkdir -p "$OUT/runs" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd) RUNS_CSV=$OUT/runs.csv STATS_CSV=$OUT/stats.csv
log "results in $OUT"
cg_detect

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "command: $ARGV_STR"
    echo "sluice: $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown), build $BUILD"
    [ -z "$LLAMA" ] || echo "llama.cpp: ${LLAMA_LABEL:+$LLAMA_LABEL, }$LLAMA ($("$LLAMA" --version 2>&1 | grep -m1 -i 'version' || echo 'version unknown'))"
    echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) cores"
    echo "memory: $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    echo "kernel: $(uname -r)"
    echo "disk: $(df -P "$MODEL" | awk 'NR == 2 { print $1 }') $(findmnt -no FSTYPE -T "$MODEL" 2>/dev/null), device ${DEV_NAME:-unknown}"
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"

DISK_START="" DISK_END=""
if [ -n "$DISK_GBS" ]; then
    DISK_START=$DISK_GBS DISK_END=$DISK_GBS
    log "device read rate given: $DISK_GBS GB/s (bench_io skipped)"
elif [ -x "$BENCH_IO" ]; then
    log "bench_io: the device's O_DIRECT sequential read rate on $MODEL"
    DISK_START=$(bench_io_rate start)
    log "bench_io: ${DISK_START:-?} GB/s"
else
    log "note: $BENCH_IO not found; no disk bound"
fi

# shellcheck disable=SC2086  # unquoted on purpose: the list spans lines
echo $RUN_COLS | tr ' ' ',' >"$RUNS_CSV"
echo "budget_label,budget_bytes,config,run,key,value" >"$STATS_CSV"
total=$(( ${#BLABEL[@]} * RUNS * ${#CONFIG_LIST[@]} )) done_n=0 skipped=0
log "$total runs: budgets $BUDGETS; ${CONFIG_LIST[*]} (interleaved); $RUNS runs each; -n $NTOK -c $CTX -t $THREADS;" \
    "prompt '$PROMPT'; time limit $TIME_LIMIT s, run timeout $RUN_TIMEOUT s"
for i in "${!BLABEL[@]}"; do
    for run in $(seq 1 "$RUNS"); do
        for cfg in "${CONFIG_LIST[@]}"; do
            done_n=$((done_n + 1))
            if [ $(( $(date +%s) - T0 )) -ge "$TIME_LIMIT" ]; then
                R=([model]=$MODEL_NAME [model_bytes]=$MODEL_BYTES [budget_label]=${BLABEL[$i]}
                   [budget_bytes]=${BBYTES[$i]} [config]=$cfg [run]=$run [status]=skipped
                   [note]="time limit $TIME_LIMIT s reached")
                emit_row
                skipped=$((skipped + 1))
                continue
            fi
            log "[$done_n/$total] budget ${BLABEL[$i]} ($(mib "${BBYTES[$i]}") MiB), $cfg, run $run"
            run_one "$i" "$cfg" "$run"
        done
    done
done
[ "$skipped" = 0 ] || log "time limit reached: $skipped runs skipped (status 'skipped' in runs.csv)"

if [ -z "$DISK_GBS" ] && [ -x "$BENCH_IO" ] && [ "$END_IO" = 1 ]; then
    DISK_END=$(bench_io_rate end)
    log "bench_io at the end: ${DISK_END:-?} GB/s"
fi
{
    echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "disk O_DIRECT sequential read GB/s: start ${DISK_START:-?}, end ${DISK_END:-?}"
    echo "page cache dropped before each run: $([ "$DROP_OK" = 1 ] && echo yes || echo no)"
    echo "memory cgroup per run: $([ "$CG_OK" = 1 ] && echo yes || echo no)"
    echo "runs skipped by the time limit: $skipped"
    echo "wall time: $(elapsed_hms)"
} >>"$OUT/machine.txt"
declare -p MODEL_NAME MODEL_BYTES LLAMA_LABEL DISK_START DISK_END DROP_OK CG_OK NTOK CTX PROMPT THREADS RUNS >"$OUT/params.sh"
make_report
cat "$OUT/table.md"
log "done: $OUT (runs.csv, stats.csv, summary.csv, table.md)"
