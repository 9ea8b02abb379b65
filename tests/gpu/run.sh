#!/usr/bin/env bash
# bps_tf's TensorFlow-level GPU tests, on a machine with NVIDIA GPUs, TensorFlow for GPUs and bps_tf built with
# --config=cuda on PYTHONPATH. Each check is a real job on loopback (bpslaunch --local, a CPU server):
#   1. gpu_ops.py: the GPU kernels of push_pull, broadcast and gather, every dtype and odd sizes, eager and
#      tf.function, outputs on the GPU; DistributedGradientTape; 2 worker machines, worker r on GPU r % GPUs;
#   2. BytePSStrategy Keras fit and a strategy.run loop against single-device training (strategy_equivalence.py)
#      and sparse gradients: one process driving every GPU, and 2 worker machines through the server;
#      and one process per GPU (bpslaunch --local-size 2, NCCL across processes; needs 2 GPUs);
#   3. BytePSStrategy's features on GPUs (strategy_features.py): mixed precision (mixed_float16 with loss
#      scaling, mixed_bfloat16), global metrics, evaluate and predict, int32 reductions, uneven data;
#      and under XLA (strategy_xla.py): jit_compile fit and strategy.run loops equal single-process XLA
#      training with the push_pulls inside XLA's GPU computations, jit_compile="auto" compiling with XLA;
#   4. compressed push_pull of GPU tensors (compressed_sums.py); asynchronous training under BytePSStrategy
#      (async_strategy.py, fit and a loop) and with the Horovod API (async_keras.py, fit and a tape loop);
#   5. the GPU kernels' sums with the workers under NVIDIA's MPS (bpslaunch --mps), where the machine has it;
#   6. a worker killed mid-training fails the others with an error naming it.
# Usage: tests/gpu/run.sh [OUT_DIR]   (one log per check in OUT_DIR, default ./gpu_tf_out); exit 0 if all pass.
# GPU_CHECKS="mps killed_worker" runs only the checks it names (as PASS/FAIL lines name them).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-gpu_tf_out}
mkdir -p "$out"
export NVIDIA_TF32_OVERRIDE=0  # float32 matmuls without TF32: results are compared with tight tolerances
export EQUIVALENCE_TOLERANCE=1e-3,1e-4  # GPU kernels sum in other orders than the single-device reference
export TF_FORCE_GPU_ALLOW_GROWTH=true  # several processes share a GPU when there are fewer GPUs than workers
export NCCL_NVLS_ENABLE=0 TF_CPP_MIN_LOG_LEVEL=2 PYTHONUNBUFFERED=1
# Every process imports bps_tf from PYTHONPATH (the CUDA build), never from the source tree it starts in; the
# checkout's root comes after it, for the tests' own modules (tests.workers, testing).
export PYTHONSAFEPATH=1 PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD"
gpus=$(nvidia-smi -L | wc -l)
failures=0
wanted() { [ -z "${GPU_CHECKS:-}" ] || [[ " $GPU_CHECKS " == *" $1 "* ]]; }

check() {  # check NAME MARKER COUNT EXIT BPSLAUNCH_ARGS...: COUNT lines carry MARKER; the job exits EXIT ("any")
  local name=$1 marker=$2 count=$3 want=$4
  shift 4
  wanted "$name" || return 0
  local started=$SECONDS
  timeout 600 python3 -m bps_tf.launcher --local "$@" > "$out/$name.log" 2>&1
  local code=$? found
  found=$(grep -c "$marker" "$out/$name.log")
  local retraced  # by bps_tf's own functions (the checks' own functions retrace by design)
  retraced=$(grep "triggered tf.function retracing" "$out/$name.log" | grep -vc "check_")
  if { [ "$want" = any ] || [ "$code" = "$want" ]; } && [ "$found" = "$count" ]; then
    echo "PASS $name ($((SECONDS - started)) s, retracing warnings: $retraced)"
  else
    echo "FAIL $name (exit $code, $found of $count '$marker')"
    grep -v "^\[worker .\]   " "$out/$name.log" | tail -20
    failures=$((failures + 1))
  fi
}

echo "== $gpus GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
python3 -c "import tensorflow as tf; print('== TensorFlow', tf.__version__)"
check gpu_ops "gpu ops exact" 2 0 --workers 2 --servers 1 -- python3 tests/gpu/gpu_ops.py
# One process driving every GPU (with one GPU and one worker nothing is reduced: sparse gradients need more).
one_process_checks=(strategy_equivalence.py "$gpus")
[ "$gpus" -gt 1 ] && one_process_checks+=(-- sparse_gradients.py "$gpus")
check strategy_one_process "strategy equals single-process training" 1 0 --workers 1 --servers 1 -- \
  python3 tests/workers/run_checks.py "${one_process_checks[@]}"
check strategy_two_machines "strategy equals single-process training" 2 0 --workers 2 --servers 1 -- \
  python3 tests/workers/run_checks.py strategy_equivalence.py "$gpus" -- sparse_gradients.py "$gpus"
# One process per GPU (bpslaunch --local-size N): NCCL across the machine's processes, one per-machine tensor
# per GPU slice at the servers; one machine, then two machines sharing the host's GPUs.
if [ "$gpus" -gt 1 ]; then
  check strategy_process_per_gpu "strategy equals single-process training" 2 0 --workers 1 --local-size 2 \
    --servers 1 -- python3 tests/workers/run_checks.py strategy_equivalence.py 1
  check strategy_process_per_gpu_two_machines "strategy equals single-process training" 4 0 --workers 2 \
    --local-size 2 --servers 1 -- python3 tests/workers/run_checks.py strategy_equivalence.py 1
elif wanted strategy_process_per_gpu || wanted strategy_process_per_gpu_two_machines; then
  echo "SKIP strategy_process_per_gpu, strategy_process_per_gpu_two_machines (one process per GPU needs 2 GPUs)"
fi
check strategy_features "strategy features ok" 2 0 --workers 2 --servers 1 -- \
  python3 tests/workers/run_checks.py strategy_features.py
# 2 worker machines sharing the GPUs through the server, every push_pull inside XLA's computations.
hlo=$(mktemp -d)
XLA_DUMP_DIR=$hlo XLA_FLAGS="--xla_dump_to=$hlo --xla_dump_hlo_as_text" check strategy_xla \
  "XLA under the strategy equals single-process XLA training" 2 0 --workers 2 --servers 1 -- \
  python3 tests/workers/strategy_xla.py 1
rm -rf "$hlo"
# Compressed push_pull of GPU tensors (encoded on the CPU) against the NumPy model of workers and servers.
BYTEPS_PARTITION_BYTES=65536 check compressed "compressed sums match the model" 2 0 --workers 2 --servers 1 -- \
  python3 tests/workers/compressed_sums.py
# Asynchronous training of variables on the GPU (the servers hold the weights): Keras fit, whose
# jit_compile="auto" stays off XLA there, and a strategy.run loop, each to a test accuracy of 0.9 or more.
for how in fit loop; do
  EPOCHS=10 check "strategy_async_$how" "strategy-$how async loss [0-9.]* accuracy 0\.9" 2 0 --async --workers 2 \
    --servers 1 -- \
    python3 tests/workers/async_strategy.py "$how"
done
# The Horovod API's: DistributedOptimizer in Keras fit, and Horovod's TF2 loop with a DistributedGradientTape.
for how in fit tape; do
  EPOCHS=10 check "keras_async_$how" "$how async loss [0-9.]* accuracy 0\.9" 2 0 --async --workers 2 --servers 1 -- \
    python3 tests/workers/async_keras.py "$how"
done

# Two worker machines sharing the GPUs under NVIDIA's MPS (bpslaunch --mps): the GPU kernels' sums again, and
# the daemon bpslaunch started served both workers (its log, in a folder given to it and so kept, names each
# new client) and is gone after the job.
if wanted mps && command -v nvidia-cuda-mps-control > /dev/null; then
  mps_log=$(mktemp -d)
  mps_processes() { pgrep -u "$(id -u)" -c -f "nvidia-cuda-mps-(control -f|server)"; }
  before=$(mps_processes)
  failed_before=$failures
  CUDA_MPS_LOG_DIRECTORY=$mps_log check mps "gpu ops exact" 2 0 --mps --workers 2 --servers 1 -- \
    python3 tests/gpu/gpu_ops.py
  clients=$(cat "$mps_log"/* 2>/dev/null | grep -c "NEW CLIENT")  # (its log file, or its output in -f)
  sleep 1
  left=$(( $(mps_processes) - before ))
  cp -r "$mps_log" "$out/mps_log" && rm -rf "$mps_log"
  echo "     mps: ${clients:-0} clients in the daemon's log (2 or more wanted), $left MPS processes left after the job"
  if [ "$failures" = "$failed_before" ] && { [ "${clients:-0}" -lt 2 ] || [ "$left" -gt 0 ]; }; then
    echo "FAIL mps"
    failures=$((failures + 1))
  fi
elif wanted mps; then
  echo "SKIP mps (nvidia-cuda-mps-control is not on PATH)"
fi

# A killed worker: the roles are started one by one (bpslaunch --local would stop the others itself), and
# the surviving worker must report the lost one.
killed_worker() {
  local started=$SECONDS port secret pids=()
  port=$(python3 -c 'from testing.jobs import free_port; print(free_port())')
  secret=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
  export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port DMLC_NUM_WORKER=2 DMLC_NUM_SERVER=1 \
    DMLC_NODE_HOST=127.0.0.1 BYTEPS_JOB_SECRET=$secret
  DMLC_ROLE=scheduler timeout 300 python3 -m bps_tf.launcher > "$out/killed_scheduler.log" 2>&1 & pids+=($!)
  DMLC_ROLE=server timeout 300 python3 -m bps_tf.launcher > "$out/killed_server.log" 2>&1 & pids+=($!)
  DMLC_ROLE=worker DMLC_WORKER_ID=1 timeout 300 python3 tests/gpu/gpu_killed_worker.py > "$out/killed_worker1.log" 2>&1 &
  pids+=($!)
  DMLC_ROLE=worker DMLC_WORKER_ID=0 timeout 300 python3 tests/gpu/gpu_killed_worker.py > "$out/killed_worker0.log" 2>&1
  local code=$?
  kill "${pids[@]}" 2>/dev/null
  wait 2>/dev/null
  unset DMLC_PS_ROOT_URI DMLC_PS_ROOT_PORT DMLC_NUM_WORKER DMLC_NUM_SERVER DMLC_NODE_HOST BYTEPS_JOB_SECRET
  if [ "$code" = 0 ] && grep -q "killed worker named" "$out/killed_worker0.log"; then
    echo "PASS killed_worker ($((SECONDS - started)) s): $(grep -m1 "failed after" "$out/killed_worker0.log" | cut -c1-240)"
  else
    echo "FAIL killed_worker (worker 0 exit $code)"
    tail -20 "$out/killed_worker0.log"
    failures=$((failures + 1))
  fi
}
wanted killed_worker && killed_worker
echo "== $failures failed"
exit $((failures > 0))
