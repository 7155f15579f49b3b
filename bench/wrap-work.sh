#!/bin/sh
# bench/wrap-work.sh: a --bin for bench/worker.py that runs `stepq work`
# under the command in $STEPQ_WRAP, and every other stepq command (init,
# enqueue, mock) as it is. Run on demand, never by the tests:
#
#   STEPQ_WRAP="perf record -F 1000 --call-graph dwarf -o /tmp/work.data --" \
#     python3 bench/worker.py --bin bench/wrap-work.sh --runs 1 --concurrency 256
#   STEPQ_WRAP="env LD_PRELOAD=$PWD/build/release/bench/libsqlcount.so \
#     SQLCOUNT_OUT=/tmp/sql.txt" python3 bench/worker.py --bin bench/wrap-work.sh ...
#   STEPQ_WRAP="strace -f -c -o /tmp/strace.txt" ...
#
# $STEPQ_REAL is the binary (default: the release build beside this file).
here=$(cd "$(dirname "$0")" && pwd)
real=${STEPQ_REAL:-$here/../build/release/cli/stepq}
for a in "$@"; do
    if [ "$a" = work ]; then
        # shellcheck disable=SC2086 # the wrapper is words on purpose
        exec ${STEPQ_WRAP:-} "$real" "$@"
    fi
done
exec "$real" "$@"
