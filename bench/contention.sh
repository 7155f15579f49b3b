#!/usr/bin/env bash
# bench/contention.sh: many processes on one SQLite file (issue 45), run
# on demand, never in the test command.
#   bash bench/contention.sh [--runs N] [--seconds S] [--bin STEPQ]
#                            [--other STEPQ]
# Runs tests/soak/contention.sh (8 `stepq work`, `serve` under API load, 4
# enqueuers in a loop, `report` every second, on one file) N times (default
# 3) for S seconds each (default 600), and prints each run's invariants and
# figures, then the medians: jobs finished per second while enqueuing, the
# latency of one `stepq enqueue` of 5 jobs (median, p99, max; the whole
# process) and the longest lock wait of any process, with the machine's
# load average before and after each run (it is shared). --other runs a second binary (another build) in the same
# session, alternating with the first, and prints its medians beside.
set -euo pipefail
runs=3 secs=600 bin="" other=""
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) runs=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --other) other=$2; shift 2 ;;
    *) echo "contention: unknown argument $1" >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
[ -n "$bin" ] || bin=$here/build/dev/cli/stepq
out=$(mktemp -d /tmp/stepq-bench-contention.XXXXXX)
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
fail=0
for ((r = 1; r <= runs; r++)); do
    for b in "$bin" $other; do
        tag=$([ "$b" = "$bin" ] && echo bin || echo other)
        log=$out/$tag.$r.txt
        load0=$(cut -d' ' -f1-3 /proc/loadavg)
        bash "$here/tests/soak/contention.sh" --seconds "$secs" --bin "$b" \
            --dir "$out/$tag.$r" >"$log" 2>&1 || fail=1
        echo "== $tag run $r ($b), load average $load0 before, $(cut -d' ' -f1-3 /proc/loadavg) after"
        cat "$log"
        rm -rf "$out/$tag.$r"
    done
done
echo "== medians of $runs runs of ${secs}s ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
for tag in bin other; do
    ls "$out"/$tag.*.txt >/dev/null 2>&1 || continue
    js=$(sed -n 's/.*while enqueuing: \([0-9]*\) jobs\/s/\1/p' "$out"/$tag.*.txt | median)
    p50=$(sed -n 's/.* median \([0-9.]*\) ms.*/\1/p' "$out"/$tag.*.txt | median)
    p99=$(sed -n 's/.* p99 \([0-9.]*\) ms.*/\1/p' "$out"/$tag.*.txt | median)
    max=$(sed -n 's/.* max \([0-9.]*\) ms.*/\1/p' "$out"/$tag.*.txt | median)
    lw=$(sed -n 's/.*longest lock wait: \([0-9.]*\) ms.*/\1/p' "$out"/$tag.*.txt | median)
    echo "$tag: $js jobs/s; enqueue of 5 jobs: median $p50 ms, p99 $p99 ms, max $max ms; longest lock wait $lw ms"
done
rm -rf "$out"
exit $fail
