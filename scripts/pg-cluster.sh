#!/usr/bin/env bash
# pg-cluster.sh: a throwaway PostgreSQL cluster for tests and benchmarks.
#   pg-cluster.sh start DIR   initdb into DIR (fsync on), start it on a Unix
#                             socket in DIR and a free loopback port, and
#                             print its URL (also written to DIR/url, mode
#                             0600); a cluster left in DIR is stopped and
#                             removed first
#   pg-cluster.sh stop DIR    stop it and remove DIR
#   pg-cluster.sh restart DIR restart it in place (same port and data)
# As root the cluster runs as the unprivileged user "postgres" (initdb
# refuses root). The superuser is "stepq" with a random password (in
# DIR/url only; host connections need it, the socket trusts).
set -euo pipefail
bindir=/usr/lib/postgresql/15/bin
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|restart DIR" >&2; exit 2; }

as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# A random high port; a taken one makes pg_ctl fail and the loop try
# another (no python on a fresh Debian).
free_port() {
    echo $((20000 + (RANDOM * 32768 + RANDOM) % 40000))
}

stop_cluster() {
    if [ -d "$dir/data" ]; then
        as_owner "$bindir/pg_ctl" -D "$dir/data" -w -t 60 -m fast stop >/dev/null 2>&1 || true
    fi
    [ -f "$dir/sockdir" ] && rm -rf "$(cat "$dir/sockdir")"
    # Only what start made: a DIR that is not a cluster stays as it was.
    [ -d "$dir" ] || return 0
    rm -rf "$dir/data" "$dir/log" "$dir/initdb.log" "$dir/url" "$dir/port" \
        "$dir/sockdir" "$dir/.pw" "$dir"/.s.PGSQL.*
    rmdir "$dir" 2>/dev/null || true
}

case "$cmd" in
start)
    [ -x "$bindir/initdb" ] || { echo "$0: no $bindir/initdb (scripts/deps.sh installs postgresql-15)" >&2; exit 1; }
    stop_cluster
    umask 077
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$dir"
        runuser -u postgres -- test -w "$dir" ||
            { echo "$0: user postgres cannot write $dir (a parent folder is closed to it)" >&2; exit 1; }
    fi
    # A Unix socket path is at most 107 bytes: a deep DIR gets its socket
    # in a short folder of its own (removed by stop).
    sock=$dir
    if [ ${#dir} -gt 80 ]; then
        sock=$(mktemp -d /tmp/stepq-pg-XXXXXX)
        [ "$(id -u)" = 0 ] && chown postgres: "$sock"
        echo "$sock" > "$dir/sockdir"
    fi
    pw=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
    printf '%s\n' "$pw" > "$dir/.pw"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir/.pw"
    as_owner "$bindir/initdb" -D "$dir/data" -U stepq --pwfile="$dir/.pw" \
        --auth-local=trust --auth-host=scram-sha-256 -E UTF8 \
        --no-instructions >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    rm -f "$dir/.pw"
    for _ in 1 2 3 4 5 6 7 8; do
        port=$(free_port)
        if as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 30 \
            -o "-c listen_addresses=127.0.0.1 -p $port -k $sock -c fsync=on \
                -c max_connections=200" start >/dev/null; then
            echo "postgresql://stepq:$pw@127.0.0.1:$port/postgres" > "$dir/url"
            echo "$port" > "$dir/port"
            cat "$dir/url"
            exit 0
        fi
    done
    cat "$dir/log" >&2
    exit 1
    ;;
restart)
    as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 -m fast restart >/dev/null
    ;;
stop)
    stop_cluster
    ;;
*)
    echo "usage: $0 start|stop|restart DIR" >&2; exit 2 ;;
esac
