#!/usr/bin/env bash
# Every figure of docs/performance.md, in the order there: results (JSON) and plots (PNG) in docs/performance/.
# Needs root for the emulated clusters (network namespaces and tc). About 50 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=docs/performance
run() { echo "+ $*"; timeout 1200 "$PY" -m "$@"; }

# 1. push_pull against TF's RING all-reduce on loopback.
run benchmarks.push_pull_loopback --workers 2 --servers 1 --output $OUT/loopback_w2_s1.json
run benchmarks.push_pull_loopback --workers 2 --servers 2 --output $OUT/loopback_w2_s2.json

# 2. The same on an emulated cluster of 1 Gbit/s links; servers on their own hosts, then co-located.
run benchmarks.push_pull_cluster --workers 4 --servers 4 --rate 1gbit --output $OUT/cluster_w4_s4_1gbit.json
run benchmarks.push_pull_cluster --workers 2 --servers 2 --rate 1gbit --output $OUT/cluster_w2_s2_1gbit.json
run benchmarks.push_pull_cluster --workers 4 --servers 4 --rate 1gbit --colocate \
    --output $OUT/cluster_w4_s4_1gbit_colocated.json

# 3. End-to-end training throughput (BERT-like also with sparse gradients densified, the earlier behaviour).
run benchmarks.train_cluster --workers 4 --servers 4 --rate 1gbit --models bert --strategies local,mwms,bps,bps-dense \
    --output $OUT/train_w4_s4_1gbit_bert.json
run benchmarks.train_cluster --workers 4 --servers 4 --rate 1gbit --models mlp --strategies local,mwms,bps \
    --output $OUT/train_w4_s4_1gbit_mlp.json

# 4. Scheduling and partition size.
run benchmarks.tuning_cluster --workers 4 --servers 4 --rate 1gbit --models bert --output $OUT/tuning_w4_s4_1gbit.json
run benchmarks.tuning_cluster --workers 4 --servers 4 --rate 1gbit --models mlp --output $OUT/tuning_w4_s4_1gbit_mlp.json

run benchmarks.plots $OUT
run benchmarks.doc_tables docs/performance.md
