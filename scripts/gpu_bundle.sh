#!/usr/bin/env bash
# Builds the GPU tests and benchmarks here (bazel --config=cuda) and gathers them, with the UCX libraries
# they load, into a folder that can be carried to a GPU machine without Bazel (scripts/gpu_check.sh runs it).
# Usage: scripts/gpu_bundle.sh [BUNDLE_DIR]   (default .gpu_bundle)
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${1:-.gpu_bundle}
python=$(pwd)/.venv/bin/python
bazel build --config=cuda --repo_env=PYTHON_BIN_PATH="$python" --disk_cache="$HOME/.cache/bps_tf/bazel-disk" \
  //cc/cuda:gpu_local_test //cc/cuda:gpu_job //cc/cuda:gpu_bench
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib/ucx"
cp bazel-bin/cc/cuda/gpu_local_test bazel-bin/cc/cuda/gpu_job bazel-bin/cc/cuda/gpu_bench "$bundle/bin/"
libdir=$(pkg-config --variable=libdir ucx)
for lib in libucp.so.0 libuct.so.0 libucs.so.0 libucm.so.0; do cp -L "$libdir/$lib" "$bundle/lib/"; done
cp -L "$(ldconfig -p | awk '/libnuma.so.1 / {print $NF; exit}')" "$bundle/lib/"
cp -L "$libdir"/ucx/libuct_cma.so.0 "$bundle/lib/ucx/"
cp scripts/gpu_check.sh scripts/gpu_trace_bench.sh "$bundle/"
du -sh "$bundle"
