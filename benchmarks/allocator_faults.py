"""What TensorFlow's BFC allocator for CPU memory (TF_CPU_ALLOCATOR_USE_BFC=true, bps_tf's default for workers)
does with oneDNN on and off: page faults and time per step of the BERT-like model of the end-to-end benchmark
(tf-keras, MirroredStrategy on one CPU, one thread), each setting a fresh process. Page faults do not depend
on what else the machine runs; times do.

    python -m benchmarks.allocator_faults [--repeats 2] [--json OUT.json] [--smoke]

--smoke runs the small MLP of the end-to-end benchmark for 2 steps after 1 (a check of this code; its figures
say nothing about the allocator).
"""

import argparse
import json
import resource
import subprocess
import sys
import time

from benchmarks.lib.processes import benchmark_env
from benchmarks.lib.results import describe_machine, save_result

SETTINGS = [(onednn, bfc) for onednn in ("1", "0") for bfc in ("true", "false")]
STEPS, WARMUP, BATCH = 10, 4, 8
SMOKE = dict(model="mlp-small", steps=2, warmup=1)


def measure(model="bert", steps=STEPS, warmup=WARMUP):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from benchmarks.lib import models

    x, y = models.synthetic_data(model, BATCH * (warmup + steps))
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        net = models.build(model)
        net.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    marks = {}

    class Marks(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch in (warmup - 1, warmup + steps - 1):
                marks[batch] = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter())

    net.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[Marks()])
    (f0, t0), (f1, t1) = marks[warmup - 1], marks[warmup + steps - 1]
    print(json.dumps({"faults_per_step": (f1 - f0) / steps, "ms_per_step": 1000 * (t1 - t0) / steps}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json")
    parser.add_argument("--smoke", action="store_true", help="the small MLP, 2 steps: a check of this code")
    args = parser.parse_args()
    if args.worker:
        return measure(**(SMOKE if args.smoke else {}))
    rows = []
    print("| oneDNN | TF_CPU_ALLOCATOR_USE_BFC | page faults per step | ms per step |")
    print("| --- | --- | --- | --- |")
    for repeat in range(args.repeats):
        for onednn, bfc in SETTINGS:
            env = benchmark_env({"TF_USE_LEGACY_KERAS": "1", "TF_ENABLE_ONEDNN_OPTS": onednn,
                                 "TF_CPU_ALLOCATOR_USE_BFC": bfc, "TF_CPP_MIN_LOG_LEVEL": "3"})
            done = subprocess.run([sys.executable, "-m", "benchmarks.allocator_faults", "--worker"] + (
                ["--smoke"] if args.smoke else []), env=env, capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                raise SystemExit(f"oneDNN {onednn}, BFC {bfc} failed:\n{done.stderr[-3000:]}")
            row = dict(json.loads(done.stdout.splitlines()[-1]), onednn=onednn == "1", bfc=bfc == "true",
                       repeat=repeat)
            rows.append(row)
            print(f"| {'on' if row['onednn'] else 'off'} | {bfc} | {row['faults_per_step']:.0f} | "
                  f"{row['ms_per_step']:.0f} |", flush=True)
    save_result(args.json, {"command": sys.argv, "machine": describe_machine(), "rows": rows})


if __name__ == "__main__":
    main()
