#!/usr/bin/env bash
# npm-ci.sh DIR: installs DIR's npm packages exactly as its
# package-lock.json pins them (npm ci), when they are missing or older than
# the lock; otherwise does nothing. Used by scripts/deps.sh --browser and by
# ctest's fixture of the browser test (tests/CMakeLists.txt), so that a
# clean clone's `ctest` installs them too. Needs the npm registry only when
# it installs.
set -eu
cd "$(dirname "$0")/../$1"
if [ ! -f node_modules/.package-lock.json ] ||
   [ package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "npm ci in $1" >&2
    npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi
