#!/usr/bin/env bash
# fuzz/run.sh TARGET SECONDS [libFuzzer flags...]
# Builds the libFuzzer targets with clang, ASan and UBSan in build/fuzz,
# refreshes the seed corpus (fuzz/make_seeds.py) and runs fuzz_TARGET for
# SECONDS. The growing corpus is kept in build/fuzz/corpus/TARGET; crash,
# leak and timeout inputs are written to fuzz/crashes/ (keep each one as a
# case in tests/test_fuzz_regressions.c). Exit status: libFuzzer's (0 when
# nothing was found). TARGET: jobspec config classify headers expand
# serve_body serve_route tier_text tools.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
    echo "usage: fuzz/run.sh TARGET SECONDS [libFuzzer flags]" >&2
    exit 2
fi
target=$1
secs=$2
shift 2
case "$target" in
jobspec | config | classify | headers | expand | serve_body | serve_route | \
    tier_text | tools) ;;
*)
    echo "fuzz/run.sh: unknown target $target" >&2
    exit 2
    ;;
esac
build=build/fuzz
if [ ! -f "$build/CMakeCache.txt" ]; then
    CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DSTEPQ_FUZZ=ON -DSTEPQ_SANITIZE=ON -DSTEPQ_TESTS=OFF >/dev/null
fi
cmake --build "$build" --target "fuzz_$target" >/dev/null
python3 fuzz/make_seeds.py "$build/seeds"
corpus=$build/corpus/$target
mkdir -p "$corpus" fuzz/crashes
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
dict=()
[ -f "fuzz/$target.dict" ] && dict=(-dict="fuzz/$target.dict")
exec "$build/fuzz/fuzz_$target" "$corpus" "$build/seeds/$target" \
    -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="fuzz/crashes/$target-" \
    "${dict[@]}" "$@"
