#!/bin/sh
# full-disk.sh STEPQ: test_worker_faults runs it under `unshare -m` (a
# mount namespace of its own, so the mount goes with it), in the test's
# folder, whose stepq.json points at the test's mock. A 6 MiB tmpfs holds
# the database and 1 MiB of filler; a worker drains 5,000 one-step jobs
# until a commit fails on the full disk; the filler is removed; the worker
# must then finish every job. Prints the store's status last.
set -eu
S=$1
mkdir -p small
mount -t tmpfs -o size=6m tmpfs small
"$S" --db small/q.db init >/dev/null
i=0
while [ $i -lt 5000 ]; do
    printf '{"name":"j","steps":[{"name":"a","request":{"messages":[{"role":"user","content":"%0100d"}]}}]}\n' $i
    i=$((i + 1))
done >small/jobs.jsonl
"$S" --db small/q.db enqueue small/jobs.jsonl >/dev/null
rm small/jobs.jsonl
dd if=/dev/zero of=small/fill bs=1M count=1 2>/dev/null
"$S" --db small/q.db work --drain --concurrency 16 2>work-full.log &
wp=$!
i=0
until grep -q "disk is full" work-full.log; do
    i=$((i + 1))
    if [ $i -gt 600 ] || ! kill -0 $wp 2>/dev/null; then
        echo "full-disk.sh: no commit failed on the full disk"
        kill $wp 2>/dev/null || true
        exit 1
    fi
    sleep 0.1
done
rm small/fill
i=0
while kill -0 $wp 2>/dev/null; do
    i=$((i + 1))
    if [ $i -gt 900 ]; then
        echo "full-disk.sh: the worker was still stuck 90 s after space came back"
        tail -5 work-full.log
        kill $wp
        exit 1
    fi
    sleep 0.1
done
wait $wp
"$S" --db small/q.db status --json
