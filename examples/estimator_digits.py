"""A tf.estimator job on scikit-learn's digits (TensorFlow 2.15 with tensorflow-estimator): a model_fn with
the v1 DistributedOptimizer, BroadcastGlobalVariablesHook in the training hooks, input sharded by rank,
train_and_evaluate with checkpoints and summaries written by worker 0 only, and evaluation metrics over
every worker's share of the test set.

    bpslaunch --local --workers 2 --servers 1 -- .venv-tf2.15/bin/python examples/estimator_digits.py [MODEL_DIR]

Every step trains on the same global batch of 64 whatever the number of workers (each worker its own rows
of it), so the job follows the single-process training of the same model.
"""

import hashlib
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf
from sklearn import datasets

import bps_tf.tensorflow as bps
import bps_tf.tensorflow.estimator as bps_estimator

GLOBAL_BATCH = 64
STEPS = 400


def load(rank, size):
    """scikit-learn's handwritten digits (shipped with it, no download): this worker's share of a fixed 80%
    training split, and the whole test split; pixels scaled to [0, 1]."""
    digits = datasets.load_digits()
    order = np.random.default_rng(0).permutation(len(digits.target))
    x, y = (digits.data[order] / 16.0).astype(np.float32), digits.target[order].astype(np.int64)
    split = int(0.8 * len(x))
    return x[:split][rank::size], y[:split][rank::size], x[split:], y[split:]


def fingerprint(weights):
    """A short hash of the weights: the same on every worker that holds the same model."""
    return hashlib.sha256(b"".join(np.ascontiguousarray(w).tobytes() for w in weights)).hexdigest()[:16]


def model_fn(features, labels, mode, params):
    # Different random starts on every worker: the broadcast hook replaces them with worker 0's.
    init = tf.compat.v1.random_normal_initializer(stddev=0.1, seed=params["rank"])
    hidden = tf.compat.v1.layers.dense(features, 32, activation=tf.nn.relu, kernel_initializer=init)
    logits = tf.compat.v1.layers.dense(hidden, 10, kernel_initializer=init)
    predictions = tf.argmax(logits, axis=1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        metrics = {"accuracy": tf.compat.v1.metrics.accuracy(labels, predictions)}
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=bps_estimator.global_metrics(metrics))
    optimizer = bps.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.5))
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def train_input_fn(x, y, rank, size):
    """Each global batch of 64 rows, of which this worker takes its own 64 / size."""
    per_worker = GLOBAL_BATCH // size
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH, drop_remainder=True)
    return dataset.map(lambda xs, ys: (xs[rank * per_worker:(rank + 1) * per_worker],
                                       ys[rank * per_worker:(rank + 1) * per_worker]))


def eval_input_fn(x, y, rank, size):
    """This worker's share of the test set (equal shares: global_metrics averages them)."""
    rows = len(x) // size * size
    return tf.data.Dataset.from_tensor_slices((x[:rows], y[:rows])).shard(size, rank).batch(50)


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    model_dir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="bps_tf_estimator_")
    x_train, y_train, x_test, y_test = load(0, 1)  # the whole training set: input_fn takes this worker's rows

    config = tf.estimator.RunConfig(model_dir=bps_estimator.worker_model_dir(model_dir), save_checkpoints_steps=100,
                                    save_summary_steps=100, log_step_count_steps=None, tf_random_seed=0)
    estimator = tf.estimator.Estimator(model_fn, config=config, params={"rank": rank})
    train_spec = tf.estimator.TrainSpec(lambda: train_input_fn(x_train, y_train, rank, size), max_steps=STEPS,
                                        hooks=[bps.BroadcastGlobalVariablesHook(0)])
    # Evaluation at every checkpoint (throttle_secs=0): the same points on every worker.
    eval_spec = tf.estimator.EvalSpec(lambda: eval_input_fn(x_test, y_test, rank, size), steps=None,
                                      throttle_secs=0)
    metrics, _ = tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)

    weights = [estimator.get_variable_value(name) for name in sorted(estimator.get_variable_names())
               if "dense" in name]
    print(f"worker {rank}: test accuracy {metrics['accuracy']:.3f}, model fingerprint {fingerprint(weights)}, "
          f"steps {metrics['global_step']}", flush=True)
    if rank == 0:
        print(f"worker 0: model_dir {model_dir} holds {sorted(os.listdir(model_dir))}", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.WARN)
    np.set_printoptions(precision=3)
    main()
