#!/usr/bin/env bash
# The compiled extension under sanitizers: memtui._native is built twice, in copies of the
# tree, once with AddressSanitizer + UndefinedBehaviorSanitizer and once with
# ThreadSanitizer, and the tests that drive it (the fast path, its parallel pass, the opcode
# walk and the differential fuzz) run under each. Every report is counted; the script ends
# with one line per build and exits 1 when any build reported anything.
#
#   tools/sanitize.sh                    both builds (about 10 minutes on 2 cores)
#   tools/sanitize.sh asan               one of them (asan or tsan)
#   MEMTUI_DIFF_CASES=200 tools/sanitize.sh   more fuzz cases under the sanitizers
#
# Needs gcc (or clang: CC=clang) with its sanitizer runtimes, and the project's virtual
# environment (.venv, or PYTHON=...). The interpreter is not instrumented: the runtime is
# preloaded, and Python's allocator is switched to malloc so ASan sees every object.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
python=${PYTHON:-$root/.venv/bin/python}
cc=${CC:-gcc}
builds=("${@:-asan tsan}")
read -r -a builds <<<"${builds[*]}"
tests=(tests/unit/test_fast_path.py tests/unit/test_scanner_memo.py tests/unit/test_opcode_check.py tests/unit/test_differential_fuzz.py)
work=$(mktemp -d)
[ -n "${MEMTUI_SANITIZE_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
shared=${MEMTUI_SHARED_SNAPSHOTS:-$root/../shared/snapshots}
failed=0
summary=()

for build in "${builds[@]}"; do
    case $build in
        asan)
            flags="-fsanitize=address,undefined -fno-omit-frame-pointer"
            runtime=$($cc -print-file-name=libasan.so)
            options="ASAN_OPTIONS=detect_leaks=0:halt_on_error=0:log_path=$work/report-asan"
            options="$options UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=0:log_path=$work/report-ubsan"
            ;;
        tsan)
            flags="-fsanitize=thread"
            runtime=$($cc -print-file-name=libtsan.so)
            options="TSAN_OPTIONS=halt_on_error=0:report_signal_unsafe=0:log_path=$work/report-tsan"
            ;;
        *) echo "sanitize: unknown build '$build' (asan or tsan)" >&2; exit 2 ;;
    esac
    tree=$work/$build
    mkdir -p "$tree"
    git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$tree"
    echo "== $build: building memtui._native with $flags"
    # Not -Werror here: gcc's instrumentation makes -Wmaybe-uninitialized see variables set
    # where they are declared as unset (the plain build, which CI makes, has -Werror).
    (cd "$tree" && CC=$cc MEMTUI_NATIVE_CFLAGS="-O1 -g $flags" MEMTUI_NATIVE_LDFLAGS="$flags" \
        "$python" setup.py -q build_ext --inplace >"$work/build-$build.log" 2>&1) || true
    if ! ls "$tree"/memtui/_native*.so >/dev/null 2>&1; then
        cat "$work/build-$build.log"; echo "sanitize: the $build build failed" >&2; exit 2
    fi
    echo "== $build: ${tests[*]}"
    # ThreadSanitizer needs the address layout it expects: without ASLR where setarch can turn it off.
    launcher=()
    if [ "$build" = tsan ] && setarch "$(uname -m)" -R true 2>/dev/null; then
        launcher=(setarch "$(uname -m)" -R)
    fi
    status=0
    (cd "$tree" && env $options LD_PRELOAD="$runtime" PYTHONMALLOC=malloc PYTHONPATH="$tree" \
        MEMTUI_REQUIRE_NATIVE=1 MEMTUI_SHARED_SNAPSHOTS="$shared" \
        "${launcher[@]}" "$python" -m pytest -q -p no:cacheprovider "${tests[@]}") || status=$?
    reports=$(cat "$work"/report-* 2>/dev/null | grep -cE "^(==[0-9]+==)?ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer" || true)
    if [ "$reports" != 0 ]; then
        cat "$work"/report-*
        failed=1
    fi
    if [ "$status" != 0 ]; then
        failed=1
    fi
    summary+=("$build: $reports sanitizer reports, tests exit status $status")
    rm -f "$work"/report-*
done

echo "== summary"
printf '%s\n' "${summary[@]}"
exit $failed
