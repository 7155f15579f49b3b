#!/bin/sh
# enqueue.sh: enqueue a job file with the stepq CLI, as a nightly cron job
# or systemd timer would, with a dedupe key per day so that a second run on
# the same day does not add the job again.
#
#   STEPQ_DB=/var/lib/stepq/stepq.db examples/enqueue.sh examples/nightly-changelog.json
#
# STEPQ names the binary (default: stepq on PATH); STEPQ_DB and
# STEPQ_CONFIG are read by stepq itself. Exit codes are stepq's: 2 means
# the job file is not valid (nothing was written); 1 includes "no stepq
# database at PATH": create it once with `stepq init`.
set -eu

stepq=${STEPQ:-stepq}
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 JOB.json [KEY]" >&2
    exit 2
fi
file=$1
key=${2:-$(basename "$file" .json)-$(date -u +%Y-%m-%d)}

# --json prints {"id":N,"duplicate":false}; a key that exists gives the
# existing job's id with "duplicate":true and still exits 0.
out=$("$stepq" enqueue "$file" --key "$key" --json) || {
    status=$?
    echo "enqueue.sh: $file was not enqueued (exit $status)" >&2
    exit "$status"
}
id=$(printf '%s\n' "$out" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
case $out in
*'"duplicate":true'*) echo "job $id already enqueued today (key $key)" ;;
*) echo "enqueued job $id (key $key)" ;;
esac
"$stepq" jobs show "$id"
