#!/usr/bin/env bash
# The demo command: installs what is missing, builds, and runs `stepq demo`
# (mock tiers on loopback, a fresh database in a temporary folder, the real
# worker, then a summary with the commands to inspect what was parked).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release >/dev/null
exec build/release/cli/stepq demo "$@"
