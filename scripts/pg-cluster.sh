#!/usr/bin/env bash
# pg-cluster.sh: a throwaway PostgreSQL cluster for tests and benchmarks.
#   pg-cluster.sh start DIR   initdb into DIR (fsync on), start it on a Unix
#                             socket in DIR and a free loopback port, and
#                             print its URL (also written to DIR/url, mode
#                             0600); a cluster left in DIR is stopped and
#                             removed first
#   pg-cluster.sh stop DIR    stop it and remove DIR
#   pg-cluster.sh restart DIR restart it in place (same port and data)
#   pg-cluster.sh crash DIR   stop it with -m immediate (a crash: no
#                             checkpoint, sessions cut) and start it again
#   pg-cluster.sh halt DIR    stop it with -m immediate, and leave it down
#   pg-cluster.sh freeze DIR  SIGSTOP the server and all its processes (a
#                             host that hangs); thaw DIR sends SIGCONT
#   pg-cluster.sh replica DIR RDIR  a streaming replica of DIR's cluster in
#                             RDIR (pg_basebackup), started on a port of its
#                             own; prints its URL (also in RDIR/url). DIR's
#                             commits then wait for it (synchronous_standby_names)
#   pg-cluster.sh promote RDIR  promote the replica in RDIR to a primary
# As root the cluster runs as the unprivileged user "postgres" (initdb
# refuses root); when a parent folder of DIR is closed to that user, the
# cluster's files go to a folder of its own under /tmp (named in DIR/home,
# removed by stop) and DIR keeps url and port. The superuser is "stepq" with a random password (in
# DIR/url only; host connections need it, the socket trusts).
set -euo pipefail
bindir=/usr/lib/postgresql/15/bin
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|restart|crash|halt|freeze|thaw|promote DIR, or replica DIR RDIR" >&2; exit 2; }

as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# A random high port; a taken one makes pg_ctl fail and the loop try
# another (no python on a fresh Debian).
free_port() {
    echo $((20000 + (RANDOM * 32768 + RANDOM) % 40000))
}

# Where the cluster's data, log and socket are: DIR, or DIR/home's folder.
home_of() {
    if [ -f "$dir/home" ]; then cat "$dir/home"; else echo "$dir"; fi
}

stop_cluster() {
    local home
    home=$(home_of)
    if [ -d "$home/data" ]; then
        as_owner "$bindir/pg_ctl" -D "$home/data" -w -t 60 -m fast stop >/dev/null 2>&1 || true
    fi
    [ -f "$dir/sockdir" ] && rm -rf "$(cat "$dir/sockdir")"
    [ "$home" != "$dir" ] && rm -rf "$home"
    # Only what start made: a DIR that is not a cluster stays as it was.
    [ -d "$dir" ] || return 0
    rm -rf "$dir/data" "$dir/log" "$dir/initdb.log" "$dir/url" "$dir/port" \
        "$dir/basebackup.log" \
        "$dir/sockdir" "$dir/home" "$dir/.pw" "$dir"/.s.PGSQL.*
    rmdir "$dir" 2>/dev/null || true
}

# Starts the cluster in $home/data on port $1 with its socket in $sock.
start_on() {
    as_owner "$bindir/pg_ctl" -D "$home/data" -l "$home/log" -w -t 30 \
        -o "-c listen_addresses=127.0.0.1 -p $1 -k $sock -c fsync=on \
            -c max_connections=200" start >/dev/null
}

# The PIDs of the cluster's server and its processes.
server_pids() {
    local pm
    pm=$(head -1 "$(home_of)/data/postmaster.pid")
    echo "$pm" $(ps -o pid= --ppid "$pm")
}

case "$cmd" in
crash)
    home=$(home_of)
    sock=$home
    [ -f "$dir/sockdir" ] && sock=$(cat "$dir/sockdir")
    as_owner "$bindir/pg_ctl" -D "$home/data" -w -t 60 -m immediate stop >/dev/null
    start_on "$(cat "$dir/port")"
    ;;
halt)
    as_owner "$bindir/pg_ctl" -D "$(home_of)/data" -w -t 60 -m immediate stop >/dev/null
    ;;
freeze)
    kill -STOP $(server_pids)
    ;;
thaw)
    kill -CONT $(server_pids)
    ;;
replica)
    rdir=${3:-}
    [ -n "$rdir" ] || { echo "usage: $0 replica DIR RDIR" >&2; exit 2; }
    psock=$(home_of)
    [ -f "$dir/sockdir" ] && psock=$(cat "$dir/sockdir")
    pport=$(cat "$dir/port")
    url=$(cat "$dir/url")
    umask 077
    mkdir -p "$rdir"
    rdir=$(cd "$rdir" && pwd)
    [ "$(id -u)" = 0 ] && chown postgres: "$rdir"
    home=$rdir sock=$rdir
    as_owner "$bindir/pg_basebackup" -h "$psock" -p "$pport" -U stepq \
        -D "$home/data" -R -X stream >"$rdir/basebackup.log" 2>&1 ||
        { cat "$rdir/basebackup.log" >&2; exit 1; }
    for _ in 1 2 3 4 5 6 7 8; do
        port=$(free_port)
        if start_on "$port"; then
            echo "${url%:*}:$port/postgres" > "$rdir/url"
            echo "$port" > "$rdir/port"
            # Commits on the primary wait for the replica from now on.
            as_owner "$bindir/psql" -X -q -h "$psock" -p "$pport" -U stepq \
                -d postgres -c "ALTER SYSTEM SET synchronous_standby_names = '*'" \
                -c "SELECT pg_reload_conf()" >/dev/null
            cat "$rdir/url"
            exit 0
        fi
    done
    cat "$home/log" >&2
    exit 1
    ;;
promote)
    as_owner "$bindir/pg_ctl" -D "$(home_of)/data" -w -t 60 promote >/dev/null
    ;;
start)
    [ -x "$bindir/initdb" ] || { echo "$0: no $bindir/initdb (scripts/deps.sh installs postgresql-15)" >&2; exit 1; }
    stop_cluster
    umask 077
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    home=$dir
    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$dir"
        if ! runuser -u postgres -- test -w "$dir"; then
            home=$(mktemp -d /tmp/stepq-pg-XXXXXX)
            chown postgres: "$home"
            echo "$home" > "$dir/home"
        fi
    fi
    # A Unix socket path is at most 107 bytes: a deep DIR gets its socket
    # in a short folder of its own (removed by stop).
    sock=$home
    if [ ${#home} -gt 80 ]; then
        sock=$(mktemp -d /tmp/stepq-pg-XXXXXX)
        [ "$(id -u)" = 0 ] && chown postgres: "$sock"
        echo "$sock" > "$dir/sockdir"
    fi
    pw=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
    printf '%s\n' "$pw" > "$home/.pw"
    [ "$(id -u)" = 0 ] && chown postgres: "$home/.pw"
    as_owner "$bindir/initdb" -D "$home/data" -U stepq --pwfile="$home/.pw" \
        --auth-local=trust --auth-host=scram-sha-256 -E UTF8 \
        --no-instructions >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    rm -f "$home/.pw"
    for _ in 1 2 3 4 5 6 7 8; do
        port=$(free_port)
        if start_on "$port"; then
            echo "postgresql://stepq:$pw@127.0.0.1:$port/postgres" > "$dir/url"
            echo "$port" > "$dir/port"
            cat "$dir/url"
            exit 0
        fi
    done
    cat "$home/log" >&2
    exit 1
    ;;
restart)
    home=$(home_of)
    as_owner "$bindir/pg_ctl" -D "$home/data" -l "$home/log" -w -t 60 -m fast restart >/dev/null
    ;;
stop)
    stop_cluster
    ;;
*)
    echo "usage: $0 start|stop|restart|crash|halt|freeze|thaw|promote DIR, or replica DIR RDIR" >&2; exit 2 ;;
esac
