#!/usr/bin/env bash
# package.sh: builds the Debian package from the release preset and checks
# it, on demand (about 20 s on 2 cores from a warm release build, 75 s
# from none, the release build itself included: too slow for the test
# command, which runs tests/test_units.c instead):
#   1. cmake --preset release, build, `cpack -G DEB` in build/release;
#   2. lintian: no error (installs lintian with apt-get when missing);
#   3. the package's files unpacked into a scratch root: its units verified
#      with its own stepq (scripts/check-units.sh), its sysusers.d entry
#      makes the stepq user (systemd-sysusers --root), and its stepq, given
#      a database of schema version 1 (tests/data/schema-v1.sql), migrates
#      it on `stepq init` and says so, as the units' first start after an
#      upgrade does;
#   4. `apt-get install -s` of the .deb: its dependencies resolve.
# What it cannot check in a container without systemd as PID 1: starting
# the units, the timer firing, and the postinst run for real.
set -eu
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
command -v lintian >/dev/null ||
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq lintian >/dev/null
cmake --preset release >/dev/null
cmake --build --preset release -j2 >/dev/null
(cd build/release && rm -f stepq_*.deb && cpack -G DEB >/dev/null)
deb="$(ls build/release/stepq_*.deb)"
echo "package: $deb ($(stat -c %s "$deb") bytes)"
lint="$(lintian "$deb" 2>&1 | grep -v 'running with root privileges' || true)"
echo "$lint" | sed 's/^/lintian: /'
if grep -q '^E:' <<<"$lint"; then
    echo "package: lintian found errors" >&2
    exit 1
fi
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
dpkg-deb -x "$deb" "$root/pkg"
bash scripts/check-units.sh --bin "$root/pkg/usr/bin/stepq" \
    "$root/pkg/usr/lib/systemd/system"
mkdir -p "$root/sys/etc"
systemd-sysusers --root="$root/sys" "$root/pkg/usr/lib/sysusers.d/stepq.conf" 2>/dev/null
grep -q '^stepq:' "$root/sys/etc/passwd" ||
    { echo "package: sysusers.d made no stepq user" >&2; exit 1; }
echo "package: sysusers.d makes the stepq user"
db="$root/old.db"
"$root/pkg/usr/bin/stepq" --db "$db" init >/dev/null
sqlite3 "$db" < tests/data/schema-v1.sql
out="$("$root/pkg/usr/bin/stepq" --db "$db" init)"
echo "package: upgrade: $out"
grep -q 'migrated from an older schema' <<<"$out" ||
    { echo "package: stepq init did not say it migrated" >&2; exit 1; }
$SUDO apt-get install -s "./$deb" >/dev/null ||
    { echo "package: its dependencies do not resolve" >&2; exit 1; }
echo "package: dependencies resolve (apt-get install -s)"
echo "package: ok"
