#!/usr/bin/env bash
# Installs what a build needs on a fresh Debian/Ubuntu machine, skipping what is already there:
# system packages (Bazel, UCX, OpenSSL, gtest, jemalloc) and the pinned Python environment in .venv. The second
# TensorFlow line, which only the tests use, has a script of its own (scripts/setup_tf2.15.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(make bazel-bootstrap libucx-dev ucx-utils libssl-dev libgtest-dev libgmock-dev pkg-config g++ python3-dev python3-venv iproute2
  libjemalloc2)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing system packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi

# The CUDA build needs NCCL: installed only where nvcc is (scripts/has_cuda.sh).
cuda_requirements=/dev/null
if scripts/has_cuda.sh; then cuda_requirements=requirements-cuda.txt; fi

# Reinstall only when the pinned lists or the package metadata change.
stamp=.venv/.bps_tf_requirements
wanted=$(cat requirements.txt requirements-nodeps.txt "$cuda_requirements" pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "setup: installing Python packages into .venv"
  .venv/bin/python -m pip install -q -r requirements.txt
  .venv/bin/python -m pip install -q --no-deps -r requirements-nodeps.txt
  [ "$cuda_requirements" = /dev/null ] || .venv/bin/python -m pip install -q -r "$cuda_requirements"
  .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e .
  echo "$wanted" > "$stamp"
fi
