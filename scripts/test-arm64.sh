#!/usr/bin/env bash
# Cross-build sluice for aarch64 and run the whole Criterion suite (goldens included) under
# qemu-user on this amd64 host.  Installs what it needs (scripts/install-deps-arm64.sh).
#
# - ctest runs each test through qemu-aarch64-static (CMAKE_CROSSCOMPILING_EMULATOR, set by the
#   toolchain file); programs the tests start (sluice, sluice-gen) run through the kernel's
#   binfmt_misc entry for aarch64, registered here when missing (needs root, as CI has).
# - QEMU_CPU=max gives the emulated CPU NEON and the dotprod extension, so the kernel tests check
#   both NEON paths against the portable one, the goldens run on the path the dispatcher picks
#   (neon_dotprod), and test_golden_fast checks the logits of every path (portable, neon,
#   neon_dotprod, auto) bit-identical, at batch 512 and 1.
# - qemu-user does not emulate io_uring: the engine falls back to pread and says so, and the tests
#   that need io_uring report "skipped: …".  SL_TEST_QEMU_USER=1 tells the tests they are emulated
#   (tests/qemu_testutil.h: lower speed floors, no mmap page-cache bound, no RSS-within-plan check,
#   no closed-stdin check, fewer repetitions where a repetition adds no coverage); every skip is
#   printed at the end, as the tests said it.
# - Then a streamed run with 16 KiB (Raspberry Pi 5 kernels) and 64 KiB pages (QEMU_PAGESIZE: the
#   guest's sysconf(_SC_PAGESIZE) and AT_PAGESZ) must give the 4 KiB run's tokens.
# - `sluice serve` is built for arm64 (libmicrohttpd unpacked into the private root, jansson from
#   multiarch); its in-process Criterion tests need the host's loopback from a native build, so the
#   emulated check of serve is the end-to-end one below.
# - Last, the command line end to end with 2 and 4 threads (scripts/test-arm64-cli.sh: run against
#   the stories260K goldens, chat from a pipe, serve with one request, a stuck worker under a signal).
# BUILD_DIR (default build-arm64); extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-arm64}
export SL_ARM64_ROOT=${SL_ARM64_ROOT:-$PWD/build-arm64-deps}

# qemu-user-static first: its binfmt entry below is read from the package (on a fresh machine
# registering before the install failed: no /usr/lib/binfmt.d/qemu-aarch64.conf).
bash scripts/install-deps-arm64.sh

# binfmt_misc: lets a test exec an aarch64 program (the test binaries spawn sluice themselves).
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
BINFMT=/proc/sys/fs/binfmt_misc
if [ ! -e "$BINFMT/register" ]; then
  $SUDO mount -t binfmt_misc binfmt_misc "$BINFMT" || { echo "test-arm64: needs binfmt_misc (mount failed)" >&2; exit 1; }
fi
if [ ! -e "$BINFMT/qemu-aarch64" ]; then
  # the entry Debian's qemu-user-static ships (flag F: the interpreter is opened now, so it also
  # works inside chroots and containers)
  grep -v '^#' /usr/lib/binfmt.d/qemu-aarch64.conf | $SUDO tee "$BINFMT/register" >/dev/null ||
    { echo "test-arm64: cannot register the aarch64 binfmt_misc entry" >&2; exit 1; }
  echo "test-arm64: registered binfmt_misc entry qemu-aarch64"
fi

# The tests exec arm64 programs (binfmt_misc above); the build runs the sluice it links under
# qemu-aarch64-static itself (CMAKE_CROSSCOMPILING_EMULATOR), so it would work without the entry.
BUILD_DIR=$BUILD_DIR bash scripts/build-arm64.sh

# qemu maps the guest's file paths into this root first: arm64 Criterion and libnanomsg live there,
# everything else (the arm64 loader, libc, liburing, zstd) in the multiarch dirs it falls back to.
export QEMU_LD_PREFIX=$SL_ARM64_ROOT
export QEMU_CPU=max
export SL_TEST_QEMU_USER=1
export CRITERION_VERBOSITY_LEVEL=1   # Criterion prints [SKIP] lines (with their reason) only from level 1
[ -d "$BUILD_DIR/CMakeFiles/sluice_serve.dir" ] ||
  { echo "test-arm64: sluice serve was not built for arm64 (scripts/install-deps-arm64.sh unpacks libmicrohttpd)" >&2; exit 1; }
start=$(date +%s)
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 "$@" || rc=$?
# what the emulator could not run, as the tests said it (their output is hidden when they pass)
grep -ahoE '\[SKIP\].*|^skipped: .*' "$BUILD_DIR/Testing/Temporary/LastTest.log" | sort | uniq -c | sed 's/^/test-arm64: /' || true
echo "test-arm64: qemu test time $(( $(date +%s) - start )) s"
[ "$rc" -eq 0 ] || exit "$rc"

# Larger pages: what a Raspberry Pi 5 kernel (16 KiB) and some arm64 distributions (64 KiB) run.
# QEMU_PAGESIZE sets the guest's sysconf(_SC_PAGESIZE) and AT_PAGESZ.  Criterion's workers crash
# under qemu with pages larger than the host's, so the check is end to end: a streamed run (the
# reader's page arithmetic, the planner's buffer figures) must print the 4 KiB run's greedy tokens.
model=../shared/models/micro-llama.Q8_0.gguf
for pagesize in 4096 16384 65536; do
  QEMU_PAGESIZE=$pagesize qemu-aarch64-static "$BUILD_DIR/sluice" run -m "$model" -c 256 --ram-budget 9M \
    -p "Once upon a time" -n 16 --temp 0 --stats >"$BUILD_DIR/Testing/Temporary/page$pagesize.out" \
    2>"$BUILD_DIR/Testing/Temporary/page$pagesize.err" || {
    cat "$BUILD_DIR/Testing/Temporary/page$pagesize.err" >&2
    echo "test-arm64: the streamed run failed with $pagesize-byte pages" >&2
    exit 1
  }
  grep -q "streamed per token" "$BUILD_DIR/Testing/Temporary/page$pagesize.err" ||
    { echo "test-arm64: the $pagesize-byte page run did not stream" >&2; exit 1; }
  cmp -s "$BUILD_DIR/Testing/Temporary/page4096.out" "$BUILD_DIR/Testing/Temporary/page$pagesize.out" ||
    { echo "test-arm64: greedy tokens with $pagesize-byte pages differ from 4096-byte pages" >&2; exit 1; }
done
echo "test-arm64: streamed run identical with 4, 16 and 64 KiB pages"

# The command line with 2 and 4 threads (issue 45: the suite's programs run mostly one thread).
bash scripts/test-arm64-cli.sh "$BUILD_DIR"
echo "test-arm64: total time $(( $(date +%s) - start )) s from the start of the tests"
