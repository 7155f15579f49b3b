#!/usr/bin/env bash
# bench/posts.sh: `stepq work --drain` on N one-step jobs that each POST
# once, with side effects and no idempotency key (the requests that wait
# for their attempt's record to be on disk), against `stepq mock` at zero
# latency. Run on demand, never by the tests:
#
#   bench/posts.sh [BIN] [N] [CONCURRENCY]   # defaults: the release build, 3000, 16
#
# Prints one line: the jobs that succeeded and steps/s over the drain.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${1:-$here/../build/release/cli/stepq}")
n=${2:-3000}
conc=${3:-16}
dir=$(mktemp -d "${TMPDIR:-/tmp}/stepq-posts.XXXXXX")
mock=""
cleanup() {
    [ -n "$mock" ] && kill "$mock" 2>/dev/null && wait "$mock" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
cd "$dir"
echo '{"routes":[{"path":"/comments","loop":true,"answers":[{"status":201,"body":"ok"}]}]}' >script.json
"$bin" mock --port 0 --script script.json >mock.out 2>/dev/null &
mock=$!
for _ in $(seq 100); do grep -q listening mock.out 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' mock.out)
[ -n "$port" ] || { echo "posts.sh: the mock did not start" >&2; exit 1; }
echo '{"tiers":[{"name":"t","base_url":"http://127.0.0.1:'"$port"'/v1","model":"m"}]}' >stepq.json
"$bin" init >/dev/null
for i in $(seq 0 $((n - 1))); do
    printf '{"name":"p","steps":[{"name":"post","kind":"http","http":{"method":"POST","url":"http://127.0.0.1:%s/comments","body":{"n":%d}}}]}\n' "$port" "$i"
done >jobs.jsonl
"$bin" enqueue jobs.jsonl >/dev/null
start=$(date +%s%N)
"$bin" work --drain --concurrency "$conc" 2>/dev/null
end=$(date +%s%N)
ok=$("$bin" status --json | sed -n 's/.*"succeeded":\([0-9]*\).*/\1/p')
awk -v ok="$ok" -v n="$n" -v c="$conc" -v ns=$((end - start)) \
    'BEGIN { printf "concurrency %d: %d of %d jobs succeeded, %.0f steps/s\n", c, ok, n, n / (ns / 1e9) }'
