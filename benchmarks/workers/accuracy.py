"""One worker of the time-to-accuracy benchmark: Keras (tf-keras) `fit` of a model on scikit-learn's
digits (shipped with scikit-learn) under BytePSStrategy (compression from BYTEPS_COMPRESSION) or
MultiWorkerMirroredStrategy, with SGD and momentum 0.9 (in the optimizer, or in the compression when it
has momentum correction) or Adam, until the test accuracy reaches the target or the epochs run out. After
each epoch the weights are scored on the test set outside the strategy; training time excludes the scoring.
In synchronous training every worker holds the same weights, so all stop at the same epoch; in the
asynchronous modes each stops when its own weights (the servers' latest) reach the target. Rank 0 writes
the curve as JSON to --output, other ranks to --output.worker<rank>, each with its training time and its
CPU use after the first step (cores). With BENCH_STARTED_MARK set,
a worker creates that file after its first step.

Models: mlp and encoder (benchmarks/lib/digits.py)."""

import argparse
import json
import os
import time

import numpy as np

from benchmarks.lib.digits import build, inputs_for, load


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--strategy", choices=["bps", "mwms"], required=True)
    parser.add_argument("--model", choices=["mlp", "encoder"], default="mlp")
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--tf-cluster", help="mwms: host:port of each worker's TF server")
    parser.add_argument("--batch-per-worker", type=int, default=32)
    parser.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--target", type=float, default=0.96, help="test accuracy to reach")
    parser.add_argument("--max-epochs", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", required=True)
    return parser.parse_args()


def make_optimizer(tf, name, learning_rate):
    if name == "adam":
        return tf.keras.optimizers.Adam(learning_rate)
    # A compression with momentum correction takes the momentum over: the optimizer then has none.
    momentum = 0.0 if "momentum=" in os.environ.get("BYTEPS_COMPRESSION", "") else 0.9
    return tf.keras.optimizers.SGD(learning_rate, momentum=momentum)


def main():
    args = parse_args()
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    if args.strategy == "mwms":
        from benchmarks.lib import tf_ring

        strategy = tf_ring.ring_strategy(args.tf_cluster.split(","), int(os.environ["DMLC_WORKER_ID"]))
    else:
        from bps_tf.strategy import BytePSStrategy

        strategy = BytePSStrategy()
    x_train, y_train, x_test, y_test = load(rank=0, size=1)
    x_train, x_test = inputs_for(args.model, x_train), inputs_for(args.model, x_test)
    global_batch = args.batch_per_worker * args.workers
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    data = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(len(x_train), seed=0)
    data = data.batch(global_batch, drop_remainder=True).with_options(options)
    with strategy.scope():
        model = build(tf, args.model)
        model.compile(optimizer=make_optimizer(tf, args.optimizer, args.learning_rate),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    scorer = build(tf, args.model)
    curve = []

    class Score(tf.keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.trained_s, self.steps, self.started = 0.0, 0, 0.0
            self.first_step = None

        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.steps += 1
            if self.steps == 1:
                # The steady state starts after the first step (its function is traced meanwhile).
                self.first_step = (time.perf_counter(), time.process_time())
                if os.environ.get("BENCH_STARTED_MARK"):
                    open(os.environ["BENCH_STARTED_MARK"], "w").close()

        def on_epoch_end(self, epoch, logs=None):
            self.trained_s += time.perf_counter() - self.started
            scorer.set_weights(self.model.get_weights())
            accuracy = float(np.mean(np.argmax(scorer(x_test).numpy(), axis=1) == y_test))
            curve.append({"epoch": epoch + 1, "steps": self.steps, "train_s": self.trained_s, "accuracy": accuracy,
                          "loss": float(logs["loss"])})
            if accuracy >= args.target:
                self.model.stop_training = True

    score = Score()
    model.fit(data, epochs=args.max_epochs, callbacks=[score], verbose=0)
    first = score.first_step or (time.perf_counter(), time.process_time())  # None: no step ran
    after_first = (max(time.perf_counter() - first[0], 1e-9), time.process_time() - first[1])
    rank = int(os.environ.get("DMLC_WORKER_ID", "0"))
    reached = next((point for point in curve if point["accuracy"] >= args.target), None)
    with open(args.output if rank == 0 else f"{args.output}.worker{rank}", "w") as out:
        json.dump({"strategy": args.strategy, "model": args.model, "rank": rank,
                   "compression": os.environ.get("BYTEPS_COMPRESSION", "none"), "target": args.target,
                   "global_batch": global_batch, "curve": curve, "reached": reached,
                   "steps": score.steps, "train_s": score.trained_s,
                   "steady_cpu_cores": after_first[1] / after_first[0],
                   "gradient_bytes": sum(int(np.prod(v.shape)) * 4 for v in model.trainable_variables)}, out)


if __name__ == "__main__":
    main()
