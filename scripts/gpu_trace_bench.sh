#!/usr/bin/env bash
# The GPU push_pull benchmark of 2 workers sharing this host's GPU 0 (gpu_job bench, 1 CPU server),
# traced: each worker's timeline (BYTEPS_TRACE_ON) in OUT/LABEL/trace/RANK/comm.json, logs in OUT/LABEL/.
# Runs from the GPU bundle (scripts/gpu_bundle.sh copies it there); NAME=VALUE arguments go into the
# environment of the workers and the server (e.g. BYTEPS_GPU_DIRECT_COPIES=0); TRACE=0 turns tracing off.
# MODE=bench_encoder times an encoder's gradients all in flight instead.
# Usage: .gpu_bundle/gpu_trace_bench.sh OUT LABEL [NAME=VALUE ...]   (sizes from BPS_BENCH_MB)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1 label=$2
shift 2
mkdir -p "$out/$label"
nccl_lib=${BYTEPS_NCCL_HOME:+$BYTEPS_NCCL_HOME/lib}
nccl_lib=${nccl_lib:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))')}
export LD_LIBRARY_PATH="$here/lib:$nccl_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_MODULE_DIR="$here/lib/ucx" NCCL_NVLS_ENABLE=0
port=$((20000 + RANDOM % 20000))
common="DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port DMLC_NUM_WORKER=2 DMLC_NUM_SERVER=1 DMLC_NODE_HOST=127.0.0.1 BYTEPS_TIMEOUT=60 BYTEPS_LOCAL_SIZE=1 BYTEPS_JOB_SECRET=trace-$port-$RANDOM$RANDOM$RANDOM"
env $common DMLC_ROLE=scheduler timeout 300 "$here/bin/gpu_job" > "$out/$label/scheduler.log" 2>&1 &
env $common DMLC_ROLE=server "$@" timeout 300 "$here/bin/gpu_job" > "$out/$label/server.log" 2>&1 &
pids=()
for m in 0 1; do
  env $common DMLC_ROLE=worker DMLC_WORKER_ID=$m BYTEPS_LOCAL_RANK=0 BYTEPS_TRACE_ON="${TRACE:-1}" \
    BYTEPS_TRACE_DIR="$out/$label/trace" "$@" timeout 300 "$here/bin/gpu_job" "${MODE:-bench}" > "$out/$label/worker$m.log" 2>&1 &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
wait
cat "$out/$label"/worker*.log
exit $rc
