#!/usr/bin/env bash
# Fuzzes every target of tests/fuzz with libFuzzer (clang, ASan + UBSan).
#
#   scripts/fuzz.sh              # each target for 60 s
#   scripts/fuzz.sh 600          # each target for 10 minutes
#   scripts/fuzz.sh 30 wire gguf # only these targets
#
# Builds into build-fuzz/ (FUZZ_BUILD_DIR; ODMOE_FUZZ=ON), fuzzes each target from a copy of
# its seed corpus (tests/fuzz/corpus/<name>/, never modified here) with
# FUZZ_JOBS targets at a time (default: the number of cores), and prints
# per target the executions, exec/s, coverage (cov = edges, ft = features)
# and corpus size libFuzzer reports. A crash, hang (> 10 s per input), leak,
# sanitizer report or out-of-memory (> 2 GB) fails the run; the input that
# caused it is copied to tests/fuzz/regressions/<name>/, where the normal
# build's "fuzz:<name> replay" test runs it from then on (commit it with the
# fix).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
all=(gguf tokenizer topology wire http_request http_reply http_connection jinja)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz: unknown target '$t' (${all[*]})" >&2; exit 2; }
done
command -v clang++ >/dev/null || { echo "fuzz: clang++ is needed (scripts/setup.sh installs it)" >&2; exit 2; }
dir=${FUZZ_BUILD_DIR:-build-fuzz}
flags="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DODMOE_CUDA=OFF -DODMOE_BUILD_TESTS=ON -DODMOE_FUZZ=ON \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" >/dev/null
cmake --build "$dir" -j "${JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
run_one() {
  local t=$1 work="$dir/fuzz-work/$1"
  rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
  cp tests/fuzz/corpus/"$t"/* "$work/corpus/" 2>/dev/null || true
  local rc=0
  "$dir/bin/fuzz_$t" "$work/corpus" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -max_len=262144 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" >"$work/log" 2>&1 || rc=$?
  echo "$rc" > "$work/rc"
}
jobs_max=${FUZZ_JOBS:-$(nproc)}
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do sleep 1; done
  echo "fuzz: $t for ${seconds}s"
  run_one "$t" &
done
wait

failed=0
printf '%-14s %12s %10s %8s %8s %8s  %s\n' target executions exec/s cov ft corpus result
for t in "${targets[@]}"; do
  work="$dir/fuzz-work/$t"
  rc=$(cat "$work/rc")
  last=$(grep -E '^#[0-9]+' "$work/log" | tail -1 || true)
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$work/log" | grep -oE '[0-9]+$' || echo "?")
  rate=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$work/log" | grep -oE '[0-9]+$' || echo "?")
  cov=$(echo "$last" | grep -oE 'cov: [0-9]+' | grep -oE '[0-9]+' || echo "?")
  ft=$(echo "$last" | grep -oE 'ft: [0-9]+' | grep -oE '[0-9]+' || echo "?")
  corp=$(echo "$last" | grep -oE 'corp: [0-9]+' | grep -oE '[0-9]+' || echo "?")
  result=ok
  if [ "$rc" != 0 ]; then
    result="FAILED (exit $rc): see $work/log"
    failed=1
    mkdir -p "tests/fuzz/regressions/$t"
    for a in "$work"/artifacts/*; do
      [ -f "$a" ] || continue
      cp "$a" "tests/fuzz/regressions/$t/$(basename "$a")"
      result="$result; kept tests/fuzz/regressions/$t/$(basename "$a")"
    done
    grep -E "ERROR|SUMMARY|runtime error|fuzz invariant" "$work/log" | head -5 >&2 || true
  fi
  printf '%-14s %12s %10s %8s %8s %8s  %s\n' "$t" "$execs" "$rate" "$cov" "$ft" "$corp" "$result"
done
exit $failed
