#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs the whole test suite with CTest;
# under CI (CI=true) or with ODMOE_SANITIZE=1 also the ASan+UBSan build of
# the suite (scripts/sanitize.sh asan), the TSan build of the cluster cases
# tagged [tsan] (scripts/sanitize.sh tsan) and a short fuzzing pass over
# every target (scripts/fuzz.sh, ODMOE_FUZZ_SECONDS each, default 30).
# The client libraries of tests/clients/ come from scripts/client_venv.sh.
# docs/reliability.md has what each costs on a 2-core machine.
#
#   scripts/test.sh                  # everything
#   scripts/test.sh -R tokenizer:    # extra arguments go to ctest (the normal build only)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The client libraries tests/clients/ drive the HTTP API with (PyPI; the
# client tests pass with a warning where they cannot be installed).
if ODMOE_CLIENT_PYTHON=$(scripts/client_venv.sh); then
  export ODMOE_CLIENT_PYTHON
else
  echo "test: WARNING: scripts/client_venv.sh failed; the client tests will skip"
fi
# Real models' chat templates and llama.cpp's tokenizer test vocabularies (from
# llama-cpp-python's source on PyPI; cached, never committed) for the Jinja
# engine's comparison with jinja2 and the tokenizer's with llama.cpp's vectors.
scripts/fetch_chat_templates.sh ||
  echo "test: WARNING: scripts/fetch_chat_templates.sh failed; the real-template and llama.cpp vocabulary tests will skip"
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" --timeout 600 "$@"
if [ "${CI:-}" = true ] || [ "${ODMOE_SANITIZE:-0}" = 1 ]; then
  scripts/sanitize.sh asan
  echo "test: ThreadSanitizer on the cluster cases tagged [tsan]" \
       "(TSAN_TESTS=all scripts/sanitize.sh tsan runs every cluster and main-node case)"
  scripts/sanitize.sh tsan
  scripts/fuzz.sh "${ODMOE_FUZZ_SECONDS:-30}"
fi
