#!/usr/bin/env bash
# The ten-node testbed with every node in its own network namespace, as if
# each were its own machine on a LAN: one veth pair per node onto a bridge
# (10.77.0.0/24), each link shaped to 1 Gbit/s with `tc tbf` in both
# directions. Starts it with odmoe-cluster (topology derived from
# deploy/testbed-10.yaml), sends one greedy completion from outside the
# namespaces, checks the text equals the single-process engine's, and tears
# everything down again (also on failure).
#
#   sudo scripts/netns_testbed.sh            # needs root; exit 77 = skipped
#   RATE=100mbit scripts/netns_testbed.sh    # another link rate
#   DELAY=0.5ms scripts/netns_testbed.sh     # plus a one-way delay per link (netem)
#   BUILD_DIR=build-rel TOKENS=64 PROMPT="Once upon a time" scripts/netns_testbed.sh
#   MODEL=/tmp/mixtral-2l-q8_0.gguf TIMEOUT=600 scripts/netns_testbed.sh   # another model
#   BENCH="--quick" scripts/netns_testbed.sh # then run odmoe-bench on these links
#                                            # (its deployments keep the namespaces)
#
# DELAY needs the kernel's netem qdisc (sch_netem); where it is missing the
# script says so and skips (77) rather than run without the delay asked for.
# Needs: iproute2 (ip, tc), a kernel with network namespaces, veth, bridge
# and the tbf qdisc. Skips (exit 77) when not root or when namespaces, veth
# pairs or the bridge cannot be created; fails (1) when a binary is not built.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
RATE=${RATE:-1gbit}
DELAY=${DELAY:-}
BENCH=${BENCH:-}
PROMPT=${PROMPT:-"The meaning of life is"}
TOKENS=${TOKENS:-32}
MODEL=${MODEL:-$PWD/models/tiny-mixtral-f16.gguf}
NODES=(main shadow w0 w1 w2 w3 w4 w5 w6 w7)
declare -A IP=([main]=1 [shadow]=2 [w0]=10 [w1]=11 [w2]=12 [w3]=13 [w4]=14 [w5]=15 [w6]=16 [w7]=17)
BRIDGE=odmoe-br
WORK=""

skip() { echo "netns_testbed: SKIPPED: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "needs root (network namespaces)"
command -v ip >/dev/null && command -v tc >/dev/null || skip "needs iproute2 (ip, tc)"
ip netns add odmoe-probe 2>/dev/null || skip "cannot create network namespaces here"
ip netns del odmoe-probe
ip link add odmoe-probe type veth peer name odmoe-probe1 2>/dev/null ||
  skip "cannot create veth pairs here"
if [[ -n "$DELAY" ]] && ! tc qdisc add dev odmoe-probe root netem delay "$DELAY" 2>/dev/null; then
  ip link del odmoe-probe
  skip "DELAY=$DELAY needs the netem qdisc (sch_netem), which this kernel lacks"
fi
ip link del odmoe-probe
for bin in odmoe-cluster odmoe-main odmoe-shadow odmoe-worker odmoe odmoe-run; do
  [[ -x "$BIN/$bin" ]] || { echo "netns_testbed: FAILED: $BIN/$bin is not built"; exit 1; }
done

cleanup() {
  trap '' INT TERM  # a second Ctrl-C must not cut the teardown short
  if [[ -n "$WORK" && -f "$WORK/testbed.yaml" ]]; then
    "$BIN"/odmoe-cluster down "$WORK/testbed.yaml" --run-dir "$WORK/run" >/dev/null 2>&1 || true
  fi
  for n in "${NODES[@]}"; do
    ip netns del "odmoe-$n" 2>/dev/null || true
    ip link del "ov-$n" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  [[ -n "$WORK" ]] && rm -rf "$WORK"
  return 0
}
cleanup  # leftovers of an interrupted run
trap cleanup EXIT
trap 'exit 130' INT TERM  # so that the EXIT trap runs on Ctrl-C and kill too
WORK=$(mktemp -d /tmp/odmoe-netns.XXXXXX)

ip link add "$BRIDGE" type bridge || skip "cannot create a bridge here"
ip addr add 10.77.0.254/24 dev "$BRIDGE"
ip link set "$BRIDGE" up
for n in "${NODES[@]}"; do
  ns="odmoe-$n"
  ip netns add "$ns"
  ip link add "ov-$n" type veth peer name "ovp-$n"
  ip link set "ovp-$n" netns "$ns"
  ip link set "ov-$n" master "$BRIDGE" up
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "ovp-$n" name eth0
  ip -n "$ns" addr add "10.77.0.${IP[$n]}/24" dev eth0
  ip -n "$ns" link set eth0 up
  # 1 Gbit/s each way: egress of the node, and egress of the bridge port towards it;
  # with DELAY, netem delays each direction by it before the rate limit.
  if [[ -n "$DELAY" ]]; then
    ip netns exec "$ns" tc qdisc add dev eth0 root handle 1: netem delay "$DELAY"
    ip netns exec "$ns" tc qdisc add dev eth0 parent 1: handle 2: tbf rate "$RATE" \
      burst 128kb latency 50ms
    tc qdisc add dev "ov-$n" root handle 1: netem delay "$DELAY"
    tc qdisc add dev "ov-$n" parent 1: handle 2: tbf rate "$RATE" burst 128kb latency 50ms
  else
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$RATE" burst 128kb latency 50ms
    tc qdisc add dev "ov-$n" root tbf rate "$RATE" burst 128kb latency 50ms
  fi
done

# The testbed topology with every node at its namespace's address. Those are
# not loopback, so the plain TCP between nodes is said explicitly (the bridge
# is private to this machine; a real LAN would use node_tls).
{
  echo "model: $MODEL"
  echo "prediction: shadow"
  echo "insecure: true"
  echo "main: { id: main, address: \"10.77.0.1:7700\", netns: odmoe-main }"
  echo "shadow: { id: shadow, address: \"10.77.0.2:7701\", netns: odmoe-shadow, quantization: q8_0 }"
  echo "workers:"
  echo "  nodes:"
  for i in 0 1 2 3 4 5 6 7; do
    echo "    - { id: w$i, address: \"10.77.0.${IP[w$i]}:7710\", netns: odmoe-w$i }"
  done
} > "$WORK/testbed.yaml"

"$BIN"/odmoe-cluster up "$WORK/testbed.yaml" --run-dir "$WORK/run" --timeout "${TIMEOUT:-60}"
got=$("$BIN"/odmoe complete --main 10.77.0.1:7700 -n "$TOKENS" --ignore-eos --stats "$PROMPT" \
      2>"$WORK/stats.txt")
want=$("$BIN"/odmoe-run --model "$MODEL" -n "$TOKENS" --ignore-eos \
       --prompt "$PROMPT" 2>/dev/null)
LINKS="$RATE tbf${DELAY:+ + $DELAY netem delay} per link direction, each node in its own namespace"
echo "links: $LINKS"
echo "cluster: $PROMPT$got"
cat "$WORK/stats.txt"
if [[ "$PROMPT$got" != "$want" ]]; then
  echo "netns_testbed: FAILED: the cluster's text differs from odmoe-run's:"
  echo "$want"
  exit 1
fi
echo "netns_testbed: OK (identical to the single-process engine)"
if [[ -n "$BENCH" ]]; then
  "$BIN"/odmoe-cluster down "$WORK/testbed.yaml" --run-dir "$WORK/run" >/dev/null
  # shellcheck disable=SC2086  # BENCH holds several flags
  "$BIN"/odmoe-bench --topology "$WORK/testbed.yaml" --network "$LINKS" \
    --out "${BENCH_OUT:-bench-netns}" $BENCH
fi
