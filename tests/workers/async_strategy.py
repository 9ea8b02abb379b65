"""The digits model trained under BytePSStrategy by Keras fit (argv[1] "fit") or a strategy.run loop ("loop"),
synchronously or asynchronously as the job's environment says, with the same learning rate (each replica's loss
is scaled by the global replica count, so asynchronous workers' steps add up to one synchronous step). Prints
the training loss and the test accuracy of the servers' final weights, which synchronize_weights() gives every
worker."""

import os
import sys

import numpy as np
import tensorflow as tf

import bps_tf
from bps_tf import BytePSStrategy
from testing.digits import fingerprint, load, training_loss

keras = tf.keras
EPOCHS = int(os.environ.get("EPOCHS", 15))
LEARNING_RATE = float(os.environ.get("LEARNING_RATE", 0.5))
REPLICA_BATCH = int(os.environ.get("REPLICA_BATCH", 16))
OPTIMIZER = os.environ.get("OPTIMIZER", "sgd")  # or "adamw", whose weight decay updates each variable too


def probabilities(weights, x):
    w1, b1, w2, b2 = weights
    logits = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    exponentials = np.exp(logits - logits.max(axis=1, keepdims=True))
    return exponentials / exponentials.sum(axis=1, keepdims=True)


def accuracy(weights, x, y):
    return float(np.mean(np.argmax(probabilities(weights, x), axis=1) == y))


def train_loop(strategy, model, optimizer, x, y, batch):
    loss_fn = keras.losses.SparseCategoricalCrossentropy(reduction="none")
    dataset = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(batch))

    @tf.function
    def step(images, labels):
        def replica_step(images, labels):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(loss_fn(labels, model(images, training=True))) / batch
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))

        strategy.run(replica_step, args=(images, labels))

    for _ in range(EPOCHS):
        for images, labels in dataset:
            step(images, labels)


def main():
    how = sys.argv[1] if len(sys.argv) > 1 else "fit"
    strategy = BytePSStrategy()
    rank, size = bps_tf.rank(), bps_tf.size()
    x_train, y_train, x_test, y_test = load(rank, size)
    keras.utils.set_random_seed(1234)  # the same run to run (worker 0's initial weights are everyone's)
    with strategy.scope():
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(10, activation="softmax")])
        optimizer = (keras.optimizers.AdamW(LEARNING_RATE, weight_decay=0.01) if OPTIMIZER == "adamw"
                     else keras.optimizers.SGD(LEARNING_RATE))
        model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
    batch = REPLICA_BATCH * strategy.num_replicas_in_sync
    if how == "fit":
        model.fit(x_train, y_train, batch_size=batch, epochs=EPOCHS, shuffle=False, verbose=0)
    else:
        train_loop(strategy, model, optimizer, x_train, y_train, batch)
    bps_tf.synchronize_weights()  # every worker holds the servers' weights
    mode = "async" if bps_tf.is_async() else "sync"
    weights = model.get_weights()
    loss = training_loss(lambda x: probabilities(weights, x))
    print(f"rank {rank}: strategy-{how} {mode} loss {loss:.4f} accuracy {accuracy(weights, x_test, y_test):.4f} "
          f"weights {fingerprint(weights)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
