#!/usr/bin/env bash
# A SQLite-only build (STEPQ_WITH_PG=OFF) configures and builds without
# libpq: the program and libstepq link no libpq, a program builds against
# the build tree's stepq.pc, and a PostgreSQL location is refused with
# exit 2 and a message naming the build. scripts/test.sh runs it (about
# 25 s on 2 cores: only the program and the library are built, without
# optimisation or debug info). Build folder: build/sqlite-only.
set -euo pipefail
cd "$(dirname "$0")/.."
b=build/sqlite-only
cmake -S . -B "$b" -DSTEPQ_WITH_PG=OFF -DSTEPQ_TESTS=OFF \
    -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >/dev/null
cmake --build "$b" -j2 --target stepq libstepq libstepq_static >/dev/null
fail() { echo "sqlite-only: $*" >&2; exit 1; }
for f in "$b/cli/stepq" "$b/lib/libstepq.so"; do
    if ldd "$f" | grep -q libpq; then fail "$f links libpq"; fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
set +e
out=$("$b/cli/stepq" --db postgresql://localhost/x status 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] || fail "a postgresql:// location: exit $rc, not 2: $out"
grep -q 'built without PostgreSQL (STEPQ_WITH_PG=OFF)' <<<"$out" ||
    fail "a postgresql:// location: no word of the build: $out"
PKG_CONFIG_PATH="$b/lib" cc examples/enqueue.c \
    $(PKG_CONFIG_PATH="$b/lib" pkg-config --cflags --libs stepq) \
    -o "$tmp/enqueue"
"$b/cli/stepq" --db "$tmp/q.db" init >/dev/null
LD_LIBRARY_PATH="$b/lib" "$tmp/enqueue" "$tmp/q.db" \
    examples/nightly-changelog.json >/dev/null ||
    fail "examples/enqueue.c against the build tree's stepq.pc"
echo "sqlite-only: builds and runs without libpq"
