#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting and the
# arrows between the rooms (scripts/layers.py) and the sizes of functions
# and files (scripts/sizes.py), builds SQLite-only
# (scripts/sqlite-only.sh, about 10 s), then builds
# and runs every test twice: a Debug build with warnings as errors, and the
# same under AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh --browser

echo "== clang-format"
mapfile -t sources < <(find cli common queue spec policy park tier http worker view serve sched mock demo fuzz include lib \
    tests examples bench -name '*.[ch]' 2>/dev/null | sort)
clang-format --dry-run --Werror "${sources[@]}"

echo "== layers: includes and links against docs/architecture.md's arrows"
python3 scripts/layers.py

echo "== sizes: functions over 100 lines, files over 600 (scripts/sizes.py)"
python3 scripts/sizes.py --self-test
python3 scripts/sizes.py

echo "== a SQLite-only build (STEPQ_WITH_PG=OFF)"
bash scripts/sqlite-only.sh

echo "== Debug build and tests"
cmake --workflow --preset dev
echo "== ASan + UBSan build and tests"
cmake --workflow --preset ci
