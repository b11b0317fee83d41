#!/usr/bin/env bash
# Installs everything sluice needs to build, test, fuzz and benchmark on Debian 12.
# Used by the README, by .ci/run and by developers: keep it the single source of truth.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(build-essential cmake pkg-config liburing-dev libzstd-dev libcriterion-dev
      clang libclang-rt-14-dev llvm unicode-data gnuplot-nox util-linux valgrind libsimde-dev
      libedit-dev   # libedit: the chat line (editing, history; BSD licence)
      libmicrohttpd-dev libjansson-dev curl    # sluice serve: HTTP server, JSON; curl drives its tests
      chromium)   # the browser test of serve's web page (tests/serve/webui.mjs, driven by playwright-core)
missing=()
for p in "${PKGS[@]}"; do   # (a held package reads "hold ok installed")
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed$' || missing+=("$p")
done
# node and npm run the OpenAI-client test of `sluice serve`; any node >= 18 will do (a machine may
# have one from elsewhere: only install Debian's when there is none)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
else
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "install-deps: installed ${missing[*]}"
fi
# The official `openai` npm client and playwright-core for tests/serve (exact versions from its package-lock.json),
# into the project-local tests/serve/node_modules; reinstalled when the lock file changes.
if ! cmp -s tests/serve/package-lock.json tests/serve/node_modules/.package-lock.json.installed 2>/dev/null; then
  npm ci --prefix tests/serve --no-audit --no-fund --loglevel=error
  cp tests/serve/package-lock.json tests/serve/node_modules/.package-lock.json.installed
  echo "install-deps: installed the npm packages of tests/serve"
fi
