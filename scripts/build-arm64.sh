#!/usr/bin/env bash
# Cross-build sluice for aarch64 Linux into ./build-arm64 (or $BUILD_DIR) on a Debian 12 amd64
# host: installs the cross toolchain and arm64 libraries (scripts/install-deps-arm64.sh), then
# configures with cmake/aarch64-linux-gnu.cmake.  Extra arguments go to cmake configure.
# On an ARM machine itself use scripts/build.sh (docs/arm64.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps-arm64.sh
BUILD_DIR=${BUILD_DIR:-build-arm64}
cmake -S . -B "$BUILD_DIR" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" \
      -DSL_ARM64_ROOT="${SL_ARM64_ROOT:-$PWD/build-arm64-deps}" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
