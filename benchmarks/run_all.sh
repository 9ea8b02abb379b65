#!/usr/bin/env bash
# Every figure of docs/performance.md, in the order there: results (JSON) and plots (PNG) in docs/performance/.
# Needs root for the emulated clusters (network namespaces and tc). About 3 hours on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=docs/performance
run() { echo "+ $*"; timeout 3600 "$PY" -m "$@"; }

# 1. push_pull against TF's RING all-reduce on loopback.
run benchmarks.push_pull_loopback --workers 2 --servers 1 --output $OUT/loopback_w2_s1.json
run benchmarks.push_pull_loopback --workers 2 --servers 2 --output $OUT/loopback_w2_s2.json

# 2. The same on an emulated cluster of 1 Gbit/s links; servers on their own hosts, then co-located.
run benchmarks.push_pull_cluster --workers 4 --servers 4 --rate 1gbit --output $OUT/cluster_w4_s4_1gbit.json
run benchmarks.push_pull_cluster --workers 2 --servers 2 --rate 1gbit --output $OUT/cluster_w2_s2_1gbit.json
run benchmarks.push_pull_cluster --workers 4 --servers 4 --rate 1gbit --colocate \
    --output $OUT/cluster_w4_s4_1gbit_colocated.json

# 3. End-to-end training throughput: no communication, a barrier per step, MWMS and BytePSStrategy, each also
#    with the other CPU allocator; BytePSStrategy with sparse gradients densified and with each compression.
B=TF_CPU_ALLOCATOR_USE_BFC
run benchmarks.train_cluster --workers 4 --servers 4 --rate 1gbit --models bert --steps 20 \
    --strategies "local,local@$B=true,lockstep,mwms,mwms@$B=true,bps,bps@$B=false,bps-dense,bps+onebit,bps+topk:0.01,bps+randomk:0.01,mwms@$B=true,bps,bps+onebit" \
    --output $OUT/train_w4_s4_1gbit_bert.json
run benchmarks.train_cluster --workers 4 --servers 4 --rate 1gbit --models mlp \
    --strategies "local,local@$B=true,lockstep,mwms,mwms@$B=true,bps,bps@$B=false,bps+onebit,bps+topk:0.01" \
    --output $OUT/train_w4_s4_1gbit_mlp.json

# 4. Scheduling and partition size.
run benchmarks.tuning_cluster --workers 4 --servers 4 --rate 1gbit --models bert --output $OUT/tuning_w4_s4_1gbit.json
run benchmarks.tuning_cluster --workers 4 --servers 4 --rate 1gbit --models mlp --output $OUT/tuning_w4_s4_1gbit_mlp.json

# 5. Gradient compression: time to accuracy (MLP with SGD, BERT-like encoder with Adam), one-bit under Adam in
#    one process, step time at 100 Mbit/s.
run benchmarks.time_to_accuracy --workers 4 --servers 4 --rate 1gbit \
    --variants "mwms;none;onebit;onebit,momentum=0.9;topk:0.01;topk:0.01,momentum=0.9;randomk:0.01,momentum=0.9" \
    --output $OUT/accuracy_w4_s4_1gbit.json
run benchmarks.time_to_accuracy --workers 4 --servers 4 --rate 1gbit --model encoder --optimizer adam \
    --learning-rate 0.001 --target 0.95 --max-epochs 60 --variants "mwms;none;onebit;topk:0.01" \
    --output $OUT/accuracy_w4_s4_1gbit_encoder.json
run benchmarks.ablations.onebit_adam --output $OUT/onebit_adam_encoder.json
run benchmarks.train_cluster --workers 4 --servers 4 --rate 100mbit --models bert \
    --strategies "local,lockstep,mwms,mwms@$B=true,bps,bps+onebit,bps+topk:0.01" \
    --output $OUT/train_w4_s4_100mbit_bert_compression.json

# 9. Stragglers: time to accuracy per training mode, one worker's CPU share cut 2x and 5x.
run benchmarks.stragglers --workers 4 --servers 4 --rate 1gbit --slowdowns 1,2,5 \
    --output $OUT/stragglers_w4_s4_1gbit.json

run benchmarks.report.plots $OUT
run benchmarks.report.doc_tables docs/performance.md
