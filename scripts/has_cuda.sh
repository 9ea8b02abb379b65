#!/bin/sh
# Exit status 0 when CUDA's compiler is on this machine (CUDA_HOME, PATH, or /usr/local/cuda).
[ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ] && exit 0
command -v nvcc >/dev/null 2>&1 && exit 0
[ -x /usr/local/cuda/bin/nvcc ]
