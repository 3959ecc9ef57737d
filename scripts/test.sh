#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs the whole test suite with CTest.
#
#   scripts/test.sh                  # everything
#   scripts/test.sh -R tokenizer:    # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" --timeout 600 "$@"
