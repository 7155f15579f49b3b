#!/usr/bin/env bash
# tests/soak/contention.sh: many processes on one SQLite file (issue 45).
#   bash tests/soak/contention.sh [--seconds S] [--workers W] [--enqueuers E]
#                                 [--bin STEPQ] [--dir DIR]
# For S seconds (default 20): W `stepq work` (default 8), one `stepq serve`
# answering a client that asks for its job list, status and metrics in a
# loop, E enqueuers (default 4) each running `stepq enqueue` of 5 jobs in
# a loop (as cron would), and `stepq report` every second, all on one
# file. Every job is one side-effecting http post without a key, to its
# own path, so a second send is a duplicate. Then the enqueuers stop, the
# workers finish the backlog and the invariants are checked:
#   - every enqueue, report and API call succeeded (no busy error reached
#     a user), and no process logged "database is locked";
#   - every job enqueued is in the file and succeeded;
#   - the mock saw each job's post exactly once;
#   - no wait for the lock ran out, and the longest wait of any process
#     stayed below the bound (lock_wait_ms, 5 s): each process says its
#     waits when it closes the file (`lock waits: N, T ms in all, longest
#     L ms, R ran out`, at info: every process runs with STEPQ_LOG=info),
#     and serve's /metrics, scraped at the end, shows its own.
# It prints the throughput (jobs finished per second while enqueuing),
# the enqueue latency (median, p99, max: the whole `stepq enqueue`
# process, start to exit), the longest lock wait of each kind of process
# and of all, and the size of the file and its -wal. Exit 0 when every
# invariant held, 1 when one was violated, 2 on bad usage or setup.
set -euo pipefail
secs=20 workers=8 enqueuers=4 bin=${STEPQ_BIN:-} dir=""
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) secs=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --enqueuers) enqueuers=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    *) echo "contention: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ -z "$bin" ]; then
    bin=$(cd "$(dirname "$0")/../.." && pwd)/build/dev/cli/stepq
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -x "$bin" ] || { echo "contention: no stepq binary at $bin" >&2; exit 2; }
for tool in curl sqlite3; do
    command -v $tool >/dev/null || { echo "contention: needs $tool" >&2; exit 2; }
done
[ -n "$dir" ] || dir=$(mktemp -d /tmp/stepq-contention.XXXXXX)
mkdir -p "$dir"
cd "$dir"
db=$dir/q.db
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

cat >script.json <<'JSON'
{"routes": [{"path": "/comments", "latency_ms": 20, "jitter_ms": 30}]}
JSON
coproc MOCK { exec "$bin" mock --port 0 --script script.json --log mock.log; }
mock_pid=$MOCK_PID
pids+=("$mock_pid")
read -r -t 5 line <&"${MOCK[0]}" || { echo "contention: no mock" >&2; exit 2; }
port=${line##*:}
cat >stepq.json <<JSON
{"worker": {"lease_s": 30, "concurrency": 16, "idle_poll_ms": 50}}
JSON
export STEPQ_CONFIG=$dir/stepq.json STEPQ_TOKEN=contention-token-0123456789
export STEPQ_LOG=info # each process's lock waits, said at its close
lock_wait_ms=5000     # the bound (q_open_opts' default)
unset STEPQ_DB
"$bin" --db "$db" init >/dev/null

for ((i = 1; i <= workers; i++)); do
    "$bin" --db "$db" work --worker-id "w$i" 2>"work$i.log" &
    pids+=($!)
done
"$bin" --db "$db" serve --listen 127.0.0.1:0 >serve.out 2>serve.log &
pids+=($!)
for _ in $(seq 100); do
    line=$(grep -m1 '^listening' serve.out || true)
    [ -n "$line" ] && break
    sleep 0.1
done
[ -n "$line" ] || { echo "contention: no serve" >&2; exit 2; }
sport=${line##*:}

# One job first, so that the API's /v1/jobs/1 is there from the start.
echo '{"name": "c", "steps": [{"name": "post", "kind": "http", "http": {"method": "POST", "url": "http://127.0.0.1:'$port'/comments/0", "body": {}}}]}' >jobs.0
"$bin" --db "$db" enqueue jobs.0 >/dev/null
echo 1 >count.0
t_end=$(($(date +%s) + secs))
# An enqueuer: `stepq enqueue` of 5 jobs, each posting to its own path,
# then its latency in ns on lat.E and its exit code on rc.E.
enqueuer() {
    local e=$1 k=0 t0 t1 rc
    while [ "$(date +%s)" -lt $t_end ]; do
        k=$((k + 1))
        for j in 1 2 3 4 5; do
            echo '{"name": "c", "steps": [{"name": "post", "kind": "http", "http": {"method": "POST", "url": "http://127.0.0.1:'$port'/comments/'$e-$k-$j'", "body": {"n": '$j'}}}]}'
        done >"jobs.$e"
        t0=$(date +%s%N)
        rc=0
        "$bin" --db "$db" enqueue "jobs.$e" >/dev/null 2>>"enqueue$e.log" || rc=$?
        t1=$(date +%s%N)
        echo $((t1 - t0)) >>"lat.$e"
        echo "$rc" >>"rc.$e"
        [ $rc -eq 0 ] && echo 5 >>"count.$e"
    done
}
# The API client: each answer's status code, one a line.
api_client() {
    local auth="Authorization: Bearer $STEPQ_TOKEN"
    while [ "$(date +%s)" -lt $t_end ]; do
        for p in /v1/jobs?limit=50 /v1/status /metrics /v1/jobs/1; do
            curl -s -o /dev/null -w '%{http_code}\n' -H "$auth" \
                "http://127.0.0.1:$sport$p" >>api.codes || echo 000 >>api.codes
        done
    done
}
reporter() {
    while [ "$(date +%s)" -lt $t_end ]; do
        rc=0
        "$bin" --db "$db" report --json >/dev/null 2>>report.log || rc=$?
        echo $rc >>report.rc
        sleep 1
    done
}
t0=$(date +%s%N)
bg=()
for ((e = 1; e <= enqueuers; e++)); do
    enqueuer $e &
    bg+=($!)
done
api_client &
bg+=($!)
reporter &
bg+=($!)
for p in "${bg[@]}"; do wait "$p"; done
t1=$(date +%s%N)
done_at_end=$(sqlite3 "$db" "SELECT count(*) FROM jobs WHERE state = 2")

# The backlog: every job must end (deadline 120 s).
total=$(cat count.* 2>/dev/null | awk '{s += $1} END {print s + 0}')
deadline=$(($(date +%s) + 120))
while :; do
    open=$(sqlite3 "$db" "SELECT count(*) FROM jobs WHERE state NOT IN (2, 3, 4, 5)")
    [ "$open" -eq 0 ] && break
    [ "$(date +%s)" -lt $deadline ] || break
    sleep 0.2
done
curl -s -H "Authorization: Bearer $STEPQ_TOKEN" \
    "http://127.0.0.1:$sport/metrics" >metrics.end || true
for p in "${pids[@]}"; do
    [ "$p" = "$mock_pid" ] || kill -TERM "$p" 2>/dev/null || true
done
sleep 1
kill "$mock_pid" 2>/dev/null || true
wait 2>/dev/null || true
pids=()

fail=0
report() { # name held|VIOLATED detail
    printf '%-24s %-8s %s\n' "$1" "$2" "$3"
    [ "$2" = held ] || fail=1
}
held() { if [ "$1" -eq 0 ]; then echo held; else echo VIOLATED; fi; }
bad_rc=$(cat rc.* report.rc | awk '$1 != 0' | wc -l)
runs=$(cat rc.* | wc -l)
report user_calls_ok "$(held "$bad_rc")" \
    "$bad_rc of $runs enqueues and $(wc -l <report.rc) reports failed"
bad_api=$(awk '$1 != 200' api.codes | wc -l)
report api_calls_ok "$(held "$bad_api")" \
    "$bad_api of $(wc -l <api.codes) API answers not 200"
locked=$(cat work*.log serve.log enqueue*.log report.log 2>/dev/null |
    grep -c -i 'database is locked\|stayed locked\|is busy' || true)
report no_busy_error "$(held "$locked")" "$locked lines say the database was busy"
n=$(sqlite3 "$db" "SELECT count(*) FROM jobs")
report no_lost_job "$(held $((n - total)))" "$n jobs in the file, $total enqueued"
ok=$(sqlite3 "$db" "SELECT count(*) FROM jobs WHERE state = 2")
report every_job_ended "$(held $((n - ok)))" "$ok of $n succeeded"
sed -n 's/.*"path":"\/comments\/\([^"]*\)".*/\1/p' mock.log | sort | uniq -c >paths.txt
dups=$(awk '$1 > 1' paths.txt | wc -l)
report sent_once "$(held "$dups")" \
    "$dups of $(wc -l <paths.txt) posts received more than once"
missing=$((n - $(wc -l <paths.txt)))
report every_post_sent "$(held "$missing")" "$missing jobs' posts never reached the mock"
# Each process's waits: "KIND COUNT TOTAL_MS LONGEST_MS RAN_OUT" a line.
for kind in work serve enqueue report; do
    cat "$kind"*.log 2>/dev/null |
        sed -n 's/.*lock waits: \([0-9]*\), \([0-9.]*\) ms in all, longest \([0-9.]*\) ms, \([0-9]*\) ran out.*/\1 \2 \3 \4/p' |
        sed "s/^/$kind /"
done >waits.txt
longest() { awk -v k="$1" '$1 ~ k && $4 > m {m = $4} END {printf "%.1f", m}' waits.txt; }
wait_max=$(longest .)
ran_out=$(awk '{s += $5} END {print s + 0}' waits.txt)
over=$(awk -v b=$lock_wait_ms '$4 >= b' waits.txt | wc -l)
# Eight workers beside enqueuers always meet each other's locks: no line
# at all would mean the processes stopped saying their waits.
[ -s waits.txt ] || over=1
report lock_wait_bounded "$(held $((ran_out + over)))" \
    "longest ${wait_max} ms of $lock_wait_ms, $ran_out waits ran out, $(wc -l <waits.txt) processes said theirs"
metric=$(sed -n 's/^stepq_store_lock_wait_longest_seconds \(.*\)/\1/p' metrics.end)
report serve_metric "$(held "$([ -n "$metric" ]; echo $?)")" \
    "/metrics: stepq_store_lock_wait_longest_seconds ${metric:-missing}"

ms=$(((t1 - t0) / 1000000))
cat lat.* | sort -n >lat.sorted
nl=$(wc -l <lat.sorted)
pct() { sed -n "$(((nl * $1 + 99) / 100))p" lat.sorted | awk '{printf "%.1f", $1 / 1e6}'; }
echo "contention: $workers workers, $enqueuers enqueuers, serve and report for ${secs}s"
echo "contention: $done_at_end jobs finished while enqueuing: $((done_at_end * 1000 / ms)) jobs/s"
echo "contention: enqueue of 5 jobs ($nl runs): median $(pct 50) ms, p99 $(pct 99) ms, max $(pct 100) ms"
echo "contention: lock waits: $(awk '{n += $2; t += $3} END {printf "%d, %.1f ms in all", n, t}' waits.txt) in $(wc -l <waits.txt) processes, $ran_out ran out"
echo "contention: longest lock wait: $wait_max ms (workers $(longest work) ms, serve $(longest serve) ms, enqueue $(longest enqueue) ms, report $(longest report) ms)"
echo "contention: file $(stat -c %s "$db") bytes, wal $(stat -c %s "$db-wal" 2>/dev/null || echo 0) bytes, dir $dir"
if [ $fail -eq 0 ]; then
    echo "contention: all invariants held"
else
    echo "contention: INVARIANT VIOLATED"
fi
exit $fail
