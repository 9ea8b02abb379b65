# Two front doors: `make demo` runs the main job, `make test` runs every test. Both install what is
# missing (scripts/setup.sh), build with Bazel, then run. A second run does no needless work.
SHELL := /bin/bash
VENV := .venv
PY := $(abspath $(VENV))/bin/python
TF215_PY := $(abspath .venv-tf2.15)/bin/python
BAZEL_CACHE ?= $(HOME)/.cache/bps_tf/bazel-disk
BAZEL_FLAGS := --repo_env=PYTHON_BIN_PATH=$(PY) --disk_cache=$(BAZEL_CACHE)
CORE_TARGETS := //cc:libbps_core.so //cc/python:_core.so //cc/tf:_bps_ops.so //cc/preload:libbps_preload.so
# The server's tests again under AddressSanitizer: buffers shared with transports, threads and other processes.
ASAN_TESTS := //cc/ps:server_test //cc/ps:elastic_servers_test //cc/ps:key_round_test //cc/ps:key_round_wide_test \
              //cc/ps:key_round_in_place_test
CUDA_TARGETS := //cc/cuda:cuda //cc/cuda:gpu_local_test //cc/cuda:gpu_job //cc/cuda:gpu_bench //cc/tf:_bps_ops.so

.PHONY: demo test setup setup-slurm build build-tf2.15 wheel wheels wheels-check test-cc test-py

# TF_CPP_MIN_LOG_LEVEL=2 keeps TensorFlow's start-up notices out of the demo's output.
demo: build
	TF_CPP_MIN_LOG_LEVEL=2 $(VENV)/bin/bpslaunch --local --workers 2 --servers 1 -- $(PY) examples/keras_strategy.py

test: test-cc test-py

setup:
	@scripts/setup.sh

# Builds the core and puts the shared libraries next to the Python package (copied only when changed). The
# op library is named after the TensorFlow line it was built for (bps_tf/compat/op_library.py, op_library_name).
build: setup
	bazel build $(BAZEL_FLAGS) $(CORE_TARGETS)
	@install -C -m 644 bazel-bin/cc/libbps_core.so bazel-bin/cc/python/_core.so bazel-bin/cc/preload/libbps_preload.so bps_tf/
	@install -C -m 644 bazel-bin/cc/tf/_bps_ops.so bps_tf/$$($(PY) -c 'from bps_tf import compat; print(compat.op_library_name())')

# A wheel of bps_tf for .venv's Python and TensorFlow, in dist/ (setup.py builds the native parts with Bazel).
wheel: setup
	$(PY) -m pip wheel . --no-build-isolation --no-deps -w dist

# The wheels for each supported Python and TensorFlow line (2.21: Python 3.10 to 3.13; 2.15: 3.10, 3.11) whose
# Python this machine has (pyenv), in dist/, from the native libraries above; it says which it built and which
# it skipped, and why (scripts/build_wheels.py, docs/install.md).
wheels: build build-tf2.15
	$(PY) scripts/build_wheels.py

# Each of those wheels pip-installed with TensorFlow from the package index into a new virtual environment,
# which trains examples/keras_strategy.py on 2 workers (`make test` tries the one for Python 3.12).
wheels-check: build build-tf2.15
	BPS_TF_WHEEL_CHECK=all $(PY) -m pytest -q tests/multiprocess/test_wheel.py

# The second TensorFlow line: its environment (.venv-tf2.15) and its op library.
build-tf2.15: build
	@scripts/setup_tf2.15.sh
	@scripts/build_ops.sh $(TF215_PY)

# Where nvcc is present, the CUDA build is compiled too, so it cannot rot unnoticed (its tests need a GPU:
# scripts/gpu_check.sh).
test-cc: setup
	bazel test $(BAZEL_FLAGS) //cc/...
	bazel test $(BAZEL_FLAGS) --config=asan $(ASAN_TESTS)
	@if scripts/has_cuda.sh; then bazel build $(BAZEL_FLAGS) --config=cuda $(CUDA_TARGETS) && \
	  bazel test $(BAZEL_FLAGS) --config=cuda //cc/cuda:local_rendezvous_test; \
	else echo "no nvcc: CUDA build skipped"; fi

# SLURM and munge for the tests that submit jobs to a real SLURM cluster on this machine (as root only).
setup-slurm:
	@scripts/setup_slurm.sh

test-py: build build-tf2.15 setup-slurm
	$(PY) -m pytest -q tests
