#!/usr/bin/env bash
# check-units.sh --bin STEPQ [DIR]: the systemd units in DIR (default
# packaging/) checked as systemd would load them, without building or
# installing the package: `systemd-analyze verify` in a scratch root that
# holds this host's units, the units and STEPQ as /usr/bin/stepq (so the
# commands they name resolve as they will once installed); any message it
# prints fails the check. Then every `stepq CMD --flag ...` line of an
# Exec*= setting is held to `stepq CMD --help`: the command exists and
# each --flag is in its usage. Exit 0 with "check-units: N units
# verified", else 1 naming the unit and the problem. Run by
# tests/test_units.c and scripts/package.sh.
set -eu
bin=""
dir="$(dirname "$0")/../packaging"
while [ $# -gt 0 ]; do
    case "$1" in
    --bin) bin="$2"; shift 2 ;;
    *) dir="$1"; shift ;;
    esac
done
[ -x "$bin" ] || { echo "check-units: --bin STEPQ: no program at '$bin'" >&2; exit 2; }
command -v systemd-analyze >/dev/null ||
    { echo "check-units: systemd-analyze is missing (apt-get install systemd)" >&2; exit 2; }
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/bin" "$root/usr/lib/systemd/system"
cp -a /usr/lib/systemd/system/. "$root/usr/lib/systemd/system/"
ln -s usr/lib "$root/lib"
cp "$bin" "$root/usr/bin/stepq"
units=()
for f in "$dir"/*.service "$dir"/*.timer; do
    [ -e "$f" ] || continue
    name="$(basename "$f")"
    cp "$f" "$root/usr/lib/systemd/system/$name"
    # A template is verified through an instance of it.
    units+=("${name/@./@1.}")
done
[ ${#units[@]} -gt 0 ] || { echo "check-units: no units in $dir" >&2; exit 1; }
fail=0
for u in "${units[@]}"; do
    out="$(systemd-analyze verify --man=no --root="$root" "$u" 2>&1)" || fail=1
    if [ -n "$out" ]; then
        echo "check-units: $u: $out" >&2
        fail=1
    fi
done
for f in "$dir"/*.service; do
    while IFS= read -r line; do
        cmdline="${line#*=}"
        set -- $cmdline
        [ "${1:-}" = "stepq" ] || continue
        sub="${2:-}"
        if ! help="$("$bin" "$sub" --help 2>&1)"; then
            echo "check-units: $(basename "$f"): stepq $sub: no such command" >&2
            fail=1
            continue
        fi
        for w in "$@"; do
            case "$w" in
            --*) grep -q -- "$w" <<<"$help" || {
                     echo "check-units: $(basename "$f"): stepq $sub has no $w" >&2
                     fail=1; } ;;
            esac
        done
    done < <(grep -E '^Exec[A-Za-z]*=' "$f")
done
[ $fail -eq 0 ] || exit 1
echo "check-units: ${#units[@]} units verified"
