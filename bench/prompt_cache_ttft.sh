#!/usr/bin/env bash
# bench/prompt_cache_ttft.sh MODEL [BUDGET] [CTX] [N_PROMPT] [N_NEW] — time to first token of a
# conversation's second turn in `sluice serve` (one slot), with the prompt cache and without it.
#
# Turn 1 is N_PROMPT random token ids (default 4000) and one generated token; turn 2 is turn 1, its
# answer and N_NEW new tokens (default 60).  Both go to a server with the prompt cache (the default),
# then turn 2 to a server started with --no-prompt-cache.  Each request asks for one token
# (max_tokens 1, greedy, non-streaming), so its wall time as curl sees it is the time to first token.
# Prints per request: seconds, prompt tokens, cached tokens, the token; then each server's peak RSS
# (VmHWM) and the prompt tokens it evaluated (/metrics).  The servers run one after the other.
# Token ids are drawn from [3, $VOCAB) (default 100000: any llama3-sized vocabulary).
set -euo pipefail
SLUICE=${SLUICE:-./build/sluice}
MODEL=$1 BUDGET=${2:-1G} CTX=${3:-8192} NP=${4:-4000} NNEW=${5:-60}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-pcache-bench.XXXXXX")
PID=""
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT

serve() {
  rm -f "$WORK/port"
  "$SLUICE" serve -m "$MODEL" --ram-budget "$BUDGET" -c "$CTX" --parallel 1 --port 0 --port-file "$WORK/port" "$@" \
    > "$WORK/server.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 600); do [ -s "$WORK/port" ] && break; sleep 0.1; done
  [ -s "$WORK/port" ] || { cat "$WORK/server.log"; exit 1; }
  BASE="http://127.0.0.1:$(cat "$WORK/port")"
}
stop() {
  echo "  peak RSS $(awk '/VmHWM/{printf "%.0f MiB", $2/1024}' "/proc/$PID/status"); prompt tokens evaluated" \
       "$(curl -s "$BASE/metrics" | awk '$1=="sluice_prompt_tokens_total"{print $2}')"
  kill -TERM "$PID"; wait "$PID" || true; PID=""
}
# ask NAME FILE: one token after the prompt in FILE (a JSON array of ids); the answer in $WORK/r-NAME.json
ask() {
  printf '{"prompt":%s,"max_tokens":1,"temperature":0,"return_tokens":true}' "$(cat "$2")" > "$WORK/body.json"
  local t
  t=$(curl -sS -o "$WORK/r-$1.json" -w '%{time_total}' "$BASE/v1/completions" -H 'Content-Type: application/json' \
      --data-binary @"$WORK/body.json")
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); u=r["usage"]
print("  %s: %.2f s, %d prompt tokens, %d cached, token %s" % (sys.argv[2], float(sys.argv[3]), u["prompt_tokens"],
      u["prompt_tokens_details"]["cached_tokens"], r["choices"][0]["tokens"]))' "$WORK/r-$1.json" "$1" "$t"
}

python3 -c 'import json,os,random,sys; random.seed(42)
json.dump([random.randrange(3, int(os.environ.get("VOCAB", "100000"))) for _ in range(int(sys.argv[1]))], open(sys.argv[2], "w"))' "$NP" "$WORK/p1.json"
echo "model $MODEL, --ram-budget $BUDGET -c $CTX --parallel 1; turn 1: $NP tokens, turn 2: + answer + $NNEW"
echo "with the prompt cache:"
serve
ask turn1 "$WORK/p1.json"
python3 -c 'import json,os,random,sys; random.seed(7); t=json.load(open(sys.argv[1])); a=json.load(open(sys.argv[2]))
json.dump(t + a["choices"][0]["tokens"] + [random.randrange(3, int(os.environ.get("VOCAB", "100000"))) for _ in range(int(sys.argv[3]))],
          open(sys.argv[4], "w"))' "$WORK/p1.json" "$WORK/r-turn1.json" "$NNEW" "$WORK/p2.json"
ask turn2 "$WORK/p2.json"
stop
echo "without it (--no-prompt-cache):"
serve --no-prompt-cache
ask turn2-nocache "$WORK/p2.json"
stop
