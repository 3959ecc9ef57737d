#!/usr/bin/env bash
# Builds the project with a sanitizer and runs tests under it.
#
#   scripts/sanitize.sh asan            # ASan + UBSan, the whole suite (build-asan/)
#   scripts/sanitize.sh tsan            # TSan, the cluster suites (build-tsan/)
#   scripts/sanitize.sh asan -R wire    # extra arguments go to ctest
#
# Any report fails the run (halt_on_error; UBSan does not recover). The CUDA
# backend is left out (the sanitizers do not see into the GPU); everything
# else is the normal build with -fsanitize. scripts/test.sh runs both when
# CI=true (or ODMOE_SANITIZE=1). Suppressions for the system libraries the
# sanitizers cannot see into are in scripts/sanitizers/.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?usage: scripts/sanitize.sh asan|tsan [ctest args]}
shift
JOBS=${JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
supp="$PWD/scripts/sanitizers"
case "$kind" in
  asan)
    dir=${ASAN_BUILD_DIR:-build-asan}
    flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
    targets=(all)
    export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:allocator_may_return_null=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp"
    ctest_args=()
    ;;
  tsan)
    dir=${TSAN_BUILD_DIR:-build-tsan}
    flags="-fsanitize=thread -fno-omit-frame-pointer"
    targets=(odmoe_cluster_tests odmoe_main_node_tests odmoe-main odmoe-worker odmoe-shadow odmoe-cluster)
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
    ctest_args=(-R "^(cluster|main_node):")
    ;;
  *)
    echo "scripts/sanitize.sh: unknown sanitizer '$kind' (asan or tsan)" >&2
    exit 2
    ;;
esac
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DODMOE_CUDA=OFF -DODMOE_BUILD_TESTS=ON \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
cmake --build "$dir" -j "$JOBS" --target "${targets[@]}"
echo "sanitize: built $kind into $dir"
ctest --test-dir "$dir" --output-on-failure -j "$JOBS" --timeout 900 "${ctest_args[@]}" "$@"
