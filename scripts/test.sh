#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs the whole test suite with CTest;
# under CI (CI=true) or with ODMOE_SANITIZE=1 also the sanitizer builds
# (scripts/sanitize.sh: ASan+UBSan over the suite, TSan over the cluster
# suites) and a short fuzzing pass over every target (scripts/fuzz.sh,
# ODMOE_FUZZ_SECONDS each, default 30).
#
#   scripts/test.sh                  # everything
#   scripts/test.sh -R tokenizer:    # extra arguments go to ctest (the normal build only)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" --timeout 600 "$@"
if [ "${CI:-}" = true ] || [ "${ODMOE_SANITIZE:-0}" = 1 ]; then
  scripts/sanitize.sh asan
  scripts/sanitize.sh tsan
  scripts/fuzz.sh "${ODMOE_FUZZ_SECONDS:-30}"
fi
