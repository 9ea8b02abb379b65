#!/usr/bin/env bash
# Builds bps_tf's TensorFlow op library against the TensorFlow of another Python and puts it next to the
# package as bps_tf/_bps_ops_tf<major>.<minor>.so, where that TensorFlow looks for it. The C++ core is the
# one `make build` made; each Python gets a Bazel output base of its own, so switching between TensorFlow
# lines rebuilds nothing.
#
#   scripts/build_ops.sh /path/to/python    # a Python with TensorFlow 2.15 ... 2.21 installed
set -euo pipefail
cd "$(dirname "$0")/.."
# -s: a virtual environment's python is a symlink to the system one; resolving it would lose the venv.
python=$(realpath -s "${1:?usage: scripts/build_ops.sh PYTHON}")
name=$("$python" -c 'from bps_tf import compat; print(compat.op_library_name())')
output_base="$HOME/.cache/bps_tf/bazel-$(echo "$python" | sha256sum | cut -c1-12)"
flags=(--repo_env=PYTHON_BIN_PATH="$python" --disk_cache="$HOME/.cache/bps_tf/bazel-disk")
# --symlink_prefix=/ leaves the workspace's bazel-* links to the main build.
bazel --output_base="$output_base" build "${flags[@]}" --symlink_prefix=/ //cc/tf:_bps_ops.so
bin=$(bazel --output_base="$output_base" info "${flags[@]}" bazel-bin 2>/dev/null)
install -C -m 644 "$bin/cc/tf/_bps_ops.so" "bps_tf/$name"
echo "bps_tf/$name: built for $python"
