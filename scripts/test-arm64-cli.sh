#!/usr/bin/env bash
# scripts/test-arm64-cli.sh [BUILD_DIR] — the aarch64 command line end to end under qemu-user, with
# 2 and 4 threads (run by scripts/test-arm64.sh after the Criterion suite; docs/arm64.md).
#
# Issue 45: `sluice run -t 2` was reported to sit for minutes under qemu-aarch64 while the Criterion
# suite passed, its tests starting the command with one thread.  So for T in 2 4, every step under a
# `timeout` (a hang fails the script instead of holding CI):
#   run     the four stories260K prompts of ../shared/golden/stories260K, 64 greedy tokens each
#           (--json ids), must be llama.cpp's tokens: the goldens tests/test_forward.c checks on x86;
#   chat    two messages from a pipe must get the answers `sluice chat -t 1` gives;
#   serve   one greedy request (curl, /v1/completions) must return the token ids of `sluice run`, and
#           the server must exit 0 on SIGTERM;
#   signal  a run whose pool worker is stuck (SLUICE_POOL_STALL_MS) under `timeout 20` must exit
#           143 within a second of timeout's SIGTERM (the report: 10 min 52 s); with one SIGTERM only
#           (timeout --foreground) the watchdog must be what ends it, and say so.
# Needs the binfmt_misc entry or QEMU_LD_PREFIX/QEMU_CPU as scripts/test-arm64.sh sets them; programs
# run through qemu-aarch64-static explicitly.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-${BUILD_DIR:-build-arm64}}
SLUICE=$PWD/$BUILD_DIR/sluice
MODEL=$PWD/models/stories260K.gguf
GOLDEN=$PWD/../shared/golden/stories260K
QEMU=${QEMU:-qemu-aarch64-static}
export QEMU_LD_PREFIX=${QEMU_LD_PREFIX:-${SL_ARM64_ROOT:-$PWD/build-arm64-deps}}
export QEMU_CPU=${QEMU_CPU:-max}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-arm64-cli.XXXXXX")
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "test-arm64-cli: FAIL: $*" >&2; exit 1; }
say() { echo "test-arm64-cli: $*"; }
sl() { "$QEMU" "$SLUICE" "$@"; }
ids() { python3 -c 'import sys, json; print(" ".join(str(json.loads(l)["id"]) for l in sys.stdin if l.strip()))'; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

[ -x "$SLUICE" ] || fail "$SLUICE is not built (scripts/build-arm64.sh)"
[ -d "$GOLDEN" ] || fail "no goldens at $GOLDEN (the reference data ../shared)"
command -v curl >/dev/null || fail "curl is missing"

run_goldens() {   # T
  local t=$1 p g prompt want got
  for p in p1_once p2_dog p3_lily_tom p4_bos; do
    g=$GOLDEN/$p.txt
    prompt=$(sed -n 's/^# prompt: "\(.*\)"$/\1/p' "$g")
    want=$(grep -v '^#' "$g" | awk '{printf "%s ", $2}')
    got=$(timeout 120 "$QEMU" "$SLUICE" run -m "$MODEL" -p "$prompt" -n 64 --temp 0 --json -t "$t" 2>"$WORK/err" | ids) ||
      fail "run -t $t ($p) failed or hung: $(tail -3 "$WORK/err")"
    [ "$got " = "$want" ] || fail "run -t $t ($p): greedy tokens differ from llama.cpp's
  got:  $got
  want: $want"
  done
  say "run -t $t: the 4 stories260K prompts give llama.cpp's 64 greedy tokens"
}

chat_pipe() {   # T (-t 1's answers are in $WORK/chat1)
  local t=$1
  printf 'Hello\nTell me a story about a cat.\n' |
    timeout 120 "$QEMU" "$SLUICE" chat -m "$MODEL" -n 24 --temp 0 -t "$t" >"$WORK/chat$t" 2>"$WORK/err" ||
    fail "chat -t $t from a pipe failed or hung: $(tail -3 "$WORK/err")"
  [ "$(wc -l <"$WORK/chat$t")" -eq 2 ] || fail "chat -t $t: not two answers: $(cat "$WORK/chat$t")"
  if [ "$t" != 1 ]; then
    cmp -s "$WORK/chat1" "$WORK/chat$t" || fail "chat -t $t answers differ from -t 1: $(cat "$WORK/chat$t")"
    say "chat -t $t from a pipe: two answers, the same as -t 1"
  fi
}

serve_one() {   # T
  local t=$1 want got port i
  want=$(timeout 120 "$QEMU" "$SLUICE" run -m "$MODEL" -p "Once upon a time" -n 24 --temp 0 --json -t "$t" 2>/dev/null | ids |
         tr ' ' ',') || fail "run -t $t for serve's expectation failed"
  rm -f "$WORK/port"
  "$QEMU" "$SLUICE" serve -m "$MODEL" -t "$t" --port 0 --port-file "$WORK/port" >"$WORK/serve.log" 2>&1 &
  SERVER_PID=$!
  for i in $(seq 1 600); do
    [ -s "$WORK/port" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || fail "serve -t $t exited at start: $(cat "$WORK/serve.log")"
    sleep 0.1
  done
  [ -s "$WORK/port" ] || fail "serve -t $t did not listen within 60 s"
  port=$(cat "$WORK/port")
  curl -sS -m 120 "http://127.0.0.1:$port/v1/completions" \
    -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"return_tokens":true}' >"$WORK/resp.json" ||
    fail "serve -t $t: the request failed or hung"
  got=$(python3 -c 'import sys, json; print(",".join(str(i) for i in json.load(sys.stdin)["choices"][0]["tokens"]))' \
        <"$WORK/resp.json") || fail "serve -t $t: no tokens in $(head -c 300 "$WORK/resp.json")"
  [ "$got" = "${want%,}" ] || fail "serve -t $t returned [$got], sluice run gives [${want%,}]"
  kill -TERM "$SERVER_PID"
  local rc=0
  for i in $(seq 1 200); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$SERVER_PID" 2>/dev/null && fail "serve -t $t did not exit within 20 s of SIGTERM"
  wait "$SERVER_PID" || rc=$?
  SERVER_PID=""
  [ "$rc" = 0 ] || fail "serve -t $t exited with $rc after SIGTERM"
  say "serve -t $t: one request, the greedy tokens of sluice run; exit 0 on SIGTERM"
}

stuck_signal() {   # T TIMEOUT_ARGS...
  local t=$1 t0 took rc=0 secs; shift
  secs=${*: -1}
  t0=$(now_ms)
  SLUICE_POOL_STALL_MS=600000 timeout --preserve-status "$@" "$QEMU" "$SLUICE" run -m "$MODEL" -p One -n 4 --temp 0 \
    -t "$t" >/dev/null 2>"$WORK/err" || rc=$?
  took=$(( $(now_ms) - t0 - secs * 1000 ))
  [ "$rc" = 143 ] || fail "a stuck run -t $t under timeout $* exited $rc, not 143: $(cat "$WORK/err")"
  [ "$took" -lt 1000 ] || fail "a stuck run -t $t took $took ms after the SIGTERM of timeout $* to end"
  # timeout (without --foreground) signals the child, then its whole process group: two SIGTERMs,
  # and a second signal leaves at once (runtime/cli/run.c); one SIGTERM alone is the watchdog's
  if [ "$1" = --foreground ]; then
    grep -q "a worker thread is stuck" "$WORK/err" || fail "a stuck run -t $t did not say why: $(cat "$WORK/err")"
  fi
  say "signal: a run -t $t whose worker is stuck ends $took ms after the SIGTERM of timeout $* (exit 143)"
}

if [ -z "${SL_ARM64_CLI_NO_SERVE:-}" ] && ! sl serve --help >/dev/null 2>&1; then
  fail "sluice serve is not built for arm64 (scripts/install-deps-arm64.sh unpacks libmicrohttpd; SL_ARM64_CLI_NO_SERVE=1 skips it)"
fi
chat_pipe 1
for t in 2 4; do
  run_goldens "$t"
  chat_pipe "$t"
  [ -n "${SL_ARM64_CLI_NO_SERVE:-}" ] || serve_one "$t"
  stuck_signal "$t" 20
  stuck_signal "$t" --foreground 3
done
say "passed ($("$QEMU" --version | head -1))"
