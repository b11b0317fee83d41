# bench/lib.sh — shell helpers the benchmarks share (sourced, not run): JSON and size parsing, page-cache
# drop, a child memory cgroup (v1) per run, running a command inside it under a timeout.
# The caller defines log() and RUN_TIMEOUT, and reads CG_OK / CG_CUR / CG_MAX / CHILD_PID.

# ---------------------------------------------------------------- small helpers
# json_get FILE KEY: the value of KEY in a flat one-line JSON object (number, bool or string, quotes removed).
json_get() {
    sed -n "s/.*\"$2\":\(\"[^\"]*\"\|[^,}]*\).*/\1/p" "$1" 2>/dev/null | head -n1 | tr -d '"'
}
# size_bytes TEXT: 128M / 1.5G / 512K / 12345 -> bytes (binary units, like sluice's --ram-budget).
size_bytes() {
    awk -v s="$1" 'BEGIN {
        u = toupper(substr(s, length(s))); n = s + 0; m = 1
        if (u == "K") m = 1024; else if (u == "M") m = 1048576; else if (u == "G") m = 1073741824
        else if (u == "T") m = 1099511627776
        if (n <= 0) exit 1
        printf "%.0f\n", n * m }'
}
mib() { awk -v b="$1" 'BEGIN { if (b == "") print ""; else printf "%.1f", b / 1048576 }'; }

# dev_sectors: sectors read so far by the block device holding the model (/proc/diskstats; whole device, so
# other processes' reads count too).  Shows the weights really came from the device, not the page cache.
DEV_NAME=""
dev_sectors() {
    [ -n "$DEV_NAME" ] || return 0
    awk -v d="$DEV_NAME" '$3 == d { print $6 }' /proc/diskstats
}

DROP_OK=1
drop_caches() {
    sync
    if ! { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
        [ "$DROP_OK" = 0 ] || log "note: cannot drop the page cache (not root?); runs start with whatever is cached"
        DROP_OK=0
    fi
}


# ---------------------------------------------------------------- cgroup v1 memory controller
CG_PARENT="" CG_OK=0 CG_CUR=""
# cg_detect: set CG_PARENT to our own memory cgroup and CG_OK=1 when we may create children in it.
cg_detect() {
    local line probe
    line=$(grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup 2>/dev/null | head -n1)
    if [ -n "$line" ]; then
        CG_PARENT=/sys/fs/cgroup/memory${line#*:*:}
        CG_PARENT=${CG_PARENT%/}
        probe=$CG_PARENT/sluice-bench-probe-$$
        if mkdir "$probe" 2>/dev/null && [ -w "$probe/memory.limit_in_bytes" ]; then CG_OK=1; fi
        rmdir "$probe" 2>/dev/null
    fi
    if [ "$CG_OK" = 1 ]; then
        log "memory cgroup: children of $CG_PARENT"
    else
        log "note: no writable cgroup-v1 memory controller (${CG_PARENT:-none found}); budgets are passed to" \
            "sluice but not enforced, and only peak RSS (VmHWM) is measured"
    fi
}
# cg_create LIMIT_BYTES|"": make a fresh child cgroup (no limit when empty: it then only measures); sets
# CG_CUR.  memsw (memory + swap) gets the same limit so swap cannot stretch the budget.
cg_create() {
    CG_CUR=$CG_PARENT/sluice-bench-$$-$RANDOM
    mkdir "$CG_CUR" || { CG_CUR=""; return 1; }
    if [ -n "$1" ]; then
        echo "$1" >"$CG_CUR/memory.limit_in_bytes" || return 1
        [ ! -e "$CG_CUR/memory.memsw.limit_in_bytes" ] || echo "$1" >"$CG_CUR/memory.memsw.limit_in_bytes" 2>/dev/null ||
            log "note: could not set memory.memsw.limit_in_bytes"
    fi
    echo 0 >"$CG_CUR/memory.max_usage_in_bytes" 2>/dev/null
    [ ! -e "$CG_CUR/memory.memsw.max_usage_in_bytes" ] || echo 0 >"$CG_CUR/memory.memsw.max_usage_in_bytes" 2>/dev/null
    return 0
}
# cg_read: CG_MAX CG_MEMSW CG_FAILCNT CG_OOM from the current child.
cg_read() {
    CG_MAX=$(cat "$CG_CUR/memory.max_usage_in_bytes" 2>/dev/null)
    CG_MEMSW=$(cat "$CG_CUR/memory.memsw.max_usage_in_bytes" 2>/dev/null)
    CG_FAILCNT=$(cat "$CG_CUR/memory.failcnt" 2>/dev/null)
    CG_OOM=$(awk '$1 == "oom_kill" { print $2 }' "$CG_CUR/memory.oom_control" 2>/dev/null)
}
# cg_remove: delete the current child (its page cache moves to the parent); retries while tasks exit.
cg_remove() {
    [ -n "$CG_CUR" ] || return 0
    local i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        rmdir "$CG_CUR" 2>/dev/null && { CG_CUR=""; return 0; }
        sleep 0.5
    done
    log "warning: could not remove $CG_CUR"
    CG_CUR=""
}

# in_cgroup CMD...: run CMD inside the current child cgroup (if any), under `timeout`, in the background so
# that an interrupt can stop it; returns its exit status.  The wrapper shell joins the cgroup, then execs.
in_cgroup() {
    if [ -n "$CG_CUR" ]; then
        timeout -k 10 "$RUN_TIMEOUT" sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG_CUR" "$@" &
    else
        timeout -k 10 "$RUN_TIMEOUT" "$@" &
    fi
    CHILD_PID=$!
    wait "$CHILD_PID"
    local rc=$?
    CHILD_PID=""
    return $rc
}
