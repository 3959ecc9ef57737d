#!/usr/bin/env bash
# The GPU checks, run on a machine with an NVIDIA GPU from the bundle that
# scripts/gpu_bundle.sh made (.gpurun/ in the repository root): the CUDA suite
# and the cross-backend op cases, the shipped model on cuda:0 against cpu,
# Mixtral-shaped Q4_K_M and Q6_K files made there (odmoe-synth, odmoe-quantize),
# the decode GEMV rows, single-process decode against the previous build and
# llama.cpp when bundled (and the same build with ODMOE_ROUTED_EXPERTS=0,
# ODMOE_CUDA_NORM_QUANT=0 or ODMOE_CUDA_PDL=0), and the kernel times of one
# decode step (ncu).
# Logs go to $OUT (or /tmp/gpu_check); the summary is printed.
#
#   bash .gpurun/gpu_check.sh            # LAYERS=2 for smaller files, PROFILE=0 to skip ncu
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
t0=$(date +%s)
mark() { echo "== $1 at +$(($(date +%s) - t0)) s"; }
# The tests look for the repository's data where it was built (ODMOE_SOURCE_DIR,
# recorded by gpu_bundle.sh): that path is made to point here.
src=$(cat .gpurun/source_dir)
[ -e "$src" ] || { mkdir -p "$(dirname "$src")" && ln -sfn "$PWD" "$src"; }
mkdir -p /tmp/o /tmp/p
tar -C /tmp/o -xJf .gpurun/odmoe.tar.xz
[ -f .gpurun/peer.tar.xz ] && tar -C /tmp/p -xJf .gpurun/peer.tar.xz
cublas=$(dirname "$(find / -xdev \( -type f -o -type l \) -name 'libcublas.so.13*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=/tmp/o/lib:/tmp/p/lib:$cublas:/usr/local/cuda/lib64
B=/tmp/o/bin
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
( "$B/odmoe-synth" --out /tmp/mx.gguf --layers "${LAYERS:-4}" >"$OUT/files.log" 2>&1 &&
  "$B/odmoe-quantize" /tmp/mx.gguf /tmp/q4km.gguf --type Q4_K_M >>"$OUT/files.log" 2>&1 &&
  "$B/odmoe-quantize" /tmp/mx.gguf /tmp/q6k.gguf --type Q6_K >>"$OUT/files.log" 2>&1
  rm -f /tmp/mx.gguf ) &
files=$!
"$B/odmoe_cuda_tests" >"$OUT/cuda_tests.log" 2>&1; echo "odmoe_cuda_tests rc=$?: $(tail -2 "$OUT/cuda_tests.log" | head -1)"
"$B/odmoe_backend_tests" "every available backend matches cpu on every op,every backend's*,MatMulById*,products by ids*" \
  >"$OUT/backend_tests.log" 2>&1
echo "backend op cases rc=$?: $(tail -2 "$OUT/backend_tests.log" | head -1)"
"$B/odmoe_engine_tests" "engine: routing kept on the backend*" >"$OUT/engine_tests.log" 2>&1
echo "routed experts (engine) rc=$?: $(tail -2 "$OUT/engine_tests.log" | head -1)"
for be in cuda:0 cpu; do
  echo "shipped model on $be: $("$B/odmoe-run" --model models/tiny-mixtral-f16.gguf --backend "$be" --prompt "The history of the" -n 64 2>/dev/null | md5sum)"
done
mark tests
wait "$files"; tail -1 "$OUT/files.log"; mark files
"$B/odmoe-bench-ops" --backend cuda:0 --decode-only --seconds 0.3 --types q4_K,q6_K,q8_0 \
  --shapes 14336x4096,4096x14336,64x4096 >"$OUT/ops.log" 2>&1
grep -E '^(q4_K|q6_K|q8_0)|copy' "$OUT/ops.log"
# The same build with one of this backend's steps turned off: every layer's
# routing brought to the host (the plan), every product quantizing its own
# activations, plain kernel launches, decode attention's plain loops; each
# must print the same text.
variants=("ODMOE_ROUTED_EXPERTS=0" "ODMOE_CUDA_NORM_QUANT=0" "ODMOE_CUDA_PDL=0"
  "ODMOE_CUDA_ATTENTION_AHEAD=0")
run_decode() {  # file, output name, then env assignments and the binary
  local f=$1 name=$2; shift 2
  echo "$f $name: $(env "$@" --model "/tmp/$f.gguf" --backend cuda:0 --prompt "The history of the" -n 256 --ignore-eos 2>&1 >"/tmp/$f-$name.txt" | grep -o 'decode [0-9.]* tokens/s')"
  [ -s "/tmp/$f-$name.txt" ] || echo "$f $name: NO OUTPUT"
}
for f in q4km q6k; do
  for _ in 1 2; do
    run_decode "$f" new "$B/odmoe-run"
    [ -x "$B/odmoe-run-old" ] && run_decode "$f" old "$B/odmoe-run-old"
    for v in "${variants[@]}"; do run_decode "$f" "$v" "$v" "$B/odmoe-run"; done
  done
  [ -x "$B/odmoe-run-old" ] && { cmp -s "/tmp/$f-new.txt" "/tmp/$f-old.txt" && echo "$f: same text as old" || echo "$f: TEXT DIFFERS FROM OLD"; }
  for v in "${variants[@]}"; do
    cmp -s "/tmp/$f-new.txt" "/tmp/$f-$v.txt" && echo "$f: same text with $v" || echo "$f: TEXT DIFFERS WITH $v"
  done
  [ -x /tmp/p/bin/llama-bench ] && /tmp/p/bin/llama-bench -m "/tmp/$f.gguf" -ngl 99 -p 0 -n 256 -r 3 2>&1 | grep -E 'tg256'
done
mark decode
if [ "${PROFILE:-1}" = 1 ]; then
  timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    "$B/odmoe-run" --model /tmp/q4km.gguf --backend cuda:0 --prompt "The history" -n 3 --ignore-eos \
    >"$OUT/ncu_q4km.csv" 2>"$OUT/ncu.err"
  echo "ncu rc=$? ($OUT/ncu_q4km.csv: one row per kernel; the last GetRows starts the last step)"
  python3 .gpurun/ncu_step_summary.py "$OUT/ncu_q4km.csv" || echo "(no python3: summary skipped)"
  # Why the decode products run below the copy bandwidth: speed of light,
  # occupancy and launch shape of a few K-family decode launches (by ids too).
  timeout 120 ncu --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section MemoryWorkloadAnalysis -k regex:KMatVecKernel --launch-skip 40 --launch-count 4 \
    "$B/odmoe-run" --model /tmp/q4km.gguf --backend cuda:0 --prompt "The history" -n 3 --ignore-eos \
    >"$OUT/ncu_kmatvec.txt" 2>>"$OUT/ncu.err"
  echo "ncu sections rc=$?: $(grep -cE 'Memory Throughput|Achieved Occupancy' "$OUT/ncu_kmatvec.txt") lines in $OUT/ncu_kmatvec.txt"
  mark profile
fi
