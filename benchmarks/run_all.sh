#!/usr/bin/env bash
# Every figure of docs/performance.md, in the order there: results (JSON) and plots (PNG) in docs/performance/.
# Needs root for the emulated clusters (network namespaces and tc). About 30 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=docs/performance
run() { echo "+ $*"; timeout 1200 "$PY" -m "$@"; }

# 1. push_pull against TF's RING all-reduce on loopback.
run benchmarks.push_pull_loopback --workers 2 --servers 1 --output $OUT/loopback_w2_s1.json
run benchmarks.push_pull_loopback --workers 2 --servers 2 --output $OUT/loopback_w2_s2.json
run benchmarks.push_pull_loopback --workers 4 --servers 2 --output $OUT/loopback_w4_s2.json

# 2. The same on an emulated cluster of 1 Gbit/s links; servers on their own hosts, then co-located.
run benchmarks.push_pull_cluster --workers 2 --servers 2 --rate 1gbit --output $OUT/cluster_w2_s2_1gbit.json
run benchmarks.push_pull_cluster --workers 4 --servers 4 --rate 1gbit --output $OUT/cluster_w4_s4_1gbit.json
run benchmarks.push_pull_cluster --workers 4 --servers 4 --rate 1gbit --colocate \
    --output $OUT/cluster_w4_s4_1gbit_colocated.json
# With UCX's eager protocol for every size and 128 KB partitions (see docs/performance.md, "What bounds push_pull").
run benchmarks.push_pull_cluster --workers 4 --servers 4 --rate 1gbit --env UCX_RNDV_THRESH=inf \
    --env BYTEPS_PARTITION_BYTES=128000 --output $OUT/cluster_w4_s4_1gbit_tuned.json

# 3. End-to-end training throughput.
run benchmarks.train_cluster --workers 4 --servers 4 --rate 1gbit --strategies local,mwms,bps,bps-tuned \
    --env UCX_RNDV_THRESH=inf --env BYTEPS_PARTITION_BYTES=128000 --output $OUT/train_w4_s4_1gbit.json

# 4. Scheduling and partition size.
run benchmarks.tuning_cluster --workers 4 --servers 4 --rate 1gbit --models bert --output $OUT/tuning_w4_s4_1gbit.json

run benchmarks.plots $OUT
