#!/usr/bin/env bash
# Builds the project with a sanitizer and runs tests under it.
#
#   scripts/sanitize.sh asan            # ASan + UBSan, the whole suite (build-asan/)
#   scripts/sanitize.sh tsan            # TSan, the cluster cases tagged [tsan] (build-tsan/)
#   TSAN_TESTS=all scripts/sanitize.sh tsan   # TSan, the whole cluster and main-node suites
#   scripts/sanitize.sh asan -R wire    # extra arguments go to ctest
#
# Any report fails the run (halt_on_error; UBSan does not recover). The CUDA
# backend is left out (the sanitizers do not see into the GPU); everything
# else is the normal build with -fsanitize, in build type Sanitize: -O1 -g1
# (line tables are all a sanitizer's stacks need; -O1 compiled four of the
# heaviest files a quarter faster than -O2 under TSan and a third faster under
# ASan, and the ASan suite passes as it did at -O2: docs/reliability.md).
# TSan makes the cluster tests several times slower, so by default it runs the
# cases tagged [tsan] (CTest label tsan, tests/catch_labels.cmake): the worker
# streams and their ownership, shadow follow and hints, scaling, failure and
# rejoin, the HTTP server's concurrency, streaming and cancellation, the main
# node's request queue, the CPU backend's thread pool (about 2.5 minutes on 2
# cores). scripts/test.sh runs both when CI=true (or ODMOE_SANITIZE=1).
# Suppressions for the system libraries the sanitizers cannot see into are in
# scripts/sanitizers/ (tsan.supp says why each).
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
    opt="-O1 -g1 -DNDEBUG"
    flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
    targets=(all)
    export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:allocator_may_return_null=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp"
    ctest_args=()
    ;;
  tsan)
    dir=${TSAN_BUILD_DIR:-build-tsan}
    opt="-O1 -g1 -DNDEBUG"
    # -Wno-tsan: gcc warns that TSan does not model atomic_thread_fence, once
    # per Boost.Asio handler type (thousands of lines); TSan still sees Asio's
    # mutexes and atomics.
    flags="-fsanitize=thread -fno-omit-frame-pointer -Wno-tsan"
    # history_size=7 (the most: about 4M accesses remembered per thread; the
    # default remembers 128K) so that the stack of the earlier access of a
    # report is restored: a report whose earlier access was inside gRPC or
    # Abseil is then matched by tsan.supp instead of printed as "failed to
    # restore the stack". It costs memory (about 200 MB more in a cluster
    # test), not time.
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=7:suppressions=$supp/tsan.supp"
    if [ "${TSAN_TESTS:-tsan}" = all ]; then
      # The process tests start the daemons.
      targets=(odmoe_cluster_tests odmoe_main_node_tests odmoe_worker_node_tests odmoe-main
               odmoe-worker odmoe-shadow odmoe-cluster)
      ctest_args=(-R "^(cluster|main_node|worker_node):")
    else
      targets=(odmoe_cluster_tests odmoe_main_node_tests odmoe_util_tests odmoe_worker_node_tests)
      ctest_args=(-L tsan)
    fi
    ;;
  *)
    echo "scripts/sanitize.sh: unknown sanitizer '$kind' (asan or tsan)" >&2
    exit 2
    ;;
esac
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize \
  -DCMAKE_CXX_FLAGS_SANITIZE="$opt" -DCMAKE_C_FLAGS_SANITIZE="$opt" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DODMOE_CUDA=OFF -DODMOE_BUILD_TESTS=ON \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
cmake --build "$dir" -j "$JOBS" --target "${targets[@]}"
echo "sanitize: built $kind into $dir"
# --no-tests=error: an empty selection (no [tsan] label written, a filter
# that matches nothing) fails instead of passing.
ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$JOBS" --timeout 900 \
  "${ctest_args[@]}" "$@"
