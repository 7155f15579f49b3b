#!/usr/bin/env bash
# Runs test suites with every stepq process they start under valgrind
# memcheck (a build without sanitizers). A memcheck error in stepq makes it
# exit 99, which fails the test that ran it. On demand, not in CI: it is
# 20-50 times slower.
#   bash scripts/valgrind.sh                 # the integration suites
#   bash scripts/valgrind.sh test_worker     # one suite (a ctest regex)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
command -v valgrind >/dev/null || apt-get install -y -qq valgrind >/dev/null
build=build/valgrind
# memcheck replaces the C library's malloc, so the build keeps it.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DSTEPQ_MIMALLOC=OFF >/dev/null
cmake --build "$build" -j2 >/dev/null
wrap=$PWD/$build/stepq-under-valgrind
cat > "$wrap" <<WRAP
#!/bin/sh
exec valgrind -q --error-exitcode=99 --leak-check=full \\
    --errors-for-leak-kinds=definite "$PWD/$build/cli/stepq" "\$@"
WRAP
chmod +x "$wrap"
cd "$build"
STEPQ_TEST_BIN=$wrap CK_TIMEOUT_MULTIPLIER=20 \
    ctest --output-on-failure -R "${1:-test_cli|test_worker|test_park|test_hostile}"
