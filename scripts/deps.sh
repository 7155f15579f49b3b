#!/usr/bin/env bash
# Installs the Debian packages stepq needs to build and test, when missing.
# Safe to run again: it only calls apt-get when a package is absent.
# --browser also installs what the web view's browser test needs: Debian's
# chromium and Node.js (18 or later: Debian 12's own is 18), and
# playwright-core and axe-core (npm ci in tests/browser/, pinned by its
# package-lock.json to a version that runs on Node.js 18; no browser is
# downloaded), and the open-source Portkey gateway that tests/test_gateway.c
# runs (npm ci in tests/gateway/, @portkey-ai/gateway pinned by its
# package-lock.json; tried on Node.js 20).
set -eu
cd "$(dirname "$0")/.."
browser=0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
[ "${1:-}" = "--browser" ] && browser=1
pkgs=(build-essential cmake pkg-config git python3
      libuv1-dev libcurl4-openssl-dev libsqlite3-dev libcjson-dev check
      libsubunit-dev libhttp-parser-dev libssl-dev clang-format sqlite3
      libpq-dev postgresql-15 postgresql-client-15 faketime strace
      libmicrohttpd-dev libmimalloc-dev prometheus nginx-light openssl
      systemd)
if [ $browser -eq 1 ]; then
    pkgs+=(chromium)
    # Node.js from the machine's apt sources unless a node is there (a
    # nodejs that bundles npm, as NodeSource's does, needs no npm package).
    if ! command -v node >/dev/null; then
        pkgs+=(nodejs)
    elif ! command -v npm >/dev/null; then
        pkgs+=(npm)
    fi
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ $browser -eq 1 ]; then
    if ! command -v npm >/dev/null; then # Debian's nodejs comes without it
        echo "deps: installing npm" >&2
        $SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
    fi
    major=$(node -p 'process.versions.node.split(".")[0]')
    if [ "$major" -lt 18 ]; then
        echo "deps: node $(node --version) is too old: playwright-core needs Node.js 18 or later" >&2
        exit 1
    fi
    echo "deps: npm packages of tests/browser (playwright-core, axe-core) and tests/gateway" >&2
    bash scripts/npm-ci.sh tests/browser
    bash scripts/npm-ci.sh tests/gateway
fi
