#!/usr/bin/env bash
# bench/month.sh: a month of nights in five minutes (issue 45), run on
# demand, never in the test command.
#   bash bench/month.sh [--nights N] [--build DIR]
# Runs the test_month suite (one `stepq work` whose clock runs 8,640
# times as fast: four nightly schedules, the morning report to a hook,
# retention of 3 days, `stepq backup` every 2 s) for N nights (default
# 30; a night is 10 s) and prints each night's database size, the largest
# -wal, and whether every night's jobs ended and each post went once.
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
