"""Keras fit on GPUs under MirroredStrategy (NCCL) and BytePSStrategy in the same run: ms per step and the
ratios, for an 88M-parameter MLP (6 x Dense(4096), batch 512) and a BERT-like encoder.

Modes, each a fresh job on this machine's GPUs (one process driving them all):
  mirrored:   tf.distribute.MirroredStrategy, NCCL all-reduce;
  bps:        BytePSStrategy, local NCCL reduction only (one worker machine);
  bps_server: BytePSStrategy through a CPU server on the same host (BYTEPS_FORCE_DISTRIBUTED=1): the copies
              to the host, push, sum, pull and copies back of every gradient.

    python3 benchmarks/gpu_strategy_bench.py [--models mlp bert] [--steps 30] [--json OUT.json]
        [--trace-dir DIR]   # a timeline (docs/timeline.md) of the bps_server runs

On one GPU there is nothing to reduce locally: mirrored and bps measure the local step, and bps_server
what the trip of every gradient through the server adds to it.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ("mirrored", "bps", "bps_server")
BATCH = {"mlp": 512, "bert": 64}


def build_model(name):
    import tensorflow as tf

    keras = tf.keras
    if name == "mlp":  # 1024 -> 6 x 4096 -> 10: 88.1M parameters
        inputs = keras.Input((1024,))
        x = inputs
        for _ in range(6):
            x = keras.layers.Dense(4096, activation="relu")(x)
        return keras.Model(inputs, keras.layers.Dense(10)(x))
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # after bps_tf's own place
    from benchmarks import models

    return models.bert(**dict(models.BERT, hidden=512, heads=8, ffn=2048, layers=6))


def data(name, examples):
    import numpy as np

    rng = np.random.default_rng(0)
    if name == "mlp":
        return rng.standard_normal((examples, 1024), dtype=np.float32), rng.integers(0, 10, examples, dtype=np.int32)
    return (rng.integers(0, 8192, (examples, 128), dtype=np.int32), rng.integers(0, 2, examples, dtype=np.int32))


def worker(args):
    """One timed fit; writes {"ms_per_step": [...]} to args.json."""
    import tensorflow as tf

    if args.mode == "mirrored":
        strategy = tf.distribute.MirroredStrategy()
    else:
        from bps_tf import BytePSStrategy

        strategy = BytePSStrategy()
    replicas = strategy.num_replicas_in_sync
    batch = BATCH[args.model] * replicas
    x, y = data(args.model, batch * (args.steps + args.warmup))
    with strategy.scope():
        model = build_model(args.model)
        model.compile(optimizer=tf.keras.optimizers.SGD(0.01), jit_compile=False,
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    class Timer(tf.keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.times = []

        def on_train_batch_begin(self, batch, logs=None):
            self.started = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.times.append((time.perf_counter() - self.started) * 1000)

    timer = Timer()
    # steps_per_execution=1 and a loss read back every step: each step's time is the whole step's.
    model.fit(x, y, batch_size=batch, epochs=1, verbose=0, callbacks=[timer], shuffle=False)
    with open(args.json, "w") as out:
        json.dump({"ms_per_step": timer.times[args.warmup:], "replicas": replicas,
                   "parameters": int(model.count_params())}, out)


def run_mode(mode, model, steps, warmup, trace_dir=None):
    with tempfile.NamedTemporaryFile(suffix=".json") as result:
        env = dict(os.environ, PYTHONSAFEPATH="1")  # bps_tf from PYTHONPATH, never the directory it starts in
        if mode == "bps_server":
            env["BYTEPS_FORCE_DISTRIBUTED"] = "1"
            if trace_dir:
                env.update(BYTEPS_TRACE_ON="1", BYTEPS_TRACE_DIR=os.path.join(trace_dir, model))
        command = [sys.executable, os.path.abspath(__file__), "--worker", "--mode", mode, "--model", model,
                   "--steps", str(steps), "--warmup", str(warmup), "--json", result.name]
        if mode != "mirrored":  # a bps_tf job of one worker machine with a CPU server
            command = [sys.executable, "-m", "bps_tf.launcher", "--local", "--workers", "1", "--servers", "1",
                       "--"] + command
        finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        if finished.returncode != 0:
            sys.exit(f"{mode} {model} failed:\n{finished.stdout[-3000:]}\n{finished.stderr[-3000:]}")
        with open(result.name) as file:
            return json.load(file)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES)
    parser.add_argument("--model", choices=("mlp", "bert"))
    parser.add_argument("--models", nargs="+", default=["mlp", "bert"])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--json")
    parser.add_argument("--trace-dir")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    rows = []
    print("| model | parameters | GPUs | mode | ms/step (median) | vs mirrored |")
    print("| --- | --- | --- | --- | --- | --- |")
    for model in args.models:
        medians = {}
        for mode in MODES:
            result = run_mode(mode, model, args.steps, args.warmup, args.trace_dir)
            medians[mode] = statistics.median(result["ms_per_step"])
            rows.append(dict(model=model, mode=mode, **result))
            print(f"| {model} | {result['parameters'] / 1e6:.1f}M | {result['replicas']} | {mode} | "
                  f"{medians[mode]:.1f} | {medians[mode] / medians['mirrored']:.2f} |", flush=True)
        print(f"{model}: bps / mirrored {medians['bps'] / medians['mirrored']:.3f}, "
              f"bps_server / bps {medians['bps_server'] / medians['bps']:.3f}", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out)


if __name__ == "__main__":
    main()
