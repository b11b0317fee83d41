#!/usr/bin/env bash
# Installs what the aarch64 cross build and its qemu test run need on a Debian 12 amd64 host:
# the cross compiler, qemu-user, the arm64 -dev packages of sluice's libraries (multiarch) and
# an arm64 Criterion.  Idempotent like scripts/install-deps.sh: apt runs only when something is
# missing.
#
# Criterion cannot be installed for arm64 next to the amd64 one: its dependencies libnanomsg5 and
# libgit2-dev/libhttp-parser-dev are not multiarch-co-installable, so apt would remove the host's
# Criterion (which scripts/test.sh needs).  Its arm64 packages are therefore downloaded with apt
# and unpacked (dpkg -x) into a private root, $SL_ARM64_ROOT (default build-arm64-deps/), with
# a criterion.pc for it; every apt install here runs with --no-remove, so it never takes a host
# package away.  scripts/test-arm64.sh points qemu at that root (QEMU_LD_PREFIX).
#
# libmicrohttpd (for `sluice serve`) is unpacked there too, with the GnuTLS it links: installing
# libgnutls30:arm64 with apt would move the host's libgnutls30 to the same version (Multi-Arch: same
# packages go in lockstep), and this script changes no host package.  jansson installs cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${SL_ARM64_ROOT:-$PWD/build-arm64-deps}
HOST_PKGS=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static cmake pkg-config)
# liburing, zstd and libedit (the chat line editor: without it chat reads plain lines and the
# terminal tests of test_chat_tty cannot pass) are co-installable; libgit2-1.5 and libffi8 are
# Criterion's co-installable run-time dependencies.
ARM_PKGS=(liburing-dev:arm64 libzstd-dev:arm64 libedit-dev:arm64 libgit2-1.5:arm64 libffi8:arm64
          libjansson-dev:arm64)
UNPACK_PKGS=(libcriterion3:arm64 libcriterion-dev:arm64 libnanomsg5:arm64
             libmicrohttpd12:arm64 libmicrohttpd-dev:arm64 libgnutls30:arm64 libgmp10:arm64 libnettle8:arm64
             libhogweed6:arm64 libunistring2:arm64 libidn2-0:arm64 libp11-kit0:arm64 libtasn1-6:arm64)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

missing=()
for p in "${HOST_PKGS[@]}" "${ARM_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends --no-remove "${missing[@]}"
  echo "install-deps-arm64: installed ${missing[*]}"
fi

LIBDIR=$ROOT/usr/lib/aarch64-linux-gnu
if [ ! -e "$LIBDIR/libcriterion.so" ] || [ ! -e "$LIBDIR/libnanomsg.so.5" ] || [ ! -e "$ROOT/criterion.pc" ] ||
   [ ! -e "$LIBDIR/libgnutls.so.30" ] || [ ! -e "$ROOT/libmicrohttpd.pc" ]; then
  dl=$(mktemp -d)
  (cd "$dl" && apt-get download -qq "${UNPACK_PKGS[@]}" 2>/dev/null) || {
    $SUDO apt-get update -qq
    (cd "$dl" && apt-get download -qq "${UNPACK_PKGS[@]}")
  }
  mkdir -p "$ROOT"
  for deb in "$dl"/*.deb; do dpkg -x "$deb" "$ROOT"; done
  version=$(dpkg-deb -f "$dl"/libcriterion-dev_*.deb Version)
  mhd_version=$(dpkg-deb -f "$dl"/libmicrohttpd-dev_*.deb Version)
  rm -rf "$dl"
  # Only what a dynamic link needs: the private dependencies are resolved by the loader.
  cat > "$ROOT/criterion.pc" <<PC
Name: criterion
Description: Criterion for arm64, unpacked by scripts/install-deps-arm64.sh
Version: ${version%%-*}
Libs: -L$LIBDIR -lcriterion
Cflags: -I$ROOT/usr/include
PC
  # rpath-link: the linker resolves libmicrohttpd's own dependency (GnuTLS) in the same root
  cat > "$ROOT/libmicrohttpd.pc" <<PC
Name: libmicrohttpd
Description: libmicrohttpd for arm64, unpacked by scripts/install-deps-arm64.sh
Version: ${mhd_version%%-*}
Libs: -L$LIBDIR -lmicrohttpd -Wl,-rpath-link,$LIBDIR
Cflags: -I$ROOT/usr/include
PC
  echo "install-deps-arm64: unpacked ${UNPACK_PKGS[*]} into $ROOT"
else
  echo "install-deps-arm64: all packages present"
fi
