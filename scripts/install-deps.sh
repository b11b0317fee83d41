#!/usr/bin/env bash
# Installs everything sluice needs to build, test, fuzz and benchmark on Debian 12.
# Used by the README, by .ci/run and by developers: keep it the single source of truth.
set -euo pipefail
PKGS=(build-essential cmake pkg-config liburing-dev libzstd-dev libcriterion-dev
      clang libclang-rt-14-dev llvm unicode-data gnuplot-nox util-linux valgrind libsimde-dev
      libedit-dev)   # libedit: the chat line (editing, history; BSD licence)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"; exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
