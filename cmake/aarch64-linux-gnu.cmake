# CMake toolchain file: cross-compile sluice for 64-bit ARM Linux with Debian's
# gcc-aarch64-linux-gnu and the multiarch arm64 -dev packages (scripts/install-deps-arm64.sh).
# Used by scripts/build-arm64.sh; on an ARM machine itself no toolchain file is needed.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)

# Libraries and headers of the target: multiarch puts them in /usr/lib/aarch64-linux-gnu and
# /usr/include (shared with the host), so the root path is / and the search stays on target dirs.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)

# pkg-config must read the arm64 .pc files, never the host's: the multiarch ones and the
# criterion.pc of the private root where scripts/install-deps-arm64.sh unpacks arm64 Criterion.
set(SL_ARM64_ROOT "${CMAKE_CURRENT_LIST_DIR}/../build-arm64-deps" CACHE PATH "arm64 Criterion root")
set(ENV{PKG_CONFIG_LIBDIR} "${SL_ARM64_ROOT}:/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# ctest (and try_run, and the build's own run of sluice for its man page) run target programs
# through qemu-user, with QEMU_LD_PREFIX at the private root: the libraries unpacked there
# (Criterion, libmicrohttpd and its GnuTLS) are found first, the multiarch ones after them.
if(NOT DEFINED CMAKE_CROSSCOMPILING_EMULATOR)
  find_program(SL_QEMU_AARCH64 qemu-aarch64-static)
  if(SL_QEMU_AARCH64)
    set(CMAKE_CROSSCOMPILING_EMULATOR env QEMU_LD_PREFIX=${SL_ARM64_ROOT} ${SL_QEMU_AARCH64})
  endif()
endif()
