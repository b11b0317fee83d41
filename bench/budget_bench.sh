#!/usr/bin/env bash
# bench/budget_bench.sh — the expansion-factor benchmark: how fast does sluice decode a model, and how much
# memory does it really use, at each RAM budget and with each read backend?
#
#   bench/budget_bench.sh --model FILE | --shape NAME [options]      (see usage() or bench/README.md)
#
# For every budget × backend × run it drops the page cache, creates a child memory cgroup (v1) under our own
# one with memory.limit_in_bytes = the budget, runs `sluice run --ram-budget BUDGET --stats-json` inside it,
# and afterwards reads the cgroup's memory.max_usage_in_bytes (RSS + page cache: the strict figure), failcnt
# and OOM kills.  Backends are interleaved within a budget (pread, mmap, uring, pread, ...) so drift in the
# machine (other load, thermal) spreads over all of them instead of biasing one.  bench_io measures the
# device's O_DIRECT sequential read rate at the start and at the end.  Outputs go to results/<timestamp>/:
# runs.csv (one row per run), summary.csv + summary.json (one row per budget × backend: medians, spread),
# table.md, plot.png; the table and the plot are also written into docs/benchmarks.md and docs/img/.
#
# Needs bash, coreutils, awk (mawk is enough), gnuplot for the plot; root for the cgroup and drop_caches
# (without root it says so and measures peak RSS only, with whatever happens to be in the page cache).
set -uo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
T0=$(date +%s)

usage() {
    cat <<'EOF'
usage: bench/budget_bench.sh --model FILE | --shape NAME [options]
  --model FILE         GGUF model to benchmark
  --shape NAME         generate it with sluice-gen if missing (tinyllama-1.1b, llama2-7b, llama3-8b, mistral-7b,
                       llama2-13b) as MODELS_DIR/NAME.TYPE.gguf
  --type T             quantization for --shape (default Q4_K_M)
  --models-dir DIR     where --shape models live (default /var/tmp/sluice-models)
  --cleanup            delete the models this invocation generated, at the end
  --budgets LIST       comma list of sizes (K/M/G = KiB/MiB/GiB, or bytes), "min" (the planner's minimum, rounded
                       up to a MiB) and "unlimited" (no limit, no --ram-budget; the cgroup only measures)
                       (default min,128M,256M,512M,1G,2G,4G,unlimited); SIZE:be+be runs only those backends
                       at that budget (e.g. 128M:uring+pread)
  --backends LIST      comma list of pread,mmap,uring (default pread,mmap,uring)
  --runs N             runs per budget x backend (default 3)
  -n N                 tokens to generate per run (default 6: 1 from the prompt pass + 5 timed decode steps)
  -c N                 context length (default 512)
  -p, --prompt TEXT    prompt (default "Hello": 2 tokens with BOS, so prefill is one pass at every budget)
  -t N                 threads for sluice and llama.cpp (default 2)
  --time-limit S       total wall-clock limit in seconds; rows not started by then are skipped (default 10800)
  --run-timeout S      kill a single run after S seconds (default 900)
  --llama-cpp PATH     also run llama.cpp's CLI (`PATH -m MODEL -p PROMPT -n N -c CTX -t T --temp 0`) in the
                       same cgroup at every budget, for its curve
  --llama-cpp-args A   extra arguments for it (e.g. "-no-cnv")
  --disk-gbs X         skip bench_io and use X GB/s as the device's read rate
  --build DIR          build directory holding sluice, sluice-gen, bench_io (default $SLUICE_BUILD or ./build)
  --out DIR            results directory (default results/<timestamp>-<model>)
  --docs FILE|none     markdown file whose budget-bench section receives the table (default docs/benchmarks.md)
  --report DIR         only rebuild summary, table, plot and docs from the results in DIR
  -h, --help
EOF
    exit "${1:-0}"
}

log() { printf '[budget_bench %s +%s] %s\n' "$(date +%H:%M:%S)" "$(elapsed_hms)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
elapsed_hms() { local s=$(( $(date +%s) - T0 )); printf '%d:%02d:%02d' $((s / 3600)) $((s / 60 % 60)) $((s % 60)); }

# ---------------------------------------------------------------- options
MODEL="" SHAPE="" QTYPE=Q4_K_M MODELS_DIR=/var/tmp/sluice-models CLEANUP=0 REPORT_DIR=""
BUDGETS="min,128M,256M,512M,1G,2G,4G,unlimited" BACKENDS="pread,mmap,uring" RUNS=3 NTOK=6 CTX=512
PROMPT="Hello" THREADS=2 TIME_LIMIT=10800 RUN_TIMEOUT=900 LLAMA="" LLAMA_ARGS="" DISK_GBS=""
BUILD=${SLUICE_BUILD:-$REPO/build} OUT="" DOCS=$REPO/docs/benchmarks.md
ARGV_STR="bench/budget_bench.sh $*"
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || case "$1" in --cleanup|-h|--help) ;; *) echo "budget_bench: $1 needs a value" >&2; usage 2 ;; esac
    case "$1" in
        --model) MODEL=$2; shift ;;
        --shape) SHAPE=$2; shift ;;
        --type) QTYPE=$2; shift ;;
        --models-dir) MODELS_DIR=$2; shift ;;
        --cleanup) CLEANUP=1 ;;
        --budgets) BUDGETS=$2; shift ;;
        --backends) BACKENDS=$2; shift ;;
        --runs) RUNS=$2; shift ;;
        -n) NTOK=$2; shift ;;
        -c) CTX=$2; shift ;;
        -p|--prompt) PROMPT=$2; shift ;;
        -t) THREADS=$2; shift ;;
        --time-limit) TIME_LIMIT=$2; shift ;;
        --run-timeout) RUN_TIMEOUT=$2; shift ;;
        --llama-cpp) LLAMA=$2; shift ;;
        --llama-cpp-args) LLAMA_ARGS=$2; shift ;;
        --disk-gbs) DISK_GBS=$2; shift ;;
        --build) BUILD=$2; shift ;;
        --out) OUT=$2; shift ;;
        --docs) DOCS=$2; shift ;;
        --report) REPORT_DIR=$2; shift ;;
        -h|--help) usage 0 ;;
        *) echo "budget_bench: unknown option $1" >&2; usage 2 ;;
    esac
    shift
done

# shared helpers: json_get size_bytes mib dev_sectors drop_caches cg_* in_cgroup
. "$REPO/bench/lib.sh"

# bench_io_rate TAG: run bench_io on the model (after dropping the cache) and print the better of its two raw
# O_DIRECT sequential figures (one 64 MiB read at a time; 1 MiB reads 16 in flight), in GB/s.  bench_io
# then also streams the file once through mmap; that figure is in the saved output but not used.
bench_io_rate() {
    local f=$OUT/bench_io-$1.txt
    drop_caches
    "$BENCH_IO" "$MODEL" --raw-only >"$f" 2>&1 || { log "bench_io failed (see $f)"; return 1; }
    awk -F': ' '/^raw O_DIRECT sequential/ { v = $NF + 0; if (v > best) best = v } END { if (best > 0) print best }' "$f"
}

# ---------------------------------------------------------------- one run
# runs.csv: one row per run.  Columns after `note`'s predecessors come from the stats JSON (named alike; `io`
# is its "backend", `run_budget` its "budget"); passes = prompt passes + decode steps, read_per_pass =
# bytes_read / passes (the measured counterpart of pass_bytes).
RUN_COLS="model model_bytes budget_label budget_bytes backend run status exit_code wall_s peak_rss cg_max cg_memsw_max
cg_failcnt oom_kills n_prompt prompt_tok_s n_decode decode_s decode_tok_s lat_median_ms lat_p90_ms pass_bytes bytes_read
passes read_per_pass read_gbs wait_s compute_s pred_tok_s planned_bytes blocks_resident lm_head_resident kv n_batch
chunk_bytes prefetch io page_cache_at_exit run_budget load1 cpu_psi dev_read_bytes disk_bw note"
JSON_KEYS="peak_rss n_prompt prompt_tok_s n_decode decode_s decode_tok_s lat_median_ms lat_p90_ms pass_bytes bytes_read
read_gbs wait_s compute_s pred_tok_s planned_bytes blocks_resident lm_head_resident kv n_batch chunk_bytes prefetch
page_cache_at_exit disk_bw"
declare -A R

# emit_row: append R[...] as one runs.csv row, in RUN_COLS order.
emit_row() {
    local c row="" sep=""
    for c in $RUN_COLS; do row+="$sep${R[$c]:-}"; sep=,; done
    echo "$row" >>"$RUNS_CSV"
}


# run_one IDX BACKEND RUN: one measured run (fresh cache, fresh cgroup); appends to runs.csv, logs progress.
run_one() {
    local idx=$1 be=$2 run=$3 k rc t1 t2
    local label=${BLABEL[$idx]} bytes=${BBYTES[$idx]}
    local tag; tag=$(printf '%s-%s-%s' "$label" "$be" "$run" | tr -c 'A-Za-z0-9.-' '_')
    local js=$OUT/runs/$tag.json errf=$OUT/runs/$tag.log
    R=([model]=$MODEL_NAME [model_bytes]=$MODEL_BYTES [budget_label]=$label [budget_bytes]=$bytes [backend]=$be
       [run]=$run)
    rm -f "$js"
    CG_MAX="" CG_MEMSW="" CG_FAILCNT="" CG_OOM=""
    drop_caches
    if [ "$CG_OK" = 1 ]; then cg_create "$bytes" || { log "warning: cgroup setup failed"; cg_remove; }; fi
    local d0; d0=$(dev_sectors)
    t1=$(date +%s.%N)
    if [ "$be" = llama.cpp ]; then
        local timef=()
        [ ! -x /usr/bin/time ] || timef=(/usr/bin/time -f 'budget-bench-maxrss-kib %M')
        # shellcheck disable=SC2086  # LLAMA_ARGS is a list of words by design
        in_cgroup "${timef[@]}" "$LLAMA" -m "$MODEL" -p "$PROMPT" -n "$NTOK" -c "$CTX" -t "$THREADS" --temp 0 \
            $LLAMA_ARGS </dev/null >"$errf.out" 2>"$errf"
        rc=$?
    else
        local bargs=()
        [ -z "$bytes" ] || bargs=(--ram-budget "$bytes")
        # the planner's disk rate: measured by sluice just before the run, the way the plan reads
        # (backend, piece size, pieces in flight), so the prediction sees the disk as it is now
        if [ -n "$DISK_GBS" ]; then bargs+=(--disk-bw "$DISK_GBS"); else bargs+=(--disk-bw now); fi
        in_cgroup "$SLUICE" run -m "$MODEL" -p "$PROMPT" -n "$NTOK" -c "$CTX" -t "$THREADS" --temp 0 --io "$be" \
            "${bargs[@]}" --quiet --stats-json "$js" </dev/null >"$errf.out" 2>"$errf"
        rc=$?
    fi
    t2=$(date +%s.%N)
    local d1; d1=$(dev_sectors)
    [ -z "$d0" ] || [ -z "$d1" ] || R[dev_read_bytes]=$(( (d1 - d0) * 512 ))
    R[load1]=$(cut -d' ' -f1 /proc/loadavg)
    # share of the last 60 s in which some runnable task waited for a CPU (PSI; empty without it)
    R[cpu_psi]=$(sed -n 's/^some avg10=[0-9.]* avg60=\([0-9.]*\).*/\1/p' /proc/pressure/cpu 2>/dev/null)
    if [ -n "$CG_CUR" ]; then cg_read; cg_remove; fi
    R[exit_code]=$rc R[cg_max]=$CG_MAX R[cg_memsw_max]=$CG_MEMSW R[cg_failcnt]=$CG_FAILCNT R[oom_kills]=$CG_OOM
    R[wall_s]=$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.1f", b - a }')

    if [ "${CG_OOM:-0}" -gt 0 ] || [ "$rc" = 137 ]; then R[status]=oom; R[note]="killed (exit $rc; cgroup oom_kill ${CG_OOM:-?})"
    elif [ "$rc" = 124 ]; then R[status]=timeout; R[note]="killed after --run-timeout $RUN_TIMEOUT s"
    elif [ "$rc" != 0 ]; then R[status]=fail; R[note]=$(tail -n1 "$errf" | tr ',"' ";'" | cut -c1-160)
    else R[status]=ok; fi

    if [ "$be" = llama.cpp ]; then
        # llama.cpp prints "... eval time = X ms / N runs ( Y ms per token, Z tokens per second)"
        R[decode_tok_s]=$(grep 'eval time' "$errf" | grep -v 'prompt eval' |
                          sed -n 's/.*, *\([0-9.]*\) tokens per second.*/\1/p' | tail -n1)
        R[prompt_tok_s]=$(grep 'prompt eval time' "$errf" | sed -n 's/.*, *\([0-9.]*\) tokens per second.*/\1/p' |
                          tail -n1)
        R[peak_rss]=$(awk '$1 == "budget-bench-maxrss-kib" { printf "%.0f\n", $2 * 1024 }' "$errf" | tail -n1)
        if [ "${R[status]}" = ok ] && [ -z "${R[decode_tok_s]}" ]; then
            R[status]=fail R[note]="no 'eval time' line in llama.cpp's output"
        fi
    elif [ -s "$js" ]; then
        for k in $JSON_KEYS; do R[$k]=$(json_get "$js" "$k"); done
        R[io]=$(json_get "$js" backend) R[run_budget]=$(json_get "$js" budget)
        [ "$(json_get "$js" status)" = 0 ] || [ "${R[status]}" != ok ] || R[status]=fail
        local np=${R[n_prompt]:-0} nb=${R[n_batch]:-0} nd=${R[n_decode]:-0}
        [ "$nb" -gt 0 ] 2>/dev/null || nb=${np:-1}; [ "$nb" -gt 0 ] || nb=1
        R[passes]=$(( (np + nb - 1) / nb + nd ))
        if [ -n "${R[bytes_read]}" ] && [ "${R[passes]}" -gt 0 ]; then
            R[read_per_pass]=$(( ${R[bytes_read]} / ${R[passes]} ))
        fi
    elif [ "${R[status]}" = ok ]; then
        R[status]=fail R[note]="no stats JSON"
    fi
    emit_row
    log "  -> ${R[status]}: decode ${R[decode_tok_s]:-?} tok/s, peak RSS $(mib "${R[peak_rss]}") MiB," \
        "cgroup max $(mib "$CG_MAX") MiB, failcnt ${CG_FAILCNT:-?}, ${R[wall_s]} s${R[note]:+ (${R[note]})}"
}


# ---------------------------------------------------------------- the report
# make_report: from $OUT/runs.csv (and the run's parameters) write summary.csv, summary.json, table.md,
# plot.png, and the table + plot into $DOCS.  Used after the measurements and by --report DIR.
make_report() {
DISK_GBS_USED=$(awk -v a="$DISK_START" -v b="$DISK_END" 'BEGIN {
    if (a != "" && b != "") printf "%.3f", (a + b) / 2; else if (a != "") print a; else if (b != "") print b }')
# ---------------------------------------------------------------- summary.csv / summary.json
# One row per budget x backend, in the order run.  Decode and prefill: median over the ok runs, with min and
# max.  Memory: the worst (max) over the runs, because a budget is kept only if every run keeps it.
# Disk bound = device GB/s / bytes streamed per token (pass_bytes); expansion = model bytes / peak memory.
X_UNL=$(awk -v m="$MODEL_BYTES" -v list="${BBYTES[*]}" 'BEGIN {
    n = split(list, a, " "); mx = 0; for (i = 1; i <= n; i++) if (a[i] + 0 > mx) mx = a[i] + 0
    x = 1; while (x < m / 1048576 * 1.2 || x < 2 * mx / 1048576) x *= 2; print x }')
SUMMARY=$OUT/summary.csv
awk -F, -v disk="$DISK_GBS_USED" -v xunl="$X_UNL" '
function med(s,   n, v, i, j, t) { n = split(s, v, " "); if (n == 0) return ""
    for (i = 2; i <= n; i++) { t = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
function mn(s,   n, v, i, r) { n = split(s, v, " "); r = ""; for (i = 1; i <= n; i++) if (r == "" || v[i] + 0 < r) r = v[i] + 0; return r }
function mx(s,   n, v, i, r) { n = split(s, v, " "); r = ""; for (i = 1; i <= n; i++) if (r == "" || v[i] + 0 > r) r = v[i] + 0; return r }
function r0(v) { return v == "" ? "" : sprintf("%.0f", v) }
function add(k, c, v) { if (v != "") L[k, c] = L[k, c] " " v }
NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
{
    k = $col["budget_label"] SUBSEP $col["backend"]
    if (!(k in seen)) { seen[k] = 1; order[++nk] = k; B[k] = $col["budget_label"]; BB[k] = $col["budget_bytes"]
                        BE[k] = $col["backend"]; MB = $col["model_bytes"]; MN = $col["model"] }
    st = $col["status"]; nruns[k]++; cnt[k, st]++
    add(k, "cg", $col["cg_max"]); add(k, "fail", $col["cg_failcnt"])
    if (st != "ok") next
    nok[k]++
    split("decode_tok_s prompt_tok_s peak_rss pass_bytes read_per_pass read_gbs pred_tok_s lat_median_ms wait_s compute_s passes planned_bytes load1 cpu_psi dev_read_bytes disk_bw", cs, " ")
    for (i in cs) if (cs[i] in col) add(k, cs[i], $col[cs[i]])   # older runs.csv may lack a column
    # each run against its own prediction (made from the disk probe just before it)
    if ($col["pred_tok_s"] + 0 > 0 && $col["decode_tok_s"] != "") add(k, "ratio", $col["decode_tok_s"] / $col["pred_tok_s"])
    BR[k] = $col["blocks_resident"]; LH[k] = $col["lm_head_resident"]; KV[k] = $col["kv"]; IO[k] = $col["io"]
    RB[k] = $col["run_budget"]; CH[k] = $col["chunk_bytes"]; NB[k] = $col["n_batch"]
}
END {
    print "model,model_bytes,budget_label,budget_bytes,x_mib,backend,n_ok,n_runs,decode_med,decode_min,decode_max,prefill_med,peak_rss_max,cg_max_max,failcnt_max,oom_runs,pass_bytes,read_per_pass,read_gbs,disk_gbs,bound_tok_s,pct_bound,pred_tok_s,pred_err_pct,exp_rss,exp_cg,blocks_resident,lm_head_resident,kv,io,status,lat_median_ms,wait_per_pass_s,compute_per_pass_s,run_budget,planned_bytes,chunk_bytes,n_batch,budget_mib,load1_med,dev_read_bytes_med,cpu_psi_med,pred_disk_gbs,pred_ratio_med,pred_ratio_min,pred_ratio_max"
    for (o = 1; o <= nk; o++) {
        k = order[o]
        x = BB[k] != "" ? BB[k] / 1048576 : xunl
        d = med(L[k, "decode_tok_s"]); pb = med(L[k, "pass_bytes"]); pr = med(L[k, "pred_tok_s"])
        rss = mx(L[k, "peak_rss"]); cg = mx(L[k, "cg"])
        bound = (disk != "" && pb > 0) ? disk * 1e9 / pb : ""
        pct = (bound != "" && d != "") ? 100 * d / bound : ""
        err = (pr > 0 && d != "") ? 100 * (d - pr) / pr : ""
        ps = med(L[k, "passes"])
        wpp = (ps > 0 && L[k, "wait_s"] != "") ? med(L[k, "wait_s"]) / ps : ""
        cpp = (ps > 0 && L[k, "compute_s"] != "") ? med(L[k, "compute_s"]) / ps : ""
        status = nruns[k] == cnt[k, "ok"] ? "ok" : cnt[k, "oom"] ? "oom" : nruns[k] == cnt[k, "skipped"] ? "skipped" : cnt[k, "ok"] ? "partial" : "fail"
        pdisk = L[k, "disk_bw"] != "" ? sprintf("%.3f", med(L[k, "disk_bw"]) / 1e9) : ""
        printf "%s,%s,%s,%s,%g,%s,%d,%d,%s,%s,%s,%s,%s,%s,%s,%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n",
            MN, MB, B[k], BB[k], x, BE[k], nok[k], nruns[k], d, mn(L[k, "decode_tok_s"]), mx(L[k, "decode_tok_s"]),
            med(L[k, "prompt_tok_s"]), r0(rss), r0(cg), mx(L[k, "fail"]), cnt[k, "oom"], r0(pb), r0(med(L[k, "read_per_pass"])),
            med(L[k, "read_gbs"]), disk, bound, pct, pr, err, (rss > 0 ? MB / rss : ""), (cg > 0 ? MB / cg : ""),
            BR[k], LH[k], KV[k], IO[k], status, med(L[k, "lat_median_ms"]), wpp, cpp, RB[k], r0(med(L[k, "planned_bytes"])),
            CH[k], NB[k], (BB[k] != "" ? BB[k] / 1048576 : ""), med(L[k, "load1"]), r0(med(L[k, "dev_read_bytes"])), med(L[k, "cpu_psi"]), pdisk,
            med(L[k, "ratio"]), mn(L[k, "ratio"]), mx(L[k, "ratio"])
    }
}' "$RUNS_CSV" >"$SUMMARY"

# summary.json: the same rows as objects (numbers unquoted, empty fields null).
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[i] = $i; n = NF; printf "["; next }
{ printf "%s\n {", (NR > 2 ? "," : "")
  for (i = 1; i <= n; i++) {
      v = $i
      if (v == "") v = "null"
      else if (v !~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ && v != "true" && v != "false") v = "\"" v "\""
      printf "%s\"%s\":%s", (i > 1 ? "," : ""), h[i], v } printf "}" }
END { print "\n]" }' "$SUMMARY" >"$OUT/summary.json"

# ---------------------------------------------------------------- table.md
TABLE=$OUT/table.md
IMG_NAME=budget-$MODEL_NAME.png
awk -F, -v disk="$DISK_GBS_USED" -v img="$IMG_NAME" '
function f(v, fmt) { return v == "" ? "–" : sprintf(fmt, v) }
function m(v) { return v == "" ? "–" : sprintf("%.0f", v / 1048576) }
NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
{
    if (!hdr++) {
        printf "| budget | backend | decode tok/s median (min–max) | prefill tok/s | peak RSS MiB | cgroup max MiB | read/token MiB plan (measured) | read GB/s | disk bound tok/s | %% of bound | predicted tok/s at the disk rate probed before the run (medians); measured ÷ predicted per run: median (min–max) | expansion RSS× / cgroup× | load (CPU wait %%) | notes |\n"
        printf "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    }
    bl = $c["budget_label"]; bb = $c["budget_bytes"]
    budget = bl == "unlimited" ? "unlimited" : bl == "min" ? sprintf("min (%sM)", m(bb)) : bl
    d = $c["decode_med"] == "" ? "–" : sprintf("%.3f (%.3f–%.3f)", $c["decode_med"], $c["decode_min"], $c["decode_max"])
    rd = $c["pass_bytes"] == "" ? ($c["io"] == "resident" ? "0 (resident)" : "–") : sprintf("%s (%s)", m($c["pass_bytes"]), m($c["read_per_pass"]))
    pred = $c["pred_tok_s"] == "" ? "–" : sprintf("%.3f", $c["pred_tok_s"])
    if ($c["pred_tok_s"] != "" && $c["io"] != "resident" && $c["pred_disk_gbs"] != "") pred = pred sprintf(" at %.2f GB/s", $c["pred_disk_gbs"])
    if ($c["pred_ratio_med"] != "") pred = pred sprintf("; **%.2f×** (%.2f–%.2f)", $c["pred_ratio_med"], $c["pred_ratio_min"], $c["pred_ratio_max"])
    else if ($c["pred_err_pct"] != "") pred = pred sprintf(" (%+.0f%%)", $c["pred_err_pct"])
    ex = ($c["exp_rss"] == "" ? "–" : sprintf("%.1f", $c["exp_rss"])) " / " ($c["exp_cg"] == "" ? "–" : sprintf("%.1f", $c["exp_cg"]))
    note = ""
    if ($c["status"] == "skipped") note = "skipped (time limit)"
    else if ($c["n_ok"] < $c["n_runs"]) note = sprintf("%d of %d runs ok", $c["n_ok"], $c["n_runs"])
    if ($c["oom_runs"] > 0) note = note (note ? "; " : "") sprintf("**OOM-killed %d×**", $c["oom_runs"])
    if (bb != "" && $c["cg_max_max"] != "" && $c["cg_max_max"] > bb) note = note (note ? "; " : "") sprintf("**over budget by %.1f MiB**", ($c["cg_max_max"] - bb) / 1048576)
    if ($c["failcnt_max"] > 0) note = note (note ? "; " : "") sprintf("limit reached (failcnt %d)", $c["failcnt_max"])
    if ($c["kv"] == "spill") note = note (note ? "; " : "") "KV spilled"
    if ($c["io"] == "resident") note = note (note ? "; " : "") "all resident"
    else if ($c["blocks_resident"] != "") note = note (note ? "; " : "") sprintf("%s blocks%s resident", $c["blocks_resident"], $c["lm_head_resident"] == "true" ? " + head" : "")
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", budget, $c["backend"], d,
        f($c["prefill_med"], "%.2f"), m($c["peak_rss_max"]), m($c["cg_max_max"]), rd, f($c["read_gbs"], "%.2f"),
        f($c["bound_tok_s"], "%.3f"), f($c["pct_bound"], "%.0f%%"), pred, ex, f($c["load1_med"], "%.1f") ($c["cpu_psi_med"] == "" ? "" : sprintf(" (%.0f%%)", $c["cpu_psi_med"])), note
}' "$SUMMARY" >"$TABLE"

# ---------------------------------------------------------------- plot.png
PLOT=$OUT/plot.png
if command -v gnuplot >/dev/null; then
    bl_used="" xt="" sep=""
    for be in "${ALL_BACKENDS[@]}"; do
        awk -F, -v b="$be" 'NR == 1 || $6 == b' "$SUMMARY" >"$OUT/plot-$be.csv"
        bl_used+="$sep$be" sep=" "
    done
    sep=""
    for i in "${!BLABEL[@]}"; do
        if [ -z "${BBYTES[$i]}" ]; then xt+="$sep\"unlimited\" $X_UNL"
        elif [ "${BLABEL[$i]}" = min ]; then xt+="$sep\"min\\n$(mib "${BBYTES[$i]}" | cut -d. -f1)M\" $(mib "${BBYTES[$i]}")"
        else xt+="$sep\"${BLABEL[$i]}\" $(mib "${BBYTES[$i]}")"; fi
        sep=", "
    done
    xr=$(awk -F, 'NR > 1 { if (min == "" || $5 < min) min = $5; if ($5 > max) max = $5 }
                 END { printf "xmin=%g; xmax=%g", min, max }' "$SUMMARY")
    ttl="$MODEL_NAME ($(awk -v b="$MODEL_BYTES" 'BEGIN { printf "%.2f GB", b / 1e9 }')), -n $NTOK -c $CTX, $RUNS runs, page cache dropped"
    gnuplot -e "dir='$OUT'; out='$PLOT'; backends='$bl_used'; ttl='$ttl'; xt='($xt)'; model_mib=$(mib "$MODEL_BYTES"); disk='${DISK_GBS_USED:-?}'; $xr" \
        "$REPO/bench/plot.gp" 2>"$OUT/gnuplot.log" || log "gnuplot failed (see $OUT/gnuplot.log)"
else
    log "note: gnuplot not installed; no plot"
fi

# ---------------------------------------------------------------- docs/benchmarks.md
# The file holds the budget-bench section between <!-- budget-bench:begin --> and <!-- budget-bench:end -->
# (hand-written prose lives there too); each model's generated block sits between
# <!-- budget-bench:MODEL:begin --> and <!-- budget-bench:MODEL:end --> and is replaced on every run.  A new
# model's block goes just before the section's end marker; a file without the section gets one appended.
if [ "$DOCS" != none ]; then
    BLOCK=$OUT/docs-block.md
    {
        echo "<!-- budget-bench:$MODEL_NAME:begin -->"
        echo "### $MODEL_NAME ($(awk -v b="$MODEL_BYTES" 'BEGIN { printf "%.2f GB, %.0f MiB", b / 1e9, b / 1048576 }'))"
        echo
        echo "Generated by \`$ARGV_STR\` on $(sed -n 's/^date: //p' "$OUT/machine.txt") (sluice $(sed -n 's/^sluice: \([^,]*\),.*/\1/p' "$OUT/machine.txt"))."
        echo "Machine: $(sed -n 's/^cpu: //p' "$OUT/machine.txt"), $(sed -n 's/^memory: //p' "$OUT/machine.txt"), kernel $(uname -r);"
        echo "device O_DIRECT sequential read (bench_io) ${DISK_START:-?} GB/s at the start, ${DISK_END:-?} GB/s at the end;"
        echo "load average $(sed -n 's/^load at start: //p' "$OUT/machine.txt") at the start, $(sed -n 's/^load at end: //p' "$OUT/machine.txt") at the end."
        echo "Each run: \`-p \"$PROMPT\" -n $NTOK -c $CTX -t $THREADS --temp 0\`, page cache $([ "$DROP_OK" = 1 ] && echo "dropped before it" || echo "**not** dropped (no permission)"),"
        echo "$([ "$CG_OK" = 1 ] && echo "in a fresh memory cgroup limited to the budget" || echo "**without** a memory cgroup (peak RSS only)"); $RUNS runs per row, backends interleaved."
        [ "$skipped" = 0 ] || echo "**$skipped runs were skipped: the time limit ($TIME_LIMIT s) was reached.**"
        echo
        cat "$TABLE"
        echo
        echo "![$MODEL_NAME: decode speed and peak memory against the budget](img/$IMG_NAME)"
        echo "<!-- budget-bench:$MODEL_NAME:end -->"
    } >"$BLOCK"
    mkdir -p "$(dirname "$DOCS")/img"
    [ ! -s "$PLOT" ] || cp "$PLOT" "$(dirname "$DOCS")/img/$IMG_NAME"
    [ -e "$DOCS" ] || printf '# Benchmarks\n' >"$DOCS"
    tmp=$DOCS.tmp.$$
    awk -v name="$MODEL_NAME" -v blockf="$BLOCK" '
    function block(   l) { while ((getline l < blockf) > 0) print l; close(blockf); done = 1 }
    $0 == "<!-- budget-bench:" name ":begin -->" { block(); skip = 1; next }
    skip { if ($0 == "<!-- budget-bench:" name ":end -->") skip = 0; next }
    $0 == "<!-- budget-bench:end -->" && !done { block(); print ""; print; insec = 1; next }
    { print }
    END { if (!done) { print ""; print "<!-- budget-bench:begin -->"; print "## Expansion-factor benchmark"; print ""
                       block(); print "<!-- budget-bench:end -->" } }' "$DOCS" >"$tmp" && mv "$tmp" "$DOCS"
    log "table and plot written into $DOCS"
fi

}

# ================================================================ main
if [ -n "$REPORT_DIR" ]; then
    # --report DIR: rebuild the summary, table, plot and docs section from an earlier run's results
    [ -r "$REPORT_DIR/params.sh" ] && [ -r "$REPORT_DIR/runs.csv" ] || die "$REPORT_DIR has no params.sh/runs.csv"
    OUT=$(cd "$REPORT_DIR" && pwd) RUNS_CSV=$OUT/runs.csv
    # shellcheck disable=SC1091
    . "$OUT/params.sh"
    make_report
    log "report rebuilt: $OUT"
    exit 0
fi

[ -n "$MODEL" ] || [ -n "$SHAPE" ] || usage 2
for v in RUNS NTOK CTX THREADS TIME_LIMIT RUN_TIMEOUT; do
    case "${!v}" in ''|*[!0-9]*|0) die "$v must be a positive integer (got '${!v}')" ;; esac
done
SLUICE=$BUILD/sluice GEN=$BUILD/sluice-gen BENCH_IO=$BUILD/bench_io
[ -x "$SLUICE" ] || die "$SLUICE not found: build first (bash scripts/build.sh) or pass --build DIR"
[ -z "$LLAMA" ] || [ -x "$LLAMA" ] || die "--llama-cpp $LLAMA is not executable"
IFS=, read -r -a BUDGET_LIST <<<"$BUDGETS"
IFS=, read -r -a BACKEND_LIST <<<"$BACKENDS"
for b in "${BACKEND_LIST[@]}"; do
    case "$b" in pread|mmap|uring) ;; *) die "unknown backend $b" ;; esac
done

CHILD_PID="" GENERATED=()
on_exit() {
    [ -z "$CHILD_PID" ] || kill "$CHILD_PID" 2>/dev/null
    cg_remove
    if [ "$CLEANUP" = 1 ] && [ ${#GENERATED[@]} -gt 0 ]; then
        log "cleanup: removing ${GENERATED[*]}"
        rm -f -- "${GENERATED[@]}"
    fi
}
trap on_exit EXIT
trap 'log "interrupted"; exit 130' INT TERM

# -- the model: given, or generated (and then removed by --cleanup; a model already there is never removed)
if [ -z "$MODEL" ]; then
    MODEL=$MODELS_DIR/$SHAPE.$QTYPE.gguf
    if [ ! -s "$MODEL" ]; then
        [ -x "$GEN" ] || die "$GEN not found (needed to generate $MODEL)"
        mkdir -p "$MODELS_DIR" || die "cannot create $MODELS_DIR"
        log "generating $MODEL (sluice-gen --shape $SHAPE --type $QTYPE)"
        GENERATED+=("$MODEL")
        "$GEN" --shape "$SHAPE" --type "$QTYPE" --out "$MODEL" --quiet || die "sluice-gen failed"
    fi
fi
[ -r "$MODEL" ] || die "cannot read $MODEL"
MODEL_BYTES=$(stat -L -c %s "$MODEL")
MODEL_NAME=$(basename "$MODEL" .gguf)
DEV_NAME=$(lsblk -no PKNAME "$(df -P "$MODEL" | awk 'NR == 2 { print $1 }')" 2>/dev/null | head -n1)
[ -n "$DEV_NAME" ] || DEV_NAME=$(basename "$(df -P "$MODEL" | awk 'NR == 2 { print $1 }')")
awk -v d="$DEV_NAME" '$3 == d { f = 1 } END { exit !f }' /proc/diskstats || DEV_NAME=""

[ -n "$OUT" ] || OUT=$REPO/results/$(date +%Y%m%d-%H%M%S)-$MODEL_NAME
mkdir -p "$OUT/runs" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd) RUNS_CSV=$OUT/runs.csv
log "results in $OUT"
cg_detect

# -- budgets.  "min" asks the planner with an impossible budget: its refusal names the smallest budget of
# any plan (everything streamed, KV spilled); a feasible query would report only its own mode's minimum.
MIN_BYTES=$("$SLUICE" plan -m "$MODEL" --ram-budget 1M -c "$CTX" -t "$THREADS" --json 2>/dev/null |
            sed -n 's/.*"min_budget":\([0-9]*\).*/\1/p')
[ -n "$MIN_BYTES" ] || die "sluice plan did not report min_budget for $MODEL"
MIN_BYTES=$(( (MIN_BYTES + 1048575) / 1048576 * 1048576 ))
log "model $MODEL_NAME: $(mib "$MODEL_BYTES") MiB; planner minimum at -c $CTX: $(mib "$MIN_BYTES") MiB"
BLABEL=() BBYTES=() BBACK=()
for b in "${BUDGET_LIST[@]}"; do
    # "SIZE:be+be" runs only those backends at that budget (e.g. 128M:uring+pread)
    if [ "${b#*:}" != "$b" ]; then
        bb=${b#*:} b=${b%%:*}
        for be in ${bb//+/ }; do
            case " ${BACKEND_LIST[*]} " in *" $be "*) ;; *) die "budget $b: backend $be is not in --backends" ;; esac
        done
        BBACK+=("${bb//+/ }")
    else
        BBACK+=("${BACKEND_LIST[*]}")
    fi
    case "$b" in
        min) BLABEL+=("min"); BBYTES+=("$MIN_BYTES") ;;
        unlimited) BLABEL+=("unlimited"); BBYTES+=("") ;;
        *) v=$(size_bytes "$b") || die "bad budget '$b'"; BLABEL+=("$b"); BBYTES+=("$v") ;;
    esac
done

# -- machine
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "command: $ARGV_STR"
    echo "sluice: $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown), build $BUILD"
    echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) cores"
    echo "memory: $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    echo "kernel: $(uname -r)"
    echo "disk: $(df -P "$MODEL" | awk 'NR == 2 { print $1 }') $(findmnt -no FSTYPE -T "$MODEL" 2>/dev/null)"
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"

# -- the device's read rate, before the runs (and again after them)
DISK_START="" DISK_END=""
if [ -n "$DISK_GBS" ]; then
    DISK_START=$DISK_GBS DISK_END=$DISK_GBS
    log "device read rate given: $DISK_GBS GB/s (bench_io skipped)"
elif [ -x "$BENCH_IO" ]; then
    log "bench_io: measuring the device's O_DIRECT sequential read rate on $MODEL"
    DISK_START=$(bench_io_rate start)
    log "bench_io: ${DISK_START:-?} GB/s"
else
    log "note: $BENCH_IO not found; no disk bound"
fi

# -- the matrix: budgets in order; within a budget run 1 of every backend, then run 2 of every backend, ...
echo $RUN_COLS | tr ' ' ',' >"$RUNS_CSV"
ALL_BACKENDS=("${BACKEND_LIST[@]}")
[ -z "$LLAMA" ] || ALL_BACKENDS+=(llama.cpp)
total=0 done_n=0 skipped=0
for i in "${!BLABEL[@]}"; do
    [ -z "$LLAMA" ] || BBACK[$i]+=" llama.cpp"
    set -- ${BBACK[$i]}
    total=$(( total + RUNS * $# ))
done
log "$total runs: budgets $BUDGETS; backends ${ALL_BACKENDS[*]} (interleaved); $RUNS runs each; -n $NTOK -c $CTX -t $THREADS;" \
    "prompt '$PROMPT'; time limit $TIME_LIMIT s"
for i in "${!BLABEL[@]}"; do
    for run in $(seq 1 "$RUNS"); do
        for be in ${BBACK[$i]}; do
            done_n=$((done_n + 1))
            if [ $(( $(date +%s) - T0 )) -ge "$TIME_LIMIT" ]; then
                R=([model]=$MODEL_NAME [model_bytes]=$MODEL_BYTES [budget_label]=${BLABEL[$i]}
                   [budget_bytes]=${BBYTES[$i]} [backend]=$be [run]=$run [status]=skipped
                   [note]="time limit $TIME_LIMIT s reached")
                emit_row
                skipped=$((skipped + 1))
                continue
            fi
            log "[$done_n/$total] budget ${BLABEL[$i]}${BBYTES[$i]:+ ($(mib "${BBYTES[$i]}") MiB)}, $be, run $run"
            run_one "$i" "$be" "$run"
        done
    done
done
[ "$skipped" = 0 ] || log "time limit reached: $skipped runs skipped (status 'skipped' in runs.csv)"

if [ -z "$DISK_GBS" ] && [ -x "$BENCH_IO" ]; then
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
# everything make_report needs, so that --report DIR can rebuild the outputs later
declare -p MODEL_NAME MODEL_BYTES BLABEL BBYTES ALL_BACKENDS DISK_START DISK_END DROP_OK CG_OK NTOK CTX PROMPT \
    THREADS RUNS TIME_LIMIT ARGV_STR skipped >"$OUT/params.sh"
make_report
log "done: $OUT (runs.csv, summary.csv, summary.json, table.md, plot.png)"
