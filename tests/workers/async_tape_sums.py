"""Asynchronous training with a DistributedGradientTape, as Horovod's TensorFlow 2 example writes it: a Keras
model in float64, a plain optimizer, the variables broadcast after the first step. Each worker adds up the
changes its own optimizer steps made (around apply_gradients, inside the step); after synchronize_weights()
every worker must hold the initial weights plus the sum of every worker's changes (within float64 rounding
of additions in another order), the same weights on every worker. The broadcast moves the weights without
being anyone's change."""

import sys

import numpy as np
import tensorflow as tf

import bps_tf.tensorflow as bps
from testing.digits import fingerprint

keras = tf.keras
STEPS = 12


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    assert bps.is_async(), "run with BYTEPS_ENABLE_ASYNC=1 or BYTEPS_STALENESS"
    keras.utils.set_random_seed(7)  # every worker starts from the same weights: the servers' initial ones
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="tanh", dtype="float64"),
                              keras.layers.Dense(1, dtype="float64")])
    initial = [v.numpy() for v in model.trainable_variables]
    optimizer = keras.optimizers.SGD(0.05, momentum=0.5)
    made = [tf.Variable(tf.zeros_like(v), trainable=False) for v in model.trainable_variables]
    rng = np.random.default_rng(rank)

    @tf.function
    def step(x, y, first_batch):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        tape = bps.DistributedGradientTape(tape)
        gradients = tape.gradient(loss, model.trainable_variables)
        before = [tf.identity(v) for v in model.trainable_variables]
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        for total, v, old in zip(made, model.trainable_variables, before):
            total.assign_add(tf.identity(v) - old)
        if first_batch:
            bps.broadcast_variables(model.variables, root_rank=0)

    for i in range(STEPS):
        step(rng.standard_normal((8, 6)), rng.standard_normal((8, 1)), i == 0)
    bps.synchronize_weights()
    everyone_made = [bps.allreduce(m, op=bps.Sum, name=f"made.{i}").numpy() for i, m in enumerate(made)]
    final = [v.numpy() for v in model.trainable_variables]
    for i, (weights, start, change) in enumerate(zip(final, initial, everyone_made)):
        assert np.abs(change).max() > 1e-3, "the steps changed nothing"
        np.testing.assert_allclose(weights, start + change, rtol=0, atol=1e-12, err_msg=f"variable {i}")
    print(f"rank {rank}: tape changes exact, final weights {fingerprint(final)}", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    sys.exit(main())
