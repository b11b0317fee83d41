#!/usr/bin/env bash
# tests/serve/serve_test.sh SLUICE_BINARY [part] (all, core = greedy + hostile, or one part: greedy, hostile, limits, cancel, pcache) — `sluice serve` end to end (run by ctest, in the
# normal and the ASan/UBSan build).
#
# Each part starts its own server on a free loopback port (--port 0, the port read back from
# --port-file), drives it, then stops it with SIGTERM and checks that it exits 0 in time.
#   greedy:  N concurrent greedy requests (curl, and the official `openai` npm client run by node;
#            streaming and not; completions and chat) each return exactly the token ids that
#            `sluice run --temp 0` gives for that prompt alone — resident stories260K and a streamed
#            Q4_K_M model, more requests than slots so that some queue and join running batches.
#   hostile: malformed and hostile clients (tests/serve/hostile.mjs) each get a clear 4xx or are cut
#            off, and the server keeps answering /health and real requests.
#   limits:  slowloris from many loopback addresses, one address hoarding connections, idle kept-alive
#            connections at the limit, the request deadline, HTTP edge cases (tests/serve/limits.mjs):
#            a normal client keeps being answered within 2 s.
#   cancel:  clients that leave while their request runs or waits (tests/serve/cancel.mjs), request
#            fields honoured or refused (logprobs), the command line, a second signal.
#   webui:   the web page at / in Debian's chromium (tests/serve/webui.mjs, playwright-core): chat,
#            stop, the plan view against `sluice plan --json` (stories260K streaming; a MoE model's
#            expert cache); screenshots into $SL_WEBUI_SHOTS (default: the work folder); then --no-webui.
#   json:    response_format json_schema / json_object (tests/serve/json_schema.mjs): 100 answers sampled
#            at temperature 1 all end by themselves and validate (ajv); unsupported keywords are 400s.
#   toolcalls: tool-call round trips and reasoning (tests/serve/tools.mjs) on a random-weight model per
#            chat template: Qwen3 (the Qwen2 vocabulary and its template, sluice-gen), Llama 3.1 (the
#            Llama 3 vocabulary, sluice-gen), Mistral Nemo's format (micro-nemo, its template forced),
#            gpt-oss (its o200k_harmony vocabulary and template, sluice-gen).
#   pcache:  the prompt cache (tests/serve/prompt_cache.mjs): cached_tokens, /metrics, tokens identical
#            to a server with --no-prompt-cache.
# The npm client is installed by scripts/install-deps.sh into tests/serve/node_modules.
set -euo pipefail
SLUICE=$(realpath "$1")
PART=${2:-all}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SHARED=${SL_SHARED_DIR:-$ROOT/../shared}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-serve-test.XXXXXX")
SERVER_PID=""
OTHER_PID=""   # a second server running beside SERVER_PID (pcache)
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi
  if [ -n "$OTHER_PID" ] && kill -0 "$OTHER_PID" 2>/dev/null; then kill -KILL "$OTHER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "serve_test: FAIL: $*" >&2; [ -f "$WORK/server.log" ] && tail -20 "$WORK/server.log" >&2; exit 1; }

command -v curl >/dev/null || fail "curl is missing (scripts/install-deps.sh installs it)"
command -v node >/dev/null || fail "node is missing (scripts/install-deps.sh installs it)"
[ -f "$HERE/node_modules/openai/package.json" ] ||
  fail "the openai npm client is missing: run scripts/install-deps.sh (npm ci --prefix tests/serve)"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true   # the hostile part opens thousands of sockets

# start_server LOG ARGS...: sets SERVER_PID and BASE (http://127.0.0.1:PORT)
start_server() {
  local log=$1; shift
  rm -f "$WORK/port"
  "$SLUICE" serve --port 0 --port-file "$WORK/port" "$@" > "$log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 300); do
    [ -s "$WORK/port" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || fail "the server exited at start: $(cat "$log")"
    sleep 0.1
  done
  [ -s "$WORK/port" ] || fail "the server did not start listening within 30 s"
  BASE="http://127.0.0.1:$(cat "$WORK/port")"
  cp "$log" "$WORK/server.log"
}

# stop_server: SIGTERM, then the server must exit 0 within 20 s
stop_server() {
  kill -TERM "$SERVER_PID"
  local rc=0
  for _ in $(seq 1 200); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$SERVER_PID" 2>/dev/null && fail "the server did not exit within 20 s of SIGTERM"
  wait "$SERVER_PID" || rc=$?
  SERVER_PID=""
  [ "$rc" = 0 ] || fail "the server exited with status $rc after SIGTERM"
}

# expect_run MODEL PROMPT N [--special] -> one line: JSON array of the greedy token ids `sluice run` gives
expect_run() {
  local model=$1 prompt=$2 n=$3; shift 3
  "$SLUICE" run -m "$model" -p "$prompt" -n "$n" --temp 0 --json "$@" 2>/dev/null |
    node -e 'const l=require("fs").readFileSync(0,"utf8").trim().split("\n").filter(Boolean);
             console.log(JSON.stringify(l.map(x=>JSON.parse(x).id)))'
}

greedy_part() {   # MODEL LABEL SERVER_ARGS...
  local model=$1 label=$2; shift 2
  local prompts=("Once upon a time" "The little dog ran to the" "Lily and Tom found a big box. Inside" "One day, a bird"
                 "Sam was sad because" "The sun was hot and")
  local chats=("Tell me a story about a cat." "What is the sky?")
  local n=24
  {
    echo '{"completions":['
    local first=1
    for p in "${prompts[@]}"; do
      [ $first = 1 ] || echo ','; first=0
      printf '{"prompt":%s,"tokens":%s}' "$(node -e 'console.log(JSON.stringify(process.argv[1]))' "$p")" \
        "$(expect_run "$model" "$p" $n)"
    done
    echo '],"chats":['
    first=1
    for c in "${chats[@]}"; do
      [ $first = 1 ] || echo ','; first=0
      # the plain template (these models have none): what the server renders for one user message
      printf '{"content":%s,"tokens":%s}' "$(node -e 'console.log(JSON.stringify(process.argv[1]))' "$c")" \
        "$(expect_run "$model" "User: $c"$'\n'"Assistant:" $n --special)"
    done
    echo "],\"max_tokens\":$n}"
  } > "$WORK/expect.json"
  start_server "$WORK/server-$label.log" -m "$model" --api-key test-key-123 "$@"
  # curl: the same request twice at once, and once more, stream and not
  local body='{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"return_tokens":true}'
  local want
  want=$(node -e 'const e=require(process.argv[1]);console.log(JSON.stringify(e.completions[0].tokens))' "$WORK/expect.json")
  local pids=()
  for i in 1 2 3; do
    curl -sS -m 60 -H "Authorization: Bearer test-key-123" "$BASE/v1/completions" -d "$body" > "$WORK/curl$i.json" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail "$label: curl request failed"; done
  for i in 1 2 3; do
    got=$(node -e 'const r=require(process.argv[1]);console.log(JSON.stringify(r.choices[0].tokens))' "$WORK/curl$i.json") ||
      fail "$label: curl request $i: no tokens in $(head -c 300 "$WORK/curl$i.json")"
    [ "$got" = "$want" ] || fail "$label: curl request $i returned $got, sluice run gives $want"
  done
  curl -sS -m 60 -N -H "Authorization: Bearer test-key-123" "$BASE/v1/completions" \
    -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stream":true,"return_tokens":true}' > "$WORK/sse.txt"
  grep -q '^data: \[DONE\]$' "$WORK/sse.txt" || fail "$label: the curl stream did not end with data: [DONE]"
  code=$(curl -s -o /dev/null -w '%{http_code}' "$BASE/v1/models")
  [ "$code" = 401 ] || fail "$label: /v1/models without the API key gave $code, not 401"
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer test-key-12" "$BASE/v1/models")
  [ "$code" = 401 ] || fail "$label: a wrong API key gave $code, not 401"
  SLUICE_URL="$BASE/v1" SLUICE_KEY=test-key-123 EXPECT="$WORK/expect.json" timeout 300 node "$HERE/client.mjs" ||
    fail "$label: the openai client test failed"
  curl -sS -H "Authorization: Bearer test-key-123" "$BASE/metrics" > "$WORK/metrics.txt"
  passes=$(awk '$1=="sluice_passes_total"{print $2}' "$WORK/metrics.txt")
  toks=$(awk '$1=="sluice_pass_tokens_total"{print $2}' "$WORK/metrics.txt")
  [ -n "$passes" ] && [ "$passes" -gt 0 ] || fail "$label: /metrics has no passes"
  # the requests overlapped: passes carried several sequences' tokens (a prompt chunk counts as many)
  [ "$toks" -gt $((passes * 3 / 2)) ] || fail "$label: $toks tokens in $passes passes: the requests were not batched"
  echo "serve_test: $label: greedy tokens identical to sluice run for every request; $passes passes carried $toks tokens"
  stop_server
}

hostile_part() {
  local model=$SHARED/models/mini-llama3.Q8_0.gguf
  [ -f "$model" ] || fail "missing $model"
  start_server "$WORK/server-hostile.log" -m "$model" -c 1024 --parallel 2 --queue 1 --timeout 6 \
    --max-connections 2400 --max-per-client 2400 --max-body 64K --max-header 8K --max-tokens 600
  # 2000 idle connections, fewer if the descriptor limit (shared by this test and the server) is low
  local fds idle
  fds=$(ulimit -n)
  idle=2000
  if [ "$fds" != unlimited ] && [ $((fds / 2 - 100)) -lt $idle ]; then idle=$((fds / 2 - 100)); fi
  SLUICE_IDLE=$idle SLUICE_URL="$BASE" SLUICE_RUN_TOKENS="$(expect_run "$model" "Once upon a time" 16)" timeout 600 \
    node "$HERE/hostile.mjs" || fail "hostile: the hostile-client test failed"
  stop_server
}

limits_part() {
  local model=$SHARED/models/mini-llama3.Q8_0.gguf
  [ -f "$model" ] || fail "missing $model"
  start_server "$WORK/server-limits.log" -m "$model" -c 1024 --parallel 2 --max-connections 200 --max-per-client 40 \
    --request-timeout 3 --timeout 30 --max-tokens 64
  SLUICE_URL="$BASE" timeout 300 node "$HERE/limits.mjs" || fail "limits: the connection-limits test failed"
  stop_server
}

cancel_part() {
  local model=$SHARED/models/mini-llama3.Q8_0.gguf stories=$ROOT/models/stories260K.gguf out st
  [ -f "$model" ] || fail "missing $model"
  start_server "$WORK/server-cancel.log" -m "$model" --parallel 1 --queue 2 -c 8192 -b 128 --max-tokens 8000 --ignore-eos
  SLUICE_URL="$BASE" timeout 300 node "$HERE/cancel.mjs" || fail "cancel: the departed-clients and fields test failed"
  stop_server

  # the command line: only the options the server uses, llama-server's spellings where they mean the same
  out=$("$SLUICE" serve --help)
  for o in -np -n -r -a -to --request-timeout --max-per-client; do
    grep -qE -- "^ +(-[a-z]+, )?$o[ ,]" <<<"$out" || fail "serve --help does not list $o"
  done
  for o in --session --stats --lookup -md --special --quiet --seed; do
    ! grep -qE -- "(^|[ ,])$o([ ,]|$)" <<<"$out" || fail "serve --help lists $o, which the server does not use"
    st=0; out2=$("$SLUICE" serve -m "$stories" --port 0 "$o" x 2>&1) || st=$?
    [ "$st" = 2 ] && grep -q -- "$o is not supported by the server" <<<"$out2" || fail "serve $o: status $st: $out2"
  done
  st=0; out2=$("$SLUICE" serve -m "$stories" --port 0 --bogus 2>&1) || st=$?
  [ "$st" = 2 ] && grep -q "unknown option '--bogus'" <<<"$out2" || fail "serve --bogus: status $st: $out2"
  # -np is --parallel, -n the default max_tokens, -r a default stop string
  start_server "$WORK/server-opts.log" -m "$stories" -np 2 -n 30 -r e --ignore-eos --temp 0
  curl -sS "$BASE/health" | grep -q '"slots":2' || fail "-np 2 did not give two slots"
  out=$(curl -sS "$BASE/v1/completions" -d '{"prompt":"Once upon a time","stop":[]}')
  grep -q '"completion_tokens":30' <<<"$out" || fail "-n 30: a request without max_tokens gave $out"
  out=$(curl -sS "$BASE/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":30}')
  node -e 'const r=JSON.parse(process.argv[1]).choices[0]; if (r.finish_reason!=="stop"||r.text.includes("e")) process.exit(1)' "$out" ||
    fail "-r e: a request without stop gave $out"
  stop_server

  # a second SIGTERM during the grace period: every request cancelled at once, exit 128+15; the
  # cancelled stream simply ends (no finish_reason outside OpenAI's)
  start_server "$WORK/server-signal.log" -m "$model" --parallel 1 -c 8192 --max-tokens 8000 --ignore-eos --grace 60
  curl -sN "$BASE/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":8000,"stream":true}' > "$WORK/sig.sse" &
  local curl_pid=$!
  for _ in $(seq 1 50); do curl -s "$BASE/health" | grep -q '"slots_busy":1' && break; sleep 0.1; done
  kill -TERM "$SERVER_PID"; sleep 0.5
  curl -s "$BASE/health" | grep -q '"status":"stopping"' || fail "after one SIGTERM the server is not stopping"
  local t0=$SECONDS rc=0
  kill -TERM "$SERVER_PID"
  for _ in $(seq 1 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$SERVER_PID" 2>/dev/null && fail "a second SIGTERM did not end the server within 5 s (grace 60)"
  wait "$SERVER_PID" || rc=$?
  SERVER_PID=""
  [ "$rc" = 143 ] || fail "after a second SIGTERM the exit status is $rc, not 143"
  wait "$curl_pid" || true
  grep -q '"text"' "$WORK/sig.sse" || fail "the stream sent nothing before the signals"
  ! grep -q 'cancelled' "$WORK/sig.sse" || fail "a cancelled stream says cancelled: $(tail -c 300 "$WORK/sig.sse")"
  ! grep -q '\[DONE\]' "$WORK/sig.sse" || fail "a cancelled stream ended as if complete"
  echo "serve_test: cancel: a second SIGTERM exited in $((SECONDS - t0)) s with status 143"
}

webui_part() {
  local stories=$ROOT/models/stories260K.gguf code
  local chromium=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
  [ -n "$chromium" ] || fail "webui: chromium is missing (scripts/install-deps.sh installs it: apt-get install chromium)"
  [ -f "$HERE/node_modules/playwright-core/package.json" ] ||
    fail "webui: playwright-core is missing: run scripts/install-deps.sh (npm ci --prefix tests/serve)"
  # the plan both make: a budget where one block and the LM head stay resident and the rest streams
  # (KV spilled); fixed rates, so that the two plans cannot differ by a measurement.  The server
  # does not draft (--draft off): `sluice plan` has no draft, and a drafting server keeps more
  # logits rows (act_bytes).  --ignore-eos: the answer to stop runs long.
  local plan_args=(-c 4096 -t 2 --ram-budget 9.5M --disk-bw 1.8 --compute-bw 2)
  "$SLUICE" plan -m "$stories" "${plan_args[@]}" --json > "$WORK/plan.json" || fail "webui: sluice plan failed"
  start_server "$WORK/server-webui.log" -m "$stories" "${plan_args[@]}" --draft off --ignore-eos --api-key webui-key-7
  mkdir -p "${SL_WEBUI_SHOTS:=$WORK}"
  SLUICE_URL="$BASE" SLUICE_KEY=webui-key-7 PLAN_JSON="$WORK/plan.json" SHOTS="$SL_WEBUI_SHOTS" CHROMIUM="$chromium" \
    timeout 300 node "$HERE/webui.mjs" || fail "webui: the browser test failed"
  code=$(curl -s -o /dev/null -w '%{http_code}' "$BASE/v1/plan")
  [ "$code" = 401 ] || fail "webui: /v1/plan without the key gave $code, not 401"
  stop_server
  # a mixture of experts at a budget where the expert cache holds some of them: its row and hit rate
  local moe=$SHARED/models/micro-mixtral.Q8_0.gguf
  [ -f "$moe" ] || fail "missing $moe"
  plan_args=(-c 1024 -t 2 --ram-budget 15.5M --disk-bw 1.8 --compute-bw 2)
  "$SLUICE" plan -m "$moe" "${plan_args[@]}" --json > "$WORK/plan-moe.json" || fail "webui: sluice plan (MoE) failed"
  grep -q '"expert_cache_entries":[1-9]' "$WORK/plan-moe.json" || fail "webui: the MoE plan has no expert cache: $(cat "$WORK/plan-moe.json")"
  start_server "$WORK/server-webui-moe.log" -m "$moe" "${plan_args[@]}" --draft off --api-key webui-key-7
  SLUICE_URL="$BASE" SLUICE_KEY=webui-key-7 PLAN_JSON="$WORK/plan-moe.json" SHOTS="$SL_WEBUI_SHOTS" CHROMIUM="$chromium" \
    MODE=moe MODEL_NAME=micro-mixtral.Q8_0.gguf timeout 300 node "$HERE/webui.mjs" || fail "webui: the browser test (MoE plan) failed"
  stop_server
  start_server "$WORK/server-nowebui.log" -m "$stories" --no-webui
  code=$(curl -s -o /dev/null -w '%{http_code}' "$BASE/")
  [ "$code" = 404 ] || fail "webui: --no-webui: / gave $code, not 404"
  code=$(curl -s -o /dev/null -w '%{http_code}' "$BASE/v1/plan")
  [ "$code" = 200 ] || fail "webui: --no-webui: /v1/plan gave $code, not 200"
  stop_server
  echo "serve_test: webui: the page in chromium passed; --no-webui: / is 404"
}

tools_part() {
  local gen
  gen=$(dirname "$SLUICE")/sluice-gen
  [ -x "$gen" ] || fail "tools: missing $gen (built with sluice)"
  "$gen" --shape qwen3-8b --dim 64 --layers 1 --heads 2 --kv-heads 1 --head-dim 32 --ffn 128 --ctx 2048 --type Q8_0 \
    --quiet --out "$WORK/qwen3.gguf" || fail "tools: sluice-gen qwen3"
  "$gen" --shape llama3.1-8b --dim 64 --layers 1 --heads 2 --kv-heads 1 --ffn 128 --ctx 2048 --type Q8_0 \
    --quiet --out "$WORK/llama3.gguf" || fail "tools: sluice-gen llama3"
  "$gen" --shape gpt-oss-20b --dim 64 --layers 1 --heads 2 --kv-heads 1 --head-dim 32 --experts 4 --experts-used 2 \
    --expert-ffn 64 --ctx 2048 --type Q8_0 --quiet --out "$WORK/gpt-oss.gguf" || fail "tools: sluice-gen gpt-oss"
  [ -f "$SHARED/models/micro-nemo.F16.gguf" ] || fail "missing $SHARED/models/micro-nemo.F16.gguf"
  local spec
  for spec in "qwen3|$WORK/qwen3.gguf|" "llama3|$WORK/llama3.gguf|--chat-template llama3" \
              "mistral|$SHARED/models/micro-nemo.F16.gguf|--chat-template mistral-v3-tekken" \
              "gpt-oss|$WORK/gpt-oss.gguf|"; do
    IFS='|' read -r label model extra <<<"$spec"
    # shellcheck disable=SC2086
    start_server "$WORK/server-tools-$label.log" -m "$model" -c 2048 --parallel 2 $extra
    LABEL=$label REASONING=$([ "$label" = qwen3 ] && echo 1 || echo 0) HARMONY=$([ "$label" = gpt-oss ] && echo 1 || echo 0) \
      SLUICE_URL="$BASE/v1" timeout 300 \
      node "$HERE/tools.mjs" || fail "tools: $label: the tool-call test failed"
    stop_server
  done
  rm -f "$WORK/qwen3.gguf" "$WORK/llama3.gguf" "$WORK/gpt-oss.gguf"
}

json_part() {
  local model=$SHARED/models/mini-llama3.Q8_0.gguf
  [ -f "$model" ] || fail "missing $model"
  [ -f "$HERE/node_modules/ajv/package.json" ] || fail "ajv is missing: run scripts/install-deps.sh (npm ci --prefix tests/serve)"
  # n-gram drafting forced on (the model is resident): batched draft verification runs under the mask
  start_server "$WORK/server-json.log" -m "$model" -c 1024 --parallel 4 --max-tokens 700 --draft ngram --draft-max 4
  SLUICE_URL="$BASE/v1" timeout 600 node "$HERE/json_schema.mjs" || fail "json: the structured-output test failed"
  stop_server
}

# pcache: the prompt cache (tests/serve/prompt_cache.mjs): a server with it and one without
# (--no-prompt-cache) over the same model, the same requests to both; resident and streamed (drafting).
pcache_part() {   # MODEL LABEL SERVER_ARGS...
  local model=$1 label=$2; shift 2
  [ -f "$model" ] || fail "missing $model"
  start_server "$WORK/server-pcache-$label.log" -m "$model" --parallel 2 --ignore-eos "$@"
  local cached_base=$BASE
  OTHER_PID=$SERVER_PID
  start_server "$WORK/server-pcache-$label-off.log" -m "$model" --parallel 2 --ignore-eos --no-prompt-cache "$@"
  CACHED_URL="$cached_base/v1" PLAIN_URL="$BASE/v1" timeout 300 node "$HERE/prompt_cache.mjs" ||
    fail "pcache: $label: the prompt-cache test failed"
  stop_server
  SERVER_PID=$OTHER_PID OTHER_PID=""
  stop_server
  echo "serve_test: pcache: $label: cached_tokens exact, tokens identical to --no-prompt-cache"
}

# the disk tier: one slot, two conversations taking turns in it through --prompt-cache-dir
pcache_disk_part() {   # MODEL
  local model=$1
  mkdir "$WORK/pcache"
  start_server "$WORK/server-pcache-disk.log" -m "$model" --parallel 1 --ignore-eos -c 1024 \
    --prompt-cache-dir "$WORK/pcache" --prompt-cache-max 64M
  local cached_base=$BASE
  OTHER_PID=$SERVER_PID
  start_server "$WORK/server-pcache-disk-off.log" -m "$model" --parallel 1 --ignore-eos -c 1024 --no-prompt-cache
  CACHED_URL="$cached_base/v1" PLAIN_URL="$BASE/v1" CACHE_DIR="$WORK/pcache" timeout 300 \
    node "$HERE/prompt_cache_disk.mjs" || fail "pcache: the disk-tier test failed"
  stop_server
  SERVER_PID=$OTHER_PID OTHER_PID=""
  stop_server
  local st=0 out
  out=$("$SLUICE" serve -m "$model" --port 0 --prompt-cache-dir "$WORK/pcache/notes.txt" 2>&1) || st=$?
  [ "$st" != 0 ] && grep -q "not a directory" <<<"$out" || fail "--prompt-cache-dir on a file: status $st: $out"
  st=0; out=$("$SLUICE" serve -m "$model" --port 0 --prompt-cache-dir "$WORK/pcache" --no-prompt-cache 2>&1) || st=$?
  [ "$st" = 2 ] && grep -q "needs the prompt cache" <<<"$out" || fail "--prompt-cache-dir with --no-prompt-cache: $st: $out"
}

case "$PART" in
  greedy|core|all)
    greedy_part "$ROOT/models/stories260K.gguf" stories --parallel 4
    [ -f "$SHARED/models/micro-llama.Q4_K_M.gguf" ] || fail "missing $SHARED/models/micro-llama.Q4_K_M.gguf"
    greedy_part "$SHARED/models/micro-llama.Q4_K_M.gguf" micro-llama-streamed --parallel 3 --stream -c 256 -b 16
    ;;&
  hostile|core|all) hostile_part ;;&
  limits|all) limits_part ;;&
  cancel|all) cancel_part ;;&
  webui|all) webui_part ;;&
  json|all) json_part ;;&
  toolcalls|all) tools_part ;;&
  pcache|all)
    pcache_disk_part "$SHARED/models/mini-llama3.Q8_0.gguf"
    pcache_part "$SHARED/models/mini-llama3.Q8_0.gguf" mini-llama3 -c 512
    pcache_part "$SHARED/models/micro-llama.Q4_K_M.gguf" micro-llama-streamed --stream -c 512 -b 16
    pcache_part "$SHARED/models/micro-gemma3.Q8_0.gguf" micro-gemma3 -c 512
    ;;
esac
echo "serve_test: $PART: every check passed"
