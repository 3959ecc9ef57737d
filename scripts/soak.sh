#!/usr/bin/env bash
# Soak test: runs the ten-node testbed and sends greedy completions from
# CLIENTS concurrent clients for a set time, while every KILL_EVERY seconds a
# random fault hits the cluster: a worker killed (SIGKILL) and restarted, a
# worker hung (SIGSTOP for STOP_SECONDS, then SIGCONT), or the shadow killed
# and restarted. Every HANGUP_EVERY-th request of a client is a streamed HTTP
# completion that the client abandons after HANGUP_AFTER seconds (a client
# hang-up). Every completion is compared with the single-process engine.
# Reports requests completed, failed, mismatched and hung up, and the faults;
# exits 1 unless none failed and none mismatched (hang-ups are the client's
# choice, not failures).
#
#   scripts/soak.sh              # 60 s
#   scripts/soak.sh 600          # ten minutes
#   TOKENS=48 KILL_EVERY=2 CLIENTS=4 scripts/soak.sh 120
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
SECONDS_TO_RUN=${1:-60}
TOKENS=${TOKENS:-32}
KILL_EVERY=${KILL_EVERY:-3}     # seconds between faults
STOP_SECONDS=${STOP_SECONDS:-4} # how long a hung worker stays stopped
CLIENTS=${CLIENTS:-3}           # concurrent clients
HANGUP_EVERY=${HANGUP_EVERY:-5} # every N-th request of a client hangs up (0 = never)
HANGUP_AFTER=${HANGUP_AFTER:-0.3}
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

# --restarts 0: no supervisor; the chaos below restarts what it kills itself
# (and counts it), as before odmoe-cluster restarted nodes.
"$BIN"/odmoe-cluster up "$TOPOLOGY" --run-dir "$RUN_DIR" --restarts 0 >/dev/null

# Starts node `id` again (same id), in a subshell so that the shell does not
# report the next kill of it; with the secret odmoe-cluster up generated (when
# the topology names none).
restart() {
  local id=$1 binary=$2 secret=()
  [[ -f "$RUN_DIR/cluster.secret" ]] && secret=(--cluster-secret-file "$RUN_DIR/cluster.secret")
  (setsid "$BIN/$binary" --topology "$PWD/$TOPOLOGY" --id "$id" "${secret[@]}" \
     >>"$RUN_DIR/$id.log" 2>&1 </dev/null &
   echo $! > "$RUN_DIR/$id.pid")
}
count() { echo $(( $(cat "$RUN_DIR/$1" 2>/dev/null || echo 0) + 1 )) > "$RUN_DIR/$1"; }

# Chaos: one fault every KILL_EVERY seconds.
chaos() {
  while true; do
    sleep "$KILL_EVERY"
    local fault=$((RANDOM % 3)) id="w$((RANDOM % 8))" pid
    [[ $fault == 2 ]] && id=shadow
    pid=$(cat "$RUN_DIR/$id.pid" 2>/dev/null || echo "")
    [[ -n "$pid" ]] || continue
    case $fault in
      0) kill -9 "$pid" 2>/dev/null || true; count worker_kills; sleep 1; restart "$id" odmoe-worker ;;
      1) kill -STOP "$pid" 2>/dev/null || true; count worker_hangs; sleep "$STOP_SECONDS"
         kill -CONT "$pid" 2>/dev/null || true ;;
      2) kill -9 "$pid" 2>/dev/null || true; count shadow_kills; sleep 1; restart shadow odmoe-shadow ;;
    esac
  done
}
chaos &
CHAOS_PID=$!

HTTP=$(awk '/^ *http:/ {print $2; exit}' "$TOPOLOGY")
# One client: completions back to back until the end, every HANGUP_EVERY-th a
# streamed HTTP request abandoned after HANGUP_AFTER s. Counts go to a file.
client() {
  local k=$1 completed=0 failed=0 mismatched=0 hangups=0 n=0 i got
  while (( SECONDS < END )); do
    i=$((RANDOM % ${#PROMPTS[@]}))
    n=$((n + 1))
    if (( HANGUP_EVERY > 0 && n % HANGUP_EVERY == 0 )); then
      curl -s -N --max-time "$HANGUP_AFTER" -H 'Content-Type: application/json' \
        -d "{\"prompt\": \"${PROMPTS[$i]}\", \"max_tokens\": 256, \"stream\": true}" \
        "http://$HTTP/v1/completions" >/dev/null 2>&1 || true
      hangups=$((hangups + 1))
      continue
    fi
    if got=$("$BIN"/odmoe complete --main 127.0.0.1:7700 -n "$TOKENS" --ignore-eos \
             "${PROMPTS[$i]}" 2>"$RUN_DIR/last_error.$k"); then
      if [[ "$got" == "${EXPECTED[$i]}" ]]; then
        completed=$((completed + 1))
      else
        mismatched=$((mismatched + 1))
        echo "MISMATCH for '${PROMPTS[$i]}': got '$got'"
      fi
    else
      failed=$((failed + 1))
      echo "FAILED (client $k): $(tail -n 1 "$RUN_DIR/last_error.$k")"
    fi
  done
  echo "$completed $failed $mismatched $hangups" > "$RUN_DIR/client.$k"
}

END=$((SECONDS + SECONDS_TO_RUN))
CLIENT_PIDS=()
for k in $(seq 1 "$CLIENTS"); do
  client "$k" &
  CLIENT_PIDS+=($!)
done
wait "${CLIENT_PIDS[@]}"
kill "$CHAOS_PID" 2>/dev/null || true
wait "$CHAOS_PID" 2>/dev/null || true
CHAOS_PID=""
# A worker still stopped when the chaos ended goes on.
for id in w0 w1 w2 w3 w4 w5 w6 w7; do
  pid=$(cat "$RUN_DIR/$id.pid" 2>/dev/null || echo "")
  [[ -n "$pid" ]] && kill -CONT "$pid" 2>/dev/null || true
done
completed=0 failed=0 mismatched=0 hangups=0
for k in $(seq 1 "$CLIENTS"); do
  read -r c f m h < "$RUN_DIR/client.$k"
  completed=$((completed + c)) failed=$((failed + f)) mismatched=$((mismatched + m))
  hangups=$((hangups + h))
done
n() { cat "$RUN_DIR/$1" 2>/dev/null || echo 0; }
echo "soak: ${SECONDS_TO_RUN} s, $CLIENTS clients; faults: $(n worker_kills) worker kills," \
     "$(n worker_hangs) worker hangs (${STOP_SECONDS} s), $(n shadow_kills) shadow kills;" \
     "$completed completed, $failed failed, $mismatched mismatched, $hangups hung up by the client"
(( failed == 0 && mismatched == 0 ))
