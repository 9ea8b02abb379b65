"""Training with compressed gradients on scikit-learn's digits: Keras fit under BytePSStrategy with the
compression of BYTEPS_COMPRESSION (argv[1]), then a DistributedGradientTape loop with top-k that saves and
loads its compression state halfway. Each reaches a test accuracy that shows it learned, and every worker
ends with bit-identical weights. A damaged state file fails every worker with a clear error; one saved by
another number of workers is skipped."""

import os
import sys
import tempfile

import numpy as np
import tensorflow as tf

import bps_tf as bps
from bps_tf.strategy import BytePSStrategy
from testing.digits import load
from testing.agreement import assert_identical_everywhere


def model():
    tf.keras.utils.set_random_seed(0)
    return tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(256, activation="relu"),
                                tf.keras.layers.Dense(10, activation="softmax")])


def keras_fit_under_strategy(rank):
    strategy = BytePSStrategy()  # compression from BYTEPS_COMPRESSION
    assert strategy.extended._bps_ops._compression == bps.Compression.parse(sys.argv[1]), "not the asked compression"
    x_train, y_train, x_test, y_test = load(rank=0, size=1)
    with strategy.scope():
        net = model()
        net.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                    metrics=["accuracy"])
    net.fit(x_train, y_train, batch_size=64, epochs=8, verbose=0)
    _, accuracy = net.evaluate(x_test, y_test, verbose=0)
    assert accuracy > 0.85, f"strategy with compression: test accuracy {accuracy:.3f}"
    assert_identical_everywhere(net.get_weights(), "strategy-weights")
    return accuracy


def tape_loop(rank, size):
    x_train, y_train, x_test, y_test = load(rank, size)
    net = model()
    optimizer = tf.keras.optimizers.SGD(0.1)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy()
    compression = bps.Compression.topk(0.1, min_bytes=0)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, net(x, training=True))
        tape = bps.DistributedGradientTape(tape, compression=compression)
        gradients = tape.gradient(loss, net.trainable_variables)
        optimizer.apply_gradients(zip(gradients, net.trainable_variables))
        return loss

    net(x_train[:1])
    bps.broadcast_variables(net.variables, root_rank=0)
    batches = tf.data.Dataset.from_tensor_slices((x_train, y_train)).repeat(10).batch(32, drop_remainder=True)
    for i, (x, y) in enumerate(batches.take(300)):
        step(x, y)
        if i == 150:
            check_state_checkpoints(rank, size)
    accuracy = float(np.mean(np.argmax(net(x_test).numpy(), axis=1) == y_test))
    assert accuracy > 0.85, f"tape with top-k: test accuracy {accuracy:.3f}"
    assert_identical_everywhere(net.get_weights(), "tape-weights")
    return accuracy


def check_state_checkpoints(rank, size):
    directory = tempfile.mkdtemp(prefix="bps_compression_state_") if rank == 0 else "unused-on-other-workers"
    path = os.path.join(directory, "bps_compression_state.npz")
    assert bps.save_compression_state(directory), "the tape's compressed gradients left no state"
    assert bps.load_compression_state(directory), "the saved state was not found"
    if rank == 0:
        with open(path, "r+b") as damaged:
            damaged.seek(40)
            damaged.write(b"\xff" * 64)
    try:
        bps.load_compression_state(directory)
        raise AssertionError("a damaged compression state was loaded")
    except ValueError as error:
        assert "cannot read" in str(error), error
    if rank == 0:
        np.savez(path, workers=np.int64(size + 1))
    assert not bps.load_compression_state(directory), "a state of another number of workers was loaded"


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    strategy_accuracy = keras_fit_under_strategy(rank)
    tape_accuracy = tape_loop(rank, size)
    print(f"rank {rank}: compressed training: strategy accuracy {strategy_accuracy:.3f}, "
          f"tape accuracy {tape_accuracy:.3f}, weights identical", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
