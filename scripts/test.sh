#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs the whole test suite with CTest;
# under CI (CI=true) or with ODMOE_SANITIZE=1 also the ASan+UBSan build of
# the suite (scripts/sanitize.sh asan) and a short fuzzing pass over every
# target (scripts/fuzz.sh, ODMOE_FUZZ_SECONDS each, default 30). The TSan
# build of the cluster suites runs by hand (scripts/sanitize.sh tsan;
# docs/reliability.md says why it is not in CI yet).
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
  scripts/fuzz.sh "${ODMOE_FUZZ_SECONDS:-30}"
fi
