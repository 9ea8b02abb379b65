"""One process of the synthetic-data training benchmark (benchmarks/synthetic_benchmark.py): Keras fit of a
model of testing/models.py (ResNet-50, a BERT-base-sized encoder or an MLP) on one random batch, repeated,
timed over rounds of steps after a warm-up round: one fit() of 1 + rounds epochs, or with --fit-calls
1 + rounds fit() calls of one epoch, each timed whole (what a user who calls fit() for a few steps at a time
gets). Writes {"rates" (per round, of this process's replicas), "unit", "ms_per_step", "replicas" (in sync,
every process's), "parameters", "jit_compile", "fit_calls"} to DIR/rank<R>.json (R: the bps_tf rank, 0
without a job)."""

import argparse
import json
import os
import time

import tensorflow as tf

from benchmarks.lib.measure import RoundTimer
from testing import models

PER_GPU_BATCH = {"resnet50": 64, "bert": 32, "mlp": 512}
# --smoke: tiny versions, a check of this code on a CPU.
SMOKE_BATCH, SMOKE_IMAGE, SMOKE_BERT, SMOKE_MLP_WIDTH = 2, 32, dict(models.BERT_BASE, vocab=100, seq=8, hidden=16,
                                                                     heads=2, ffn=32, layers=1), 32
MLP = dict(inputs=1024, width=4096, layers=6, classes=10)  # 88.1M parameters


def build(keras, name, smoke):
    if name == "resnet50":
        return models.resnet50(keras, SMOKE_IMAGE if smoke else 224)
    if name == "mlp":
        return models.mlp(keras, **dict(MLP, width=SMOKE_MLP_WIDTH if smoke else MLP["width"]))
    return models.encoder(keras, **(SMOKE_BERT if smoke else models.BERT_BASE))


def batch_of(name, examples, smoke):
    if name == "mlp":
        return models.random_features(examples, MLP["inputs"], MLP["classes"])
    if name == "resnet50":
        return models.random_images(examples, SMOKE_IMAGE if smoke else 224)
    bert = SMOKE_BERT if smoke else models.BERT_BASE
    return models.random_sequences(examples, bert["vocab"], bert["seq"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--setup", required=True)
    parser.add_argument("--model", required=True, choices=sorted(PER_GPU_BATCH))
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jit", default="auto", choices=("auto", "true", "false"))
    parser.add_argument("--fit-calls", action="store_true", help="a fit() call per round, timed whole")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--out", required=True, help="directory of the per-process results")
    args = parser.parse_args()
    keras = tf.keras
    keras.mixed_precision.set_global_policy(args.precision)
    per_replica = SMOKE_BATCH if args.smoke else PER_GPU_BATCH[args.model]
    rank, callbacks, distributed_optimizer, strategy = 0, [], None, None
    if args.setup.startswith("mirrored"):
        strategy = tf.distribute.MirroredStrategy()
    elif args.setup.startswith("bps"):
        import bps_tf

        strategy = bps_tf.BytePSStrategy()
        rank = bps_tf.rank()
    elif args.setup.startswith("horovod"):
        import bps_tf.keras as hvd

        hvd.init()
        rank = hvd.rank()
        distributed_optimizer = hvd.DistributedOptimizer
        callbacks.append(hvd.callbacks.BroadcastGlobalVariablesCallback(0))
    replicas = strategy.num_replicas_in_sync if strategy else 1
    x, y = batch_of(args.model, per_replica * replicas, args.smoke)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    dataset = tf.data.Dataset.from_tensors((x, y)).repeat().with_options(options)
    with strategy.scope() if strategy else _NoScope():
        model = build(keras, args.model, args.smoke)
        optimizer = keras.optimizers.SGD(0.01, momentum=0.9)
        model.compile(optimizer=distributed_optimizer(optimizer) if distributed_optimizer else optimizer,
                      jit_compile={"auto": "auto", "true": True, "false": False}[args.jit],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=args.model != "resnet50"))
    measured = timed_rounds(keras, model, dataset, args, callbacks)
    unit, per_example = ("tokens/s", x.shape[1]) if args.model == "bert" else \
        ("images/s" if args.model == "resnet50" else "examples/s", 1)
    local_replicas = len(strategy.extended.worker_devices) if strategy else 1
    rates = [steps * per_replica * local_replicas * per_example / seconds for seconds, steps in measured]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as out:
        json.dump({"rates": rates, "unit": unit, "ms_per_step": [1000 * s / n for s, n in measured],
                   "replicas": replicas, "parameters": int(model.count_params()),
                   "jit_compile": bool(model.jit_compile), "fit_calls": args.fit_calls}, out)


def timed_rounds(keras, model, dataset, args, callbacks):
    """(seconds, steps) of each round after the first, which compiles and warms up."""
    if not args.fit_calls:
        timer = RoundTimer(keras)
        model.fit(dataset, steps_per_epoch=args.steps, epochs=1 + args.rounds, verbose=0,
                  callbacks=callbacks + [timer.callback])
        return timer.rounds[1:]
    rounds = []
    for _ in range(1 + args.rounds):
        start = time.perf_counter()
        model.fit(dataset, steps_per_epoch=args.steps, epochs=1, verbose=0, callbacks=callbacks)
        rounds.append((time.perf_counter() - start, args.steps))
    return rounds[1:]


class _NoScope:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    main()
