"""TF1-style training (graph mode, MonitoredTrainingSession) with the v1 DistributedOptimizer and
BroadcastGlobalVariablesHook, on scikit-learn's digits.

    bpslaunch --local --workers 2 --servers 1 -- python examples/tf1_session.py
"""

import hashlib

import numpy as np
import tensorflow as tf
from sklearn import datasets

import bps_tf as bps

tf.compat.v1.disable_eager_execution()


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


class FinalEvaluationHook(tf.compat.v1.train.SessionRunHook):
    """Evaluates once training stopped, while the session is still open."""

    def __init__(self, accuracy, feed_dict):
        self._accuracy, self._feed_dict = accuracy, feed_dict
        self.accuracy, self.weights = None, None

    def end(self, session):
        self.accuracy = session.run(self._accuracy, feed_dict=self._feed_dict)
        self.weights = session.run(tf.compat.v1.trainable_variables())


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    x_train, y_train, x_test, y_test = load(rank, size)

    x = tf.compat.v1.placeholder(tf.float32, [None, 64])
    y = tf.compat.v1.placeholder(tf.int64, [None])
    # Different random starts on every worker: the hook replaces them with worker 0's.
    init = tf.compat.v1.random_normal_initializer(stddev=0.1, seed=rank)
    w1 = tf.compat.v1.get_variable("w1", [64, 32], initializer=init)
    b1 = tf.compat.v1.get_variable("b1", [32], initializer=tf.compat.v1.zeros_initializer())
    w2 = tf.compat.v1.get_variable("w2", [32, 10], initializer=init)
    b2 = tf.compat.v1.get_variable("b2", [10], initializer=tf.compat.v1.zeros_initializer())
    logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, axis=1), y), tf.float32))

    global_step = tf.compat.v1.train.get_or_create_global_step()
    optimizer = bps.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.2 * size))
    train_op = optimizer.minimize(loss, global_step=global_step)

    final = FinalEvaluationHook(accuracy, {x: x_test, y: y_test})
    hooks = [bps.BroadcastGlobalVariablesHook(0), tf.compat.v1.train.StopAtStepHook(last_step=300), final]
    rng = np.random.default_rng(rank)
    with tf.compat.v1.train.MonitoredTrainingSession(hooks=hooks) as session:
        while not session.should_stop():
            batch = rng.choice(len(x_train), 32)
            step, value, _ = session.run([global_step, loss, train_op],
                                         feed_dict={x: x_train[batch], y: y_train[batch]})
            if rank == 0 and step % 100 == 0:
                print(f"step {step}: loss {value:.4f}")
    print(f"worker {rank}: test accuracy {final.accuracy:.3f}, model fingerprint {fingerprint(final.weights)}")
    bps.shutdown()


if __name__ == "__main__":
    main()
