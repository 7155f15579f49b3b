#!/usr/bin/env bash
# bench/pg.sh: stepq on SQLite and PostgreSQL, and graphile-worker on the
# same PostgreSQL, in one run; prints the machine and a markdown table.
#   bench/pg.sh [pg.py options: --runs 3 --backlog 100000 --skip peer ...]
# Builds the release preset, installs the peer (npm ci, once), starts a
# throwaway cluster with scripts/pg-cluster.sh (fsync on) in a temporary
# folder on disk (not tmpfs: set STEPQ_BENCH_TMP to choose), runs
# bench/pg.py against it and stops the cluster, also on failure or ^C.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

cmake --preset release >/dev/null
cmake --build --preset release -j2 >/dev/null
if [ ! -d bench/peers/graphile/node_modules/graphile-worker ]; then
    (cd bench/peers/graphile && npm ci --no-audit --no-fund >/dev/null)
fi

parent=${STEPQ_BENCH_TMP:-/var/tmp}
if [ "$(findmnt -n -o FSTYPE -T "$parent" 2>/dev/null)" = tmpfs ]; then
    echo "pg.sh: $parent is tmpfs (no real fsync); set STEPQ_BENCH_TMP" >&2
    exit 2
fi
dir=$(mktemp -d "$parent/stepq-bench-pg.XXXXXX")
work=$(mktemp -d "$parent/stepq-bench-files.XXXXXX")
trap 'scripts/pg-cluster.sh stop "$dir"; rm -rf "$work"' EXIT
scripts/pg-cluster.sh start "$dir" >/dev/null
echo "cluster: scripts/pg-cluster.sh in $dir ($(findmnt -n -o FSTYPE -T "$dir"))"
python3 bench/pg.py --url-file "$dir/url" --dir "$work" "$@"
