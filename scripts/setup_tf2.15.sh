#!/usr/bin/env bash
# The second supported TensorFlow line (TensorFlow 2.15 with tf.estimator and Keras 2) in a virtual environment
# of its own, .venv-tf2.15, for `make test` and whoever runs that line (`make build-tf2.15`). Skips what is
# already installed. Needs scripts/setup.sh first (the system packages).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TF215=.venv-tf2.15
if [ ! -x "$TF215/bin/python" ]; then
  echo "setup: creating $TF215"
  "$PYTHON" -m venv "$TF215"
fi
stamp=$TF215/.bps_tf_requirements
wanted=$(cat requirements-tf2.15.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "setup: installing Python packages into $TF215"
  "$TF215/bin/python" -m pip install -q -r requirements-tf2.15.txt
  "$TF215/bin/python" -m pip install -q --no-deps --no-build-isolation -e .
  echo "$wanted" > "$stamp"
fi
