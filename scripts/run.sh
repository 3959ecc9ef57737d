#!/usr/bin/env bash
# The main job: sets up, starts the ten-node testbed of the OD-MoE paper on this
# machine (1 main + 1 shadow + 8 workers in 4 groups of 2, deploy/testbed-10.yaml,
# with the model that ships in the repository), sends it one completion request,
# shows the cluster's status, and stops it again.
#
#   scripts/run.sh                        # default prompt
#   scripts/run.sh "Once upon a time" 48  # prompt, tokens
#   KEEP_UP=1 scripts/run.sh              # leave the cluster running afterwards
#                                         # (stop it: build/bin/odmoe-cluster down deploy/testbed-10.yaml)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BIN=${BUILD_DIR:-build}/bin
TOPOLOGY=deploy/testbed-10.yaml
PROMPT=${1:-"The best way to learn is"}
TOKENS=${2:-64}

"$BIN"/odmoe-cluster down "$TOPOLOGY" >/dev/null 2>&1 || true
if [[ "${KEEP_UP:-0}" != 1 ]]; then
  trap '"$BIN"/odmoe-cluster down "$TOPOLOGY"' EXIT
fi
"$BIN"/odmoe-cluster up "$TOPOLOGY"
echo
echo "== completion (odmoe complete --main 127.0.0.1:7700) =="
"$BIN"/odmoe complete --main 127.0.0.1:7700 --stats -n "$TOKENS" "$PROMPT"
echo
"$BIN"/odmoe-cluster status "$TOPOLOGY"
