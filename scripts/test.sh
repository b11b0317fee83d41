#!/usr/bin/env bash
# Build and run the whole test suite: the normal build, then the ASan+UBSan build.
# This is the README's test command and what CI runs.  SKIP_SANITIZE=1 runs only the normal build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/check-layers.sh
BUILD_DIR=build bash scripts/build.sh
ctest --test-dir build --output-on-failure -j2
if [ "${SKIP_SANITIZE:-0}" != 1 ]; then
  BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo bash scripts/build.sh -DSL_SANITIZE=ON
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j2
fi
# The libFuzzer targets for a fixed short time each (scripts/fuzz.sh; longer runs: docs/reliability.md).
if [ "${SKIP_FUZZ:-0}" != 1 ]; then
  bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
fi
