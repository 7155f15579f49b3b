#!/usr/bin/env bash
# The demo command: installs what is missing, builds, and runs stepq on a
# fresh database in a temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release >/dev/null
bin=build/release/cli/stepq
if "$bin" demo --help >/dev/null 2>&1; then
    exec "$bin" demo
fi
# Until `stepq demo` lands: enqueue the example job and show the queue.
tmp=$(mktemp -d)
"$bin" --db "$tmp/stepq.db" init
"$bin" --db "$tmp/stepq.db" enqueue examples/nightly-changelog.json --json
"$bin" --db "$tmp/stepq.db" jobs show 1
"$bin" --db "$tmp/stepq.db" status
echo "database kept at $tmp/stepq.db"
