#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] [TARGET...] — build the libFuzzer targets (clang, ASan+UBSan) and run each
# for SECONDS (default 60), one after the other (the machine has 2 shared cores: one fuzzer process at a
# time, no -jobs/-workers).  Targets: gguf, tokenizer (default: both).
#
#   * build:  build-fuzz/ (or $FUZZ_DIR) via tests/fuzz/Makefile — separate from the gcc/CMake builds.
#   * seeds:  the first 64 KiB of every shared/models/*.gguf and shared/vocab/*.gguf, the hostile corpus
#             tests/hostile/*.gguf, saved regressions; for the tokenizer the 22 golden tokenizer strings.
#   * corpus: build-fuzz/corpus/<target>/ grows across runs (coverage accumulates between invocations).
#   * result: exit 0 when every target ran its time clean; exit 1 on any crash, leak, timeout, OOM or
#             sanitizer report — the input that caused it is copied to tests/fuzz/regressions/
#             <target>-<kind>-<sha1> (tests/test_fuzz_regressions.c replays that folder in ctest).
#   * stats:  one line per run appended to build-fuzz/fuzz-stats.tsv (execs, coverage, corpus size).
#   * $FUZZ_ARGS: extra libFuzzer flags (e.g. FUZZ_ARGS=-len_control=0 to try long inputs at once).
# scripts/fuzz.sh coverage — replay the saved corpora through source-coverage builds and print llvm-cov's
#   line/branch report for the files the targets are about (nothing is fuzzed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SECS=${1:-60}
[ $# -gt 0 ] && shift
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(gguf tokenizer)
OUT=${FUZZ_DIR:-$ROOT/build-fuzz}
SHARED=${SL_SHARED_DIR:-$(cd "$ROOT/.." && pwd)/shared}
REG=$ROOT/tests/fuzz/regressions

command -v clang >/dev/null || { echo "fuzz.sh: clang not found (scripts/install-deps.sh installs it)" >&2; exit 2; }
[ -d "$SHARED/models" ] || { echo "fuzz.sh: reference data not found at $SHARED" >&2; exit 2; }

if [ "$SECS" = coverage ]; then
  make -s -f tests/fuzz/Makefile OUT="$OUT" SHARED="$SHARED" -j2 cov
  for t in gguf tokenizer; do
    [ -d "$OUT/corpus/$t" ] || { echo "fuzz.sh: no corpus for $t yet (run the fuzzer first)" >&2; continue; }
    rm -f "$OUT/cov/$t.profraw"
    LLVM_PROFILE_FILE="$OUT/cov/$t.profraw" "$OUT/cov/fuzz_$t" -runs=0 "$OUT/corpus/$t" > "$OUT/cov/$t.log" 2>&1
    llvm-profdata merge -o "$OUT/cov/$t.profdata" "$OUT/cov/$t.profraw"
    case $t in
      gguf) files="loader/gguf.c runtime/engine/model.c runtime/text/tokenizer.c" ;;
      tokenizer) files="runtime/text/tokenizer.c runtime/text/tokenizer_spm.c runtime/text/tokenizer_bpe.c runtime/text/tokenizer_pre.c runtime/text/tokenizer_text.c runtime/text/unicode.c" ;;
    esac
    echo "== $t (corpus $(ls "$OUT/corpus/$t" | wc -l) inputs)"
    # shellcheck disable=SC2086
    llvm-cov report "$OUT/cov/fuzz_$t" -instr-profile="$OUT/cov/$t.profdata" $files
  done
  exit 0
fi

echo "fuzz.sh: building into $OUT"
make -s -f tests/fuzz/Makefile OUT="$OUT" SHARED="$SHARED" -j2

# ---- seeds (rebuilt every run: cheap, and picks up new hostile files and regressions) ----
rm -rf "$OUT/seeds"
mkdir -p "$OUT/seeds/gguf" "$OUT/seeds/tokenizer" "$REG"
for f in "$SHARED"/models/*.gguf "$SHARED"/vocab/*.gguf; do
  head -c 65536 "$f" > "$OUT/seeds/gguf/$(basename "$f" .gguf).head"
done
cp "$ROOT"/tests/hostile/*.gguf "$OUT/seeds/gguf/" 2>/dev/null || true
for f in "$REG"/gguf-*; do [ -f "$f" ] && cp "$f" "$OUT/seeds/gguf/"; done
# tokenizer seeds: byte 0 = vocabulary index, byte 1 = flags, then one golden string
awk -v dir="$OUT/seeds/tokenizer/str" 'BEGIN { RS = "\n__ggml_vocab_test__\n" }
  { f = sprintf("%s%03d", dir, NR); printf "%s", $0 > f; close(f) }' "$SHARED/golden/tokenizer/strings.inp"
k=0
for s in "$OUT"/seeds/tokenizer/str*; do
  for v in 0 1 2 3 4 5 6 7 8 9 10 11 12 13; do
    { printf "\\x$(printf %02x $v)\\x$(printf %02x $((k % 4)))"; cat "$s"; } > "$OUT/seeds/tokenizer/v${v}_$(basename "$s")"
  done
  rm -f "$s"
  k=$((k + 1))
done
for f in "$REG"/tokenizer-*; do [ -f "$f" ] && cp "$f" "$OUT/seeds/tokenizer/"; done

# ---- run ----
status=0
for t in "${TARGETS[@]}"; do
  case $t in
    gguf) maxlen=65536 ;;
    tokenizer) maxlen=4096 ;;
    *) echo "fuzz.sh: unknown target '$t' (gguf, tokenizer)" >&2; exit 2 ;;
  esac
  mkdir -p "$OUT/corpus/$t" "$OUT/artifacts/$t" "$OUT/logs"
  log="$OUT/logs/$t.$(date +%Y%m%d-%H%M%S).log"
  echo "fuzz.sh: $t for ${SECS}s (log: $log)"
  rc=0
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$OUT/fuzz_$t" -max_total_time="$SECS" -max_len="$maxlen" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$OUT/artifacts/$t/" ${FUZZ_ARGS:-} \
      "$OUT/corpus/$t" "$OUT/seeds/$t" > "$log" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*' || true)
  ft=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*' || true)
  corp=$(echo "$last" | grep -o 'corp: [0-9]*' | grep -o '[0-9]*' || true)
  printf '%s\t%s\t%ss\texecs=%s\tcov=%s\tft=%s\tcorpus=%s\trc=%s\n' "$(date -Is)" "$t" "$SECS" "${execs:-?}" \
    "${cov:-?}" "${ft:-?}" "${corp:-?}" "$rc" | tee -a "$OUT/fuzz-stats.tsv"
  if [ "$rc" -ne 0 ]; then
    status=1
    echo "fuzz.sh: $t FAILED (exit $rc); report:" >&2
    grep -E 'ERROR|runtime error|SUMMARY|contract violated|check failed|Test unit written' "$log" | head -20 >&2 || true
    for a in "$OUT/artifacts/$t"/*; do
      [ -f "$a" ] || continue
      cp "$a" "$REG/$t-$(basename "$a")"
      echo "fuzz.sh: saved $REG/$t-$(basename "$a")" >&2
      rm -f "$a"
    done
  fi
done
exit $status
