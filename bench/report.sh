#!/usr/bin/env bash
# bench/report.sh: the 365-day morning report (issue 45), run on demand,
# never in the test command.
#   bash bench/report.sh [--runs N] [--days D] [--bin STEPQ] [--other STEPQ]
#                        [--perf DIR]
# A minutely schedule first seen D days ago (default 365: 525,600 slots,
# none of which ran, so each is one lookup of its job by key) in a fresh
# database made by each binary's own `stepq init`; then `stepq report
# --since Dd --json` is timed N times (default 3) per binary, alternating
# when --other names a second build, and the medians printed (wall and
# CPU seconds; runs in brackets). With --perf DIR, one more run of each is
# recorded with `perf record -g` (DWARF call graphs: the system's SQLite
# and libc have no frame pointers) into DIR/TAG.perf, and the share of its
# samples under taking SQLite's read lock (sqlite3BtreeBeginTrans, with
# sqlite3PagerSharedLock and the WAL's read mark under it), dropping it
# (sqlite3BtreeCommitPhaseTwo) and the fcntl locks and fstat calls beneath
# both is printed, with each run's count of those system calls (strace -c).
set -euo pipefail
runs=3 days=365 bin="" other="" perfdir=""
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) runs=$2; shift 2 ;;
    --days) days=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --other) other=$2; shift 2 ;;
    --perf) perfdir=$2; shift 2 ;;
    *) echo "report: unknown argument $1" >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
[ -n "$bin" ] || bin=$here/build/release/cli/stepq
out=$(mktemp -d /tmp/stepq-bench-report.XXXXXX)
trap 'rm -rf "$out"' EXIT
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
cat >"$out/stepq.json" <<'JSON'
{"schedules": [{"name": "minutely", "cron": "* * * * *", "tz": "UTC",
  "job": {"name": "m", "steps": [{"name": "s", "kind": "http",
          "http": {"method": "GET", "url": "http://127.0.0.1:9/x"}}]}}]}
JSON
export STEPQ_CONFIG=$out/stepq.json
unset STEPQ_DB
since=$((($(date +%s) - days * 86400) * 1000))
tags=(bin)
[ -z "$other" ] || tags+=(other)
binof() { if [ "$1" = bin ]; then echo "$bin"; else echo "$other"; fi; }
for tag in "${tags[@]}"; do
    b=$(binof $tag)
    "$b" --db "$out/$tag.db" init >/dev/null
    sqlite3 "$out/$tag.db" "INSERT INTO schedules (name, since, updated_at)
        VALUES ('minutely', $since, $since)"
done
# One timed report: "WALL CPU" in seconds on stdout.
one() {
    local b=$1 db=$2
    /usr/bin/time -f '%e %U %S' -o "$out/time" \
        "$b" --db "$db" report --since "${days}d" --json >"$out/report.json"
    awk '{printf "%.2f %.2f\n", $1, $2 + $3}' "$out/time"
}
for ((r = 1; r <= runs; r++)); do
    for tag in "${tags[@]}"; do
        b=$(binof $tag)
        one "$b" "$out/$tag.db" >>"$out/$tag.times"
        echo "run $r $tag: $(tail -1 "$out/$tag.times") (wall, CPU s)"
    done
done
slots=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["schedules"][0]; print(s["missed"] + s["ran"])' "$out/report.json")
echo "== $days days, $slots slots; medians of $runs ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
for tag in "${tags[@]}"; do
    b=$(binof $tag)
    w=$(cut -d' ' -f1 "$out/$tag.times" | median)
    c=$(cut -d' ' -f2 "$out/$tag.times" | median)
    echo "$tag: wall $w s ($(cut -d' ' -f1 "$out/$tag.times" | paste -sd,)), CPU $c s ($b)"
done
[ -n "$perfdir" ] || exit 0
mkdir -p "$perfdir"
for tag in "${tags[@]}"; do
    b=$(binof $tag)
    perf record -q -F 999 --call-graph dwarf,8192 -o "$perfdir/$tag.perf" -- \
        "$b" --db "$out/$tag.db" report --since "${days}d" --json >/dev/null 2>&1
    # Samples with one of these functions anywhere in their stack (perf
    # report --children): taking the read lock, dropping it, the calls.
    perf report -i "$perfdir/$tag.perf" --children --stdio --sort dso,sym \
        -g none 2>/dev/null |
        grep -E '\] (sqlite3_step|sqlite3BtreeBeginTrans|sqlite3PagerSharedLock|sqlite3BtreeCommitPhaseTwo|__fcntl64_nocancel_adjusted|__GI___fstatat64)$' |
        awk -v t=$tag '{printf "%s: %s of samples under %s\n", t, $1, $NF}'
    strace -f -c -o "$out/strace" -e trace=fcntl,fstat,newfstatat,access,stat \
        "$b" --db "$out/$tag.db" report --since "${days}d" --json >/dev/null
    awk -v t=$tag '$NF ~ /^(fcntl|fstat|newfstatat|access|stat)$/ {printf "%s: %s calls of %s\n", t, $4, $NF}' "$out/strace"
done
