"""Keras fit with DistributedOptimizer and the callbacks (Keras 3, or tf-keras with TF_USE_LEGACY_KERAS=1):
the loss goes down and every worker ends with bit-identical weights."""

import os
import sys

import numpy as np

if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
    import tf_keras as keras
else:
    import keras

import bps_tf as bps
import bps_tf.keras as bps_keras
from testing.agreement import assert_identical_everywhere


def dataset():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 20)).astype(np.float32)
    true_w = rng.standard_normal((20, 1)).astype(np.float32)
    y = (x @ true_w > 0).astype(np.float32)
    return x, y


def main():
    backward_passes = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    bps.init()
    rank, size = bps.rank(), bps.size()
    x, y = dataset()
    x, y = x[rank::size], y[rank::size]  # this worker's shard

    keras.utils.set_random_seed(100 + rank)  # different initial weights everywhere: the callback fixes that
    model = keras.Sequential([keras.Input((20,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid")])
    base_lr = 0.05
    optimizer = bps.DistributedOptimizer(keras.optimizers.SGD(learning_rate=base_lr * size, momentum=0.9),
                                         backward_passes_per_step=backward_passes)
    model.compile(optimizer=optimizer, loss="binary_crossentropy", metrics=["accuracy"])
    steps = len(x) // 32
    callbacks = [
        bps_keras.callbacks.BroadcastGlobalVariablesCallback(0),
        bps_keras.callbacks.MetricAverageCallback(),
        bps_keras.callbacks.LearningRateWarmupCallback(initial_lr=base_lr * size, warmup_epochs=2,
                                                       steps_per_epoch=steps),
    ]
    history = model.fit(x, y, batch_size=32, epochs=6, callbacks=callbacks, verbose=2 if rank == 0 else 0,
                        shuffle=False)
    losses = history.history["loss"]
    assert losses[-1] < 0.7 * losses[0], f"loss did not go down: {losses}"
    # MetricAverageCallback: logged metrics are global, so identical on every worker.
    assert_identical_everywhere([np.array(losses, np.float64)], "logged-loss")
    assert_identical_everywhere([w for w in model.get_weights()], "weights")
    print(f"rank {rank}: loss {losses[0]:.3f} -> {losses[-1]:.3f}, weights identical", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
