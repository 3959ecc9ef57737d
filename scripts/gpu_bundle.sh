#!/usr/bin/env bash
# Packs what a GPU check needs into .gpurun/ (ignored by git) for a machine that
# has a driver but none of the build's libraries: stripped binaries of BUILD_DIR
# and the shared libraries they need beyond the C/C++ runtime and cuBLAS (the
# GPU machine brings those), as .gpurun/odmoe.tar.xz. Optional extras:
#   BASELINE=path/to/odmoe-run   also packs an earlier build's odmoe-run as odmoe-run-old
#   PEER=/path/to/llama.cpp/build also packs its llama-bench and shared libraries
#                                (.gpurun/peer.tar.xz; docs/benchmarks.md says how it was built)
# Then run scripts/gpu_check.sh there (docs/cuda.md, "Checking on a GPU").
#
#   scripts/gpu_bundle.sh && ls -la .gpurun
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
mkdir -p .gpurun
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for b in odmoe-run odmoe_cuda_tests odmoe_backend_tests odmoe_engine_tests odmoe-bench-ops odmoe-synth \
  odmoe-quantize; do
  strip -o "$stage/bin/$b" "$BUILD_DIR/bin/$b"
done
if [ -n "${BASELINE:-}" ]; then strip -o "$stage/bin/odmoe-run-old" "$BASELINE"; fi
for b in "$stage"/bin/*; do ldd "$b" | awk '{print $3}' | grep -E '^/' || true; done | sort -u |
  grep -v -E 'libc\.so|libm\.so|libstdc\+\+|libgcc_s|libpthread|libdl\.so|librt\.so|libcublas' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
tar -C "$stage" -cJf .gpurun/odmoe.tar.xz bin lib
if [ -n "${PEER:-}" ]; then
  peer=$(mktemp -d)
  mkdir -p "$peer/bin" "$peer/lib"
  strip -o "$peer/bin/llama-bench" "$PEER/bin/llama-bench"
  find "$PEER" -name '*.so*' -type f -exec sh -c 'strip -o "$1/lib/$(basename "$2")" "$2"' _ "$peer" {} \;
  find "$PEER" -name '*.so*' -type l -exec cp -P {} "$peer/lib/" \;
  tar -C "$peer" -cJf .gpurun/peer.tar.xz bin lib
  rm -rf "$peer"
fi
cp scripts/gpu_check.sh scripts/ncu_step_summary.py .gpurun/
git rev-parse --short HEAD >.gpurun/built_from 2>/dev/null || true
pwd >.gpurun/source_dir  # where the test binaries look for the repository's data
ls -la .gpurun
