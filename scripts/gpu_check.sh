#!/usr/bin/env bash
# The whole GPU check, for anyone with a GPU (NVIDIA driver, NCCL from `pip install nvidia-nccl-cu13` or
# BYTEPS_NCCL_HOME). Run it from a bundle made by scripts/gpu_bundle.sh (no Bazel needed there), or from the
# repository, where it makes the bundle first.
#   1. gpu_local_test: local NCCL reduce/broadcast, reduce-scatter/all-gather and the GPU push_pull pipeline
#      (two workers as threads with a server) on 1, 2, 4 and 8 GPUs (as many as there are), every dtype,
#      odd sizes, exact;
#   2. real jobs on loopback with a CPU server (bps_tf's TCP transport, the default, and the server's shared
#      memory), exact, in both local-reduction modes (and once with the GPU's copies through the pinned
#      staging instead of straight into the server's shared memory):
#      2 worker machines x 1 process with one GPU each, then one process driving every GPU; 2 machines x
#      N processes (one per GPU of the host, the machine's processes share an NCCL communicator and each
#      pushes its own part); 1 machine x N processes (local NCCL only, and forced through the servers);
#   3. the GPU push_pull benchmark of such jobs (end-to-end against the sum of its stages; direct copies,
#      then through the staging), the same for an encoder's 197 gradients all in flight, and gpu_bench
#      (pinned copies against cudaMemcpy's peak; local reductions against NCCL all-reduce).
# Usage: gpu_check.sh [OUT_DIR]   (logs and JSON results go to OUT_DIR, default ./gpu_check_out)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x "$here/bin/gpu_job" ]; then
  "$here/gpu_bundle.sh" "$here/../.gpu_bundle" && exec "$here/../.gpu_bundle/gpu_check.sh" "$@"
  exit 1
fi
out=${1:-gpu_check_out}
mkdir -p "$out"
nccl_lib=${BYTEPS_NCCL_HOME:+$BYTEPS_NCCL_HOME/lib}
nccl_lib=${nccl_lib:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))')}
export LD_LIBRARY_PATH="$here/lib:$nccl_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_MODULE_DIR="$here/lib/ucx"
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared machines
failures=0

step() { echo "== $*"; }

step "GPUs"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader

step "gpu_local_test"
timeout 600 "$here/bin/gpu_local_test" > "$out/gpu_local_test.log" 2>&1 || failures=$((failures + 1))
grep -E "^\[ +(OK|PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|first wrong|: " "$out/gpu_local_test.log" | tail -40

# A job of MACHINES worker machines x LOCAL worker processes (process l on GPU l when LOCAL > 1) with
# 1 CPU server, on loopback.
run_job() {  # run_job LABEL MACHINES LOCAL WORKER_ARGS...
  local label=$1 machines=$2 local_size=$3; shift 3
  local port=$((20000 + RANDOM % 20000))
  local common="DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port DMLC_NUM_WORKER=$machines DMLC_NUM_SERVER=1 DMLC_NODE_HOST=127.0.0.1 BYTEPS_TIMEOUT=60 BYTEPS_LOCAL_SIZE=$local_size BYTEPS_JOB_SECRET=gpu-check-$port-$RANDOM$RANDOM$RANDOM"
  env $common DMLC_ROLE=scheduler timeout 300 "$here/bin/gpu_job" > "$out/$label.scheduler.log" 2>&1 &
  env $common DMLC_ROLE=server timeout 300 "$here/bin/gpu_job" > "$out/$label.server.log" 2>&1 &
  local pids=() logs=()
  for ((m = 0; m < machines; m++)); do
    for ((l = 0; l < local_size; l++)); do
      logs+=("$out/$label.worker$m.$l.log")
      env $common DMLC_ROLE=worker DMLC_WORKER_ID=$m BYTEPS_LOCAL_RANK=$l timeout 300 "$here/bin/gpu_job" "$@" \
        > "${logs[-1]}" 2>&1 &
      pids+=($!)
    done
  done
  local rc=0
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  wait
  cat "${logs[@]}"
  [ $rc -eq 0 ] || { echo "job $label failed (logs in $out)"; failures=$((failures + 1)); }
}

step "2 machines x 1 worker process, reduce-scatter"
run_job check_scatter 2 1 check
step "2 machines x 1 worker process, reduce-to-root"
BPS_GPU_MODE=root run_job check_root 2 1 check
step "2 machines x 1 worker process, reduce-scatter, copies through the pinned staging (BYTEPS_GPU_DIRECT_COPIES=0)"
BYTEPS_GPU_DIRECT_COPIES=0 run_job check_staged 2 1 check
gpus=$(nvidia-smi -L | wc -l)
if [ "$gpus" -ge 2 ]; then  # one process per GPU, every GPU of the host
  step "2 machines x $gpus worker processes (one per GPU), reduce-scatter"
  run_job check_per_gpu_scatter 2 "$gpus" check
  step "2 machines x $gpus worker processes (one per GPU), reduce-to-root"
  BPS_GPU_MODE=root run_job check_per_gpu_root 2 "$gpus" check
  step "1 machine x $gpus worker processes (one per GPU): local NCCL only"
  run_job check_per_gpu_local 1 "$gpus" check
  step "1 machine x $gpus worker processes (one per GPU), forced through the server"
  BYTEPS_FORCE_DISTRIBUTED=1 run_job check_per_gpu_forced 1 "$gpus" check
fi
step "GPU push_pull benchmark (2 machines x 1 worker process)"
run_job bench 2 1 bench > "$out/gpu_push_pull_bench.jsonl"  # not through a pipe: run_job counts failures
cat "$out/gpu_push_pull_bench.jsonl"
step "GPU push_pull benchmark (2 machines x 1 worker process), copies through the pinned staging (the comparison)"
BYTEPS_GPU_DIRECT_COPIES=0 run_job bench_staged 2 1 bench > "$out/gpu_push_pull_bench_staged.jsonl"
cat "$out/gpu_push_pull_bench_staged.jsonl"
step "The gradients of an encoder all in flight at once (2 machines x 1 worker process): direct copies, then staged"
run_job bench_encoder 2 1 bench_encoder > "$out/gpu_encoder_set_bench.jsonl"
BYTEPS_GPU_DIRECT_COPIES=0 run_job bench_encoder_staged 2 1 bench_encoder > "$out/gpu_encoder_set_bench_staged.jsonl"
cat "$out/gpu_encoder_set_bench.jsonl" "$out/gpu_encoder_set_bench_staged.jsonl"
if [ "$gpus" -ge 2 ]; then
  step "GPU push_pull benchmark (2 machines x $gpus worker processes, one per GPU)"
  run_job bench_per_gpu 2 "$gpus" bench > "$out/gpu_push_pull_bench_per_gpu.jsonl"
  cat "$out/gpu_push_pull_bench_per_gpu.jsonl"
fi
step "gpu_bench"
timeout 600 "$here/bin/gpu_bench" | tee "$out/gpu_bench.jsonl" || failures=$((failures + 1))

step "done: $failures failure(s)"
exit $((failures > 0))
