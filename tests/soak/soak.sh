#!/usr/bin/env bash
# tests/soak/soak.sh: crash soak (issue 8). Run on demand:
#   bash tests/soak/soak.sh [--jobs N] [--kills K] [--seed S] [--bin STEPQ]
#                           [--dir DIR] [--db LOCATION] [--inject-duplicate]
#                           [--pause]
# Enqueues N jobs (default 2000) mixing replayable chat steps and
# side-effecting http steps with and without idempotency keys, against
# `stepq mock` answering with random 429s, 5xx, storms, delays and
# mid-body closes. A worker is killed with SIGKILL at a random moment K
# times (default 50) and restarted each time; then `stepq work --drain`
# runs to the end and the invariants are checked and printed. Exit 0 when
# every invariant held, 1 when one was violated, 2 on bad usage or setup.
# --db: the store (default soak.db in DIR); a postgres:// or postgresql://
# URL runs the soak on PostgreSQL and checks the invariants with psql.
# --inject-duplicate sends one no-key side-effecting request a second time
# behind the worker's back, to show the checker catches it (exit 1).
# --pause: a second worker runs all along, and each worker to be killed is
# first stopped (SIGSTOP) for 3-4 s, longer than its 2 s lease, and let go
# on (SIGCONT) for up to 0.5 s: a host that stalls (a paused VM, a lost
# network) while the other reclaims its jobs, then wakes up with its
# requests and writes still in hand.
set -euo pipefail
jobs=2000 kills=50 seed=$$ bin=${STEPQ_BIN:-} dir="" inject=0 db=soak.db
pause=0
while [ $# -gt 0 ]; do
    case "$1" in
    --jobs) jobs=$2; shift 2 ;;
    --kills) kills=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --db) db=$2; shift 2 ;;
    --inject-duplicate) inject=1; shift ;;
    --pause) pause=1; shift ;;
    *) echo "soak: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ -z "$bin" ]; then
    bin=$(cd "$(dirname "$0")/../.." && pwd)/build/dev/cli/stepq
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -x "$bin" ] || { echo "soak: no stepq binary at $bin (--bin)" >&2; exit 2; }
case "$db" in
postgres://* | postgresql://*) dialect=pg tools=psql ;;
*) dialect=sqlite tools=sqlite3 db=${db#sqlite:} ;;
esac
for tool in $tools; do
    command -v $tool >/dev/null || { echo "soak: needs $tool" >&2; exit 2; }
done
if [ -z "$dir" ]; then
    dir=$(mktemp -d /tmp/stepq-soak.XXXXXX)
fi
mkdir -p "$dir"
cd "$dir"
RANDOM=$seed
t0=$(date +%s)
mock_pid="" worker_pid="" steady_pid=""
cleanup() {
    [ -n "$worker_pid" ] && kill -9 "$worker_pid" 2>/dev/null || true
    [ -n "$steady_pid" ] && kill -9 "$steady_pid" 2>/dev/null || true
    [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null || true
    wait 2>/dev/null || true
}
trap cleanup EXIT

# The mock: chat tiers with throttles, storms, 5xx and jitter; the
# catch-all (http steps) with 5xx, delays and closes mid-body, but no 429,
# so that any second request of a no-key step is a real duplicate.
cat >script.json <<JSON
{"seed": $seed, "latency_ms": 5, "jitter_ms": 40, "loop": true,
 "answers": [{"count": 6}, {"status": 500}, {"delay_ms": 300},
             {"count": 3}, {"status": 503}, {"fault": "close_mid_body"},
             {"count": 4}, {"delay_ms": 80}],
 "routes": [
  {"path": "/free", "latency_ms": 5, "jitter_ms": 60, "loop": true,
   "storm": {"status": 503, "requests": 30, "after": 150},
   "answers": [{"count": 3}, {"status": 429, "headers": {"Retry-After": "1"}},
               {"status": 500}, {"count": 2}, {"status": 502},
               {"delay_ms": 400}, {"count": 2},
               {"status": 429, "headers": {"retry-after-ms": "300"}},
               {"fault": "close_mid_body"}]},
  {"path": "/local", "latency_ms": 5, "jitter_ms": 30, "loop": true,
   "answers": [{"count": 7}, {"status": 500}, {"delay_ms": 200}]}]}
JSON
coproc MOCK { exec "$bin" mock --port 0 --script script.json --log mock.log; }
mock_pid=$MOCK_PID
read -r -t 5 line <&"${MOCK[0]}" || { echo "soak: mock did not start" >&2; exit 2; }
port=${line##*:}
cat >stepq.json <<JSON
{"worker": {"lease_s": 2, "concurrency": 64},
 "policy": {"backoff_base_s": 0.05, "backoff_cap_s": 0.5, "switch_wait_s": 30},
 "tiers": [
  {"name": "free", "base_url": "http://127.0.0.1:$port/free/v1",
   "model": "small", "timeout_s": 3, "breaker": {"failures": 8, "cooldown_s": 1}},
  {"name": "local", "base_url": "http://127.0.0.1:$port/local/v1",
   "model": "llama", "timeout_s": 3}]}
JSON
export STEPQ_CONFIG=$dir/stepq.json
unset STEPQ_DB

# Jobs: a replayable chat step, then an http step on its own path: with an
# idempotency key (/idem/I) for even I, without (/effect/I) for odd I.
# Every third job has a second chat step between them.
for ((i = 1; i <= jobs; i++)); do
    chat='{"name": "ask", "max_attempts": 3, "token_budget": 4000, "max_total_tokens": 200, "request": {"messages": [{"role": "user", "content": "job '$i'"}], "max_tokens": 50}}'
    mid=""
    if ((i % 3 == 0)); then
        mid=', {"name": "again", "max_attempts": 2, "request": {"messages": [{"role": "user", "content": "{{steps.ask.output}}"}]}}'
    fi
    if ((i % 2 == 0)); then
        http='{"name": "post", "kind": "http", "max_attempts": 3, "idempotency_key": "k-'$i'", "http": {"method": "POST", "url": "http://127.0.0.1:'$port'/idem/'$i'", "body": {"text": "{{steps.ask.output}}"}}}'
    else
        http='{"name": "post", "kind": "http", "max_attempts": 3, "http": {"method": "POST", "url": "http://127.0.0.1:'$port'/effect/'$i'", "body": {"text": "{{steps.ask.output}}"}}}'
    fi
    echo '{"name": "soak-'$i'", "key": "soak-'$i'", "steps": ['"$chat$mid, $http"']}'
done >jobs.jsonl
"$bin" --db "$db" init >/dev/null
"$bin" --db "$db" enqueue jobs.jsonl >/dev/null

# The request paths of the mock log, one a line (its key order is fixed:
# seq, ts_ms, t_ms, method, path).
paths() {
    sed -n 's/^{"seq":[0-9]*,"ts_ms":[0-9]*,"t_ms":[0-9]*,"method":"[A-Z]*","path":"\([^"]*\)".*/\1/p' mock.log
}

# Kill loop: each worker runs until the mock has seen at least one more
# request (so it is mid-work), then for a random 0-999 ms, then SIGKILL.
logged() { if [ -f mock.log ]; then wc -l <mock.log; else echo 0; fi; }
survived=0 paused=0
if [ $pause -eq 1 ]; then
    "$bin" --db "$db" work --worker-id soak-steady 2>>work.log &
    steady_pid=$!
fi
for ((k = 1; k <= kills; k++)); do
    before=$(logged)
    "$bin" --db "$db" work --worker-id "soak-$k" 2>>work.log &
    worker_pid=$!
    deadline=$(($(date +%s) + 10))
    while [ "$(logged)" -le "$before" ] && [ "$(date +%s)" -lt $deadline ]; do
        kill -0 $worker_pid 2>/dev/null || break
        sleep 0.02
    done
    sleep "0.$(printf '%03d' $((RANDOM % 1000)))"
    if [ $pause -eq 1 ] && kill -STOP $worker_pid 2>/dev/null; then
        sleep "3.$(printf '%03d' $((RANDOM % 1000)))"
        kill -CONT $worker_pid 2>/dev/null || true
        sleep "0.$(printf '%03d' $((RANDOM % 500)))"
        paused=$((paused + 1))
    fi
    if kill -9 $worker_pid 2>/dev/null; then
        survived=$((survived + 1))
    fi
    wait $worker_pid 2>/dev/null || true
    worker_pid=""
done
if [ -n "$steady_pid" ]; then
    kill -9 "$steady_pid" 2>/dev/null || true
    wait "$steady_pid" 2>/dev/null || true
    steady_pid=""
fi
kill_s=$(($(date +%s) - t0))

# Drain: leases of the killed workers expire (lease_s 2), then everything
# runs to a final state. Several rounds, because --drain stops when nothing
# is due within 60 s, and a later run_at may still be pending.
drain_rc=1
for round in 1 2 3; do
    if timeout 900 "$bin" --db "$db" work --drain --worker-id "drain-$round" 2>>work.log; then
        drain_rc=0
        break
    fi
done

if [ $inject -eq 1 ]; then
    first=$(paths | grep -m1 '^/effect/')
    exec 3<>"/dev/tcp/127.0.0.1/$port"
    printf 'POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}' "$first" >&3
    cat <&3 >/dev/null
    exec 3<&-
fi
kill "$mock_pid" 2>/dev/null || true
wait "$mock_pid" 2>/dev/null || true
mock_pid=""

# ---- invariants -------------------------------------------------------
fail=0
report() { # name held|VIOLATED detail
    printf '%-28s %-8s %s\n' "$1" "$2" "$3"
    [ "$2" = held ] || fail=1
}
# The checker's SQL is the same on both backends but for JSON access (jx:
# a step's field as text, jn: as a number), string aggregation and the
# integrity check.
if [ $dialect = pg ]; then
    q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$db" -c "$1"; }
    jx() { echo "(j.spec::jsonb -> 'steps' -> ($1)::int ->> '$2')"; }
    jn() { echo "($(jx "$1" "$2"))::numeric"; }
    concat=string_agg
    integrity="SELECT CASE WHEN count(*) = 0 THEN 'ok' ELSE count(*) ||
        ' steps without their job' END FROM steps s WHERE NOT EXISTS
        (SELECT 1 FROM jobs j WHERE j.id = s.job_id)"
else
    q() { sqlite3 -batch -noheader "$db" "$@"; }
    jx() { echo "json_extract(j.spec, '\$.steps[' || $1 || '].$2')"; }
    jn() { jx "$@"; }
    concat=group_concat
    integrity="PRAGMA integrity_check"
fi
paths | sort | uniq -c >paths.txt
[ "$(wc -l <paths.txt)" -gt 0 ] || { echo "soak: empty mock log" >&2; exit 2; }

n=$(q "SELECT count(*) FROM jobs")
report enqueued "$([ "$n" -eq "$jobs" ] && echo held || echo VIOLATED)" \
    "$n of $jobs jobs in the database"
report drain_exit_0 "$([ $drain_rc -eq 0 ] && echo held || echo VIOLATED)" \
    "stepq work --drain exited $drain_rc"
open=$(q "SELECT count(*) FROM jobs WHERE state NOT IN (2, 3, 4)")
states=$(q "SELECT $concat(c, ' ') FROM (SELECT CASE state WHEN 0 THEN
    'queued' WHEN 1 THEN 'running' WHEN 2 THEN 'succeeded' WHEN 3 THEN
    'failed' WHEN 4 THEN 'parked' ELSE 'cancelled' END || '=' || count(*) AS c
    FROM jobs GROUP BY state) AS per_state")
report final_or_parked "$([ "$open" -eq 0 ] && echo held || echo VIOLATED)" \
    "$open jobs not succeeded/failed/parked ($states)"
bad=$(q "SELECT count(*) FROM jobs j WHERE state = 2 AND EXISTS (SELECT 1
    FROM steps s WHERE s.job_id = j.id AND s.state NOT IN (2, 5))")
report succeeded_steps "$([ "$bad" -eq 0 ] && echo held || echo VIOLATED)" \
    "$bad succeeded jobs with a step not succeeded/skipped"
dups=$(awk '$2 ~ /^\/effect\// && $1 > 1' paths.txt | wc -l)
sent=$(awk '$2 ~ /^\/effect\//' paths.txt | wc -l)
report no_key_sent_once "$([ "$dups" -eq 0 ] && echo held || echo VIOLATED)" \
    "$dups of $sent no-key side-effecting steps received more than once"
# In doubt: an attempt of a no-key http step without a result, or settled
# as in doubt by the next worker (outcome unknown, reason in_doubt: the
# worker died while it was in flight), or decided park_for_human. Its step
# must be parked with a park item, and no later attempt may follow it.
nokey="$(jx a.step kind) = 'http' AND $(jx a.step idempotency_key) IS NULL"
doubt="(a.finished_at IS NULL OR a.reason = 'in_doubt' OR
    a.decision = 'park_for_human')"
in_doubt=$(q "SELECT count(DISTINCT a.job_id) FROM attempts a JOIN jobs j ON
    j.id = a.job_id WHERE $doubt AND $nokey")
crashed=$(q "SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id
    WHERE (a.finished_at IS NULL OR a.reason = 'in_doubt') AND $nokey")
unparked=$(q "SELECT count(DISTINCT a.job_id) FROM attempts a JOIN jobs j ON
    j.id = a.job_id JOIN steps s ON s.job_id = a.job_id AND s.idx = a.step
    WHERE $doubt AND $nokey AND (s.state <> 4 OR NOT EXISTS (SELECT 1
    FROM park p WHERE p.job_id = a.job_id AND p.step = a.step)
    OR EXISTS (SELECT 1 FROM attempts b WHERE b.job_id = a.job_id AND
    b.step = a.step AND b.attempt > a.attempt))")
report in_doubt_parked "$([ "$unparked" -eq 0 ] && echo held || echo VIOLATED)" \
    "$unparked of $in_doubt no-key steps in doubt ($crashed by a kill) not parked or sent again"
parked_doubt=$(q "SELECT count(*) FROM park WHERE reason = 'in_doubt'")
# Attempts: sends per (job, step, tier) that were not soft throttles
# (throttle waits do not use attempts, docs/reference.md) stay within max_attempts; an
# attempt without a result (in doubt) counts as a send.
over=$(q "SELECT count(*) FROM (SELECT a.job_id, a.step, a.tier, count(*) AS n,
    max(coalesce($(jn a.step max_attempts), 3)) AS m FROM attempts a
    JOIN jobs j ON j.id = a.job_id WHERE coalesce(a.outcome, '') <> 'soft_throttle'
    GROUP BY a.job_id, a.step, a.tier) AS sends WHERE n > m")
maxn=$(q "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM attempts
    WHERE coalesce(outcome, '') <> 'soft_throttle' GROUP BY job_id, step, tier)
    AS sends")
report attempts_per_tier "$([ "$over" -eq 0 ] && echo held || echo VIOLATED)" \
    "$over (job, step, tier) over max_attempts; most non-throttle sends $maxn"
thr=$(q "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM attempts
    WHERE outcome = 'soft_throttle' GROUP BY job_id, step) AS waits")
report throttle_waits "$([ "$thr" -le 22 ] && echo held || echo VIOLATED)" \
    "most soft-throttle answers of one step: $thr (max_throttle_waits 20, +1 per tier)"
# Token cap: no request was sent that would pass its step's
# max_total_tokens by the worker's own numbers: the tokens charged to the
# step's earlier attempts (reported usage, or the estimate of one that got
# no answer) plus the request's estimate. token_budget is the size of one
# request (docs/reference.md), not a cap.
cap=$(jn a.step max_total_tokens)
tok=$(q "SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id
    WHERE $cap IS NOT NULL AND a.est_tokens + (SELECT coalesce(sum(
    coalesce(b.tokens, b.est_tokens)), 0) FROM attempts b WHERE
    b.job_id = a.job_id AND b.step = a.step AND b.attempt < a.attempt) > $cap")
capped=$(q "SELECT count(*) FROM jobs j WHERE error LIKE '%budget_spent%'")
most=$(q "SELECT coalesce(max(s.tokens), 0) FROM steps s JOIN jobs j ON
    j.id = s.job_id WHERE $(jn s.idx max_total_tokens) IS NOT NULL")
report max_total_tokens "$([ "$tok" -eq 0 ] && echo held || echo VIOLATED)" \
    "$tok sends past their step's max_total_tokens; $capped jobs stopped by it (budget_spent); most charged to a capped step $most"
ic=$(q "$integrity")
report integrity_check "$([ "$ic" = ok ] && echo held || echo VIOLATED)" "$ic"
nreq=$(wc -l <mock.log)
natt=$(q "SELECT count(*) FROM attempts")
[ $pause -eq 0 ] || echo "soak: $paused workers paused past their lease beside a steady one"
echo "soak: $jobs jobs, $survived of $kills kills delivered and recovered from, $nreq requests," \
    "$natt attempts, $parked_doubt parked in_doubt, kills ${kill_s}s," \
    "total $(($(date +%s) - t0))s, dir $dir"
if [ $fail -eq 0 ]; then
    echo "soak: all invariants held"
else
    echo "soak: INVARIANT VIOLATED"
fi
exit $fail
