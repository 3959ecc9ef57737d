#!/usr/bin/env bash
# The main job: sets up, then generates text with the model that ships in the
# repository (models/tiny-mixtral-f16.gguf) using the single-process engine.
#
#   scripts/run.sh                       # default prompt
#   scripts/run.sh "Once upon a time" 48 # prompt, tokens
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
PROMPT=${1:-"The best way to learn is"}
TOKENS=${2:-64}
"$BUILD_DIR"/tools/odmoe-run --model models/tiny-mixtral-f16.gguf --prompt "$PROMPT" -n "$TOKENS"
