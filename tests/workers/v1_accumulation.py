"""tf.compat.v1 DistributedOptimizer with backward_passes_per_step=2 in graph mode: variables change only
on every second step, by the sum (Horovod's default) or, with average_aggregated_gradients, the mean of
both steps' gradients, averaged over workers."""

import numpy as np
import tensorflow as tf

import bps_tf as bps


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    mean_factor = sum(r + 1 for r in range(size)) / size
    both_steps = np.array([1.0, 0.0, 2.0]) + np.array([3.0, 1.0, 0.0])
    for average in (False, True):
        with tf.Graph().as_default():  # graph mode, TF1 style, without turning eager execution off
            after_first, after_second = train_two_steps(rank, average)
        np.testing.assert_array_equal(after_first, [1.0, 2.0, 3.0])
        expected = np.array([1.0, 2.0, 3.0]) - both_steps / (2 if average else 1) * mean_factor
        np.testing.assert_allclose(after_second, expected, rtol=1e-6)
    print(f"rank {rank}: v1 accumulation exact", flush=True)
    bps.shutdown()


def train_two_steps(rank, average):
    x = tf.compat.v1.placeholder(tf.float32, [3])
    w = tf.compat.v1.get_variable("w", initializer=tf.constant([1.0, 2.0, 3.0]))
    loss = tf.reduce_sum(w * x)  # gradient = x
    optimizer = bps.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0),
                                         backward_passes_per_step=2, average_aggregated_gradients=average)
    train = optimizer.minimize(loss)
    feeds = [np.array([1.0, 0.0, 2.0]) * (rank + 1), np.array([3.0, 1.0, 0.0]) * (rank + 1)]
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(train, {x: feeds[0]})
        after_first = session.run(w)
        session.run(train, {x: feeds[1]})
        after_second = session.run(w)
    return after_first, after_second


if __name__ == "__main__":
    main()
