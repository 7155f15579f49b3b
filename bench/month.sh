#!/usr/bin/env bash
# bench/month.sh: a month of nights in four minutes (issue 45), run on
# demand, never in the test command. The month at a million jobs, with
# serve, park items resolved each morning and a verdict, is bench/month.py.
#   bash bench/month.sh [--nights N] [--build DIR]
# Runs the test_month suite (one `stepq work` whose clock runs 11,520
# times as fast: 300 jobs enqueued each night, four nightly schedules, the
# morning report to a hook, retention of 3 days, `stepq backup` every 2 s)
# for N nights (default 30; a night is 7.5 s) and prints each night's
# database size and worker RSS, the largest -wal, and whether every
# night's jobs ended and each post went once.
set -euo pipefail
nights=30 build=""
while [ $# -gt 0 ]; do
    case "$1" in
    --nights) nights=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "month: unknown argument $1" >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
[ -n "$build" ] || build=$here/build/dev
STEPQ_MONTH_NIGHTS=$nights STEPQ_BIN=$build/cli/stepq STEPQ_SRC=$here \
    "$build/tests/test_month" 2>&1 | grep -v '^stepq \(info\|debug\)\|^{'
