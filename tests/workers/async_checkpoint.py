"""Asynchronous training under BytePSStrategy, saved and resumed (argv[1]: "train", "resume" or
"resume_after_a_step", argv[2]: the checkpoint's path). "train": Keras fit, then a synchronous barrier and a
step at a zero learning rate so that every worker holds the servers' weights; worker 0 saves them. "resume": a
new job (its servers hold nothing) builds the model, every worker loads the checkpoint, and a step at a zero
learning rate must give every worker the saved weights, within float32 rounding (the servers' copy is the
checkpoint's); then it trains on, and every worker ends with the same weights. "resume_after_a_step" takes a
zero step before loading: the servers hold the new job's initial weights, and the load pushes the change to
the checkpoint's."""

import sys

import numpy as np
import tensorflow as tf

import bps_tf
from bps_tf import BytePSStrategy
from testing.digits import fingerprint, load


def zero_step(strategy, model, optimizer, x, y, batch):
    """A barrier, then a step at learning rate 0: each worker's pull gives it the servers' weights."""
    done = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)
    assert float(done) == bps_tf.size(), done
    rate = float(optimizer.learning_rate.numpy())
    optimizer.learning_rate.assign(0.0)
    model.fit(x[:batch], y[:batch], batch_size=batch, epochs=1, shuffle=False, verbose=0)
    optimizer.learning_rate.assign(rate)


def main():
    phase, path = sys.argv[1], sys.argv[2]
    strategy = BytePSStrategy()
    rank = bps_tf.rank()
    x_train, y_train, _, _ = load(rank=0, size=1)
    tf.keras.utils.set_random_seed(1234 if phase == "train" else 99)  # the resumed job starts elsewhere
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(32, activation="relu"),
                                     tf.keras.layers.Dense(10, activation="softmax")])
        optimizer = tf.keras.optimizers.SGD(0.2)
        model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", jit_compile=False)
    batch = 16 * strategy.num_replicas_in_sync
    if phase == "train":
        model.fit(x_train, y_train, batch_size=batch, epochs=3, shuffle=False, verbose=0)
        zero_step(strategy, model, optimizer, x_train, y_train, batch)
        if rank == 0:
            model.save_weights(path)
        print(f"rank {rank}: saved {fingerprint(model.get_weights())}", flush=True)
        return
    if phase == "resume_after_a_step":
        zero_step(strategy, model, optimizer, x_train, y_train, batch)
    model.load_weights(path)
    saved = [w.copy() for w in model.get_weights()]
    zero_step(strategy, model, optimizer, x_train, y_train, batch)
    restored = model.get_weights()
    # Loaded before any step, the first step sends the checkpoint's weights as the initial ones; after a step,
    # the servers add worker 0's change to the checkpoint's (each worker's change added would be 3 times the
    # change): either way the checkpoint's weights, within float32 rounding.
    largest = max(float(np.abs(a - b).max()) for a, b in zip(restored, saved))
    assert largest <= 1e-6, f"the servers do not hold the checkpoint: {largest} off"
    print(f"rank {rank}: resumed {fingerprint(restored)}", flush=True)
    model.fit(x_train, y_train, batch_size=batch, epochs=1, shuffle=False, verbose=0)
    zero_step(strategy, model, optimizer, x_train, y_train, batch)
    print(f"rank {rank}: trained on {fingerprint(model.get_weights())}", flush=True)


if __name__ == "__main__":
    main()
