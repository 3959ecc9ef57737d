#!/usr/bin/env bash
# Installs every Debian package odmoe's build needs (idempotent,
# non-interactive) and builds the project into build/ with ccache.
#
#   scripts/setup.sh                 # install what is missing, configure, build
#   BUILD_DIR=build-dbg CMAKE_BUILD_TYPE=Debug scripts/setup.sh
#   ODMOE_CUDA=OFF scripts/setup.sh  # skip the CUDA backend even if nvcc exists
#   INSTALL_PROMTOOL=0 scripts/setup.sh  # do not fetch promtool (its test then warns)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libabsl-dev libspdlog-dev libfmt-dev catch2 nlohmann-json3-dev libyaml-cpp-dev
  libgrpc++-dev libcpp-httplib-dev libboost-dev libpng-dev libpcre2-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  gnuplot-nox fonts-dejavu-core   # odmoe-bench's plots (tools/bench/gnuplot_chart.h)
  clang libclang-rt-14-dev        # scripts/fuzz.sh: libFuzzer and clang's sanitizer runtimes
)

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# promtool checks the main node's /metrics in the tests (tests/cluster/metrics_test.cpp).
# Only that binary is unpacked from Debian's prometheus package into /usr/local/bin
# (about 2 s; 19 MB download): installing the package would also pull in a web UI
# and start a Prometheus server. Failing to get it is not fatal; the test then warns.
install_promtool() {
  local tmp
  tmp=$(mktemp -d)
  if (cd "$tmp" && { apt-get download -qq prometheus 2>/dev/null ||
                     { $SUDO apt-get update -qq && apt-get download -qq prometheus 2>/dev/null; }; } &&
      dpkg-deb --fsys-tarfile prometheus_*.deb | tar -x ./usr/bin/promtool) &&
     $SUDO install -m 0755 "$tmp/usr/bin/promtool" /usr/local/bin/promtool; then
    echo "setup: installed promtool into /usr/local/bin"
  else
    echo "setup: WARNING: could not install promtool; the metrics test will skip it"
  fi
  rm -rf "$tmp"
}
if [ "${INSTALL_PROMTOOL:-1}" != 0 ] && ! command -v promtool >/dev/null 2>&1; then
  install_promtool
fi

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
# nvcc usually lives outside PATH in /usr/local/cuda.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Worktrees and build directories share the cache (paths hashed relative to the tree).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache \
  -DODMOE_CUDA="${ODMOE_CUDA:-AUTO}" -DODMOE_BUILD_TESTS=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "setup: built into $BUILD_DIR"
