#!/usr/bin/env bash
# Installs the Debian packages stepq needs to build and test, when missing.
# Safe to run again: it only calls apt-get when a package is absent.
set -eu
pkgs=(build-essential cmake pkg-config git
      libuv1-dev libcurl4-openssl-dev libsqlite3-dev libcjson-dev check
      libsubunit-dev libhttp-parser-dev libssl-dev clang-format sqlite3
      libpq-dev postgresql-15 postgresql-client-15 faketime
      libmicrohttpd-dev prometheus)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
