#!/usr/bin/env bash
# Soak test: runs the ten-node testbed, sends greedy completions back to back
# for a set time while killing (SIGKILL) and restarting a random worker every
# few seconds, and compares every completion with the single-process engine.
# Reports requests completed, failed and mismatched; exits 1 unless none
# failed and none mismatched.
#
#   scripts/soak.sh              # 60 s
#   scripts/soak.sh 600          # ten minutes
#   TOKENS=48 KILL_EVERY=2 scripts/soak.sh 120
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
SECONDS_TO_RUN=${1:-60}
TOKENS=${TOKENS:-32}
KILL_EVERY=${KILL_EVERY:-3}   # seconds between worker kills
TOPOLOGY=deploy/testbed-10.yaml
RUN_DIR=$(mktemp -d /tmp/odmoe-soak.XXXXXX)
PROMPTS=("The meaning of life is" "Once upon a time" "It is a truth universally acknowledged"
         "The sea" "A computer is" "In the beginning")

cleanup() {
  [[ -n "${CHAOS_PID:-}" ]] && kill "$CHAOS_PID" 2>/dev/null || true
  "$BIN"/odmoe-cluster down "$TOPOLOGY" --run-dir "$RUN_DIR" >/dev/null 2>&1 || true
  rm -rf "$RUN_DIR"
}
trap cleanup EXIT

declare -a EXPECTED
for i in "${!PROMPTS[@]}"; do
  full=$("$BIN"/odmoe-run --model models/tiny-mixtral-f16.gguf -n "$TOKENS" --ignore-eos \
         --prompt "${PROMPTS[$i]}" 2>/dev/null)
  EXPECTED[$i]=${full#"${PROMPTS[$i]}"}
done

"$BIN"/odmoe-cluster up "$TOPOLOGY" --run-dir "$RUN_DIR" >/dev/null

# Chaos: kill a random worker, give it a moment, start it again (same id).
chaos() {
  local kills=0
  while true; do
    sleep "$KILL_EVERY"
    local id="w$((RANDOM % 8))"
    local pid
    pid=$(cat "$RUN_DIR/$id.pid" 2>/dev/null || echo "")
    [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null || true
    kills=$((kills + 1))
    echo "$kills" > "$RUN_DIR/kills"
    sleep 1
    # In a subshell, so that the shell does not report the next kill of it.
    # The secret odmoe-cluster up generated (when the topology names none).
    local secret=()
    [[ -f "$RUN_DIR/cluster.secret" ]] && secret=(--cluster-secret-file "$RUN_DIR/cluster.secret")
    (setsid "$BIN"/odmoe-worker --topology "$PWD/$TOPOLOGY" --id "$id" "${secret[@]}" \
       >>"$RUN_DIR/$id.log" 2>&1 </dev/null &
     echo $! > "$RUN_DIR/$id.pid")
  done
}
chaos &
CHAOS_PID=$!

completed=0 failed=0 mismatched=0
end=$((SECONDS + SECONDS_TO_RUN))
while (( SECONDS < end )); do
  i=$((RANDOM % ${#PROMPTS[@]}))
  if got=$("$BIN"/odmoe complete --main 127.0.0.1:7700 -n "$TOKENS" --ignore-eos \
           "${PROMPTS[$i]}" 2>"$RUN_DIR/last_error"); then
    if [[ "$got" == "${EXPECTED[$i]}" ]]; then
      completed=$((completed + 1))
    else
      mismatched=$((mismatched + 1))
      echo "MISMATCH for '${PROMPTS[$i]}': got '$got'"
    fi
  else
    failed=$((failed + 1))
    echo "FAILED: $(tail -n 1 "$RUN_DIR/last_error")"
  fi
done
kill "$CHAOS_PID" 2>/dev/null || true
wait "$CHAOS_PID" 2>/dev/null || true
CHAOS_PID=""
echo "soak: ${SECONDS_TO_RUN} s, $(cat "$RUN_DIR/kills" 2>/dev/null || echo 0) worker kills:" \
     "$completed completed, $failed failed, $mismatched mismatched"
(( failed == 0 && mismatched == 0 ))
