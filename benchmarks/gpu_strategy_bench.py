"""Keras fit on GPUs under MirroredStrategy (NCCL) and BytePSStrategy in the same run: ms per step, the
ratios, and the scaling efficiency over GPU counts, for an 88M-parameter MLP (6 x Dense(4096), batch 512 per
GPU) and a BERT-like encoder (batch 64 per GPU).

Modes, each a fresh job on the first N GPUs of this machine (CUDA_VISIBLE_DEVICES):
  mirrored:          tf.distribute.MirroredStrategy, one process, NCCL all-reduce;
  bps:               BytePSStrategy, one process driving the N GPUs, local NCCL reduction only;
  bps_server:        the same through a CPU server on the same host (BYTEPS_FORCE_DISTRIBUTED=1): the copies
                     to the host, push, sum, pull and copies back of every gradient;
  bps_per_gpu:       BytePSStrategy, one process per GPU (bpslaunch --local-size N), NCCL across processes;
  bps_per_gpu_server the same through the server.

    python3 benchmarks/gpu_strategy_bench.py [--gpus 1 2 4 8] [--models mlp bert] [--modes ...] [--steps 30]
        [--json OUT.json] [--trace-dir DIR]   # a timeline (docs/timeline.md) of the runs through the server
        [--smoke]                             # tiny models and batches, on the CPU too: a check of this code

Scaling efficiency at N GPUs: the 1-GPU step time of the mode's process model over the N-GPU one (the batch
per GPU is fixed, so 1.00 is perfect scaling). On one GPU with one process there is nothing to reduce: TF
skips the reduction, and every mode measures the local step; the per-GPU modes start at 2 GPUs.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ("mirrored", "bps", "bps_server", "bps_per_gpu", "bps_per_gpu_server")
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # for benchmarks.lib and testing in the runs
BATCH = {"mlp": 512, "bert": 64}
SMOKE_BATCH, SMOKE_WIDTH, SMOKE_BERT = 8, 64, dict(hidden=32, heads=2, ffn=64, layers=1)


def build_model(name, smoke=False):
    import tensorflow as tf

    from testing import models

    if name == "mlp":  # 1024 -> 6 x 4096 -> 10: 88.1M parameters
        return models.mlp(tf.keras, inputs=1024, width=SMOKE_WIDTH if smoke else 4096, layers=6, classes=10)
    from benchmarks.lib.models import bert

    return bert(**(SMOKE_BERT if smoke else dict(hidden=512, heads=8, ffn=2048, layers=6)))


def data(name, examples):
    from testing import models

    if name == "mlp":
        return models.random_features(examples, 1024, 10)
    return models.random_sequences(examples, 8192, 128)


def worker(args):
    """One timed fit; writes {"ms_per_step": [...]} to args.json."""
    import tensorflow as tf

    if args.mode == "mirrored":
        strategy = tf.distribute.MirroredStrategy()
    else:
        from bps_tf import BytePSStrategy

        strategy = BytePSStrategy()
    replicas = strategy.num_replicas_in_sync
    batch = (SMOKE_BATCH if args.smoke else BATCH[args.model]) * replicas
    x, y = data(args.model, batch * (args.steps + args.warmup))
    with strategy.scope():
        model = build_model(args.model, args.smoke)
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
    if args.mode != "mirrored":
        import bps_tf

        if bps_tf.rank() != 0:  # one process per GPU: worker 0 reports
            return
    with open(args.json, "w") as out:
        json.dump({"ms_per_step": timer.times[args.warmup:], "replicas": replicas,
                   "parameters": int(model.count_params())}, out)


def run_mode(mode, model, gpus, steps, warmup, trace_dir=None, smoke=False):
    with tempfile.NamedTemporaryFile(suffix=".json") as result:
        # bps_tf from PYTHONPATH, never the directory it starts in, and this checkout after it (benchmarks.lib);
        # the first `gpus` GPUs.
        pythonpath = os.pathsep.join(path for path in (os.environ.get("PYTHONPATH"), CHECKOUT) if path)
        env = dict(os.environ, PYTHONSAFEPATH="1", PYTHONPATH=pythonpath,
                   CUDA_VISIBLE_DEVICES=",".join(map(str, range(gpus))))
        if mode.endswith("_server"):
            env["BYTEPS_FORCE_DISTRIBUTED"] = "1"
            if trace_dir:
                env.update(BYTEPS_TRACE_ON="1", BYTEPS_TRACE_DIR=os.path.join(trace_dir, f"{model}_{mode}_{gpus}"))
        command = [sys.executable, os.path.abspath(__file__), "--worker", "--mode", mode, "--model", model,
                   "--steps", str(steps), "--warmup", str(warmup), "--json", result.name]
        command += ["--smoke"] if smoke else []
        if mode != "mirrored":  # a bps_tf job of one worker machine with a CPU server
            local_size = gpus if mode.startswith("bps_per_gpu") else 1
            command = [sys.executable, "-m", "bps_tf.launcher", "--local", "--workers", "1", "--local-size",
                       str(local_size), "--servers", "1", "--"] + command
        finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        if finished.returncode != 0:
            sys.exit(f"{mode} {model} on {gpus} GPUs failed:\n{finished.stdout[-3000:]}\n{finished.stderr[-3000:]}")
        with open(result.name) as file:
            return json.load(file)


def baseline_mode(mode):
    """The mode whose 1-GPU step a mode's scaling is measured against (one process per GPU starts at 2)."""
    return mode.replace("_per_gpu", "")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES)
    parser.add_argument("--model", choices=("mlp", "bert"))
    parser.add_argument("--models", nargs="+", default=["mlp", "bert"])
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--gpus", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--json")
    parser.add_argument("--trace-dir")
    parser.add_argument("--smoke", action="store_true", help="tiny models and batches (runs on the CPU too)")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    rows, medians = [], {}
    print("| model | parameters | GPUs | mode | ms/step (median) | vs mirrored | scaling efficiency |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for model in args.models:
        for gpus in args.gpus:
            for mode in args.modes:
                if gpus == 1 and mode.startswith("bps_per_gpu"):
                    continue
                result = run_mode(mode, model, gpus, args.steps, args.warmup, args.trace_dir, args.smoke)
                ms = medians[model, gpus, mode] = statistics.median(result["ms_per_step"])
                rows.append(dict(model=model, gpus=gpus, mode=mode, **result))
                mirrored = medians.get((model, gpus, "mirrored"))
                single = medians.get((model, 1, baseline_mode(mode)))
                print(f"| {model} | {result['parameters'] / 1e6:.1f}M | {gpus} | {mode} | {ms:.1f} | "
                      f"{f'{ms / mirrored:.2f}' if mirrored else '-'} | {f'{single / ms:.2f}' if single else '-'} |",
                      flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out)


if __name__ == "__main__":
    main()
