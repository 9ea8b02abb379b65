"""The digits model (Keras 3, or tf-keras with TF_USE_LEGACY_KERAS=1) trained by Keras fit with
bps.DistributedOptimizer (argv[1] "fit"), by a tf.function loop with a plain GradientTape and the
DistributedOptimizer's apply_gradients ("loop"), or by the loop of Horovod's TensorFlow 2 example: a
DistributedGradientTape and a plain optimizer, the variables broadcast after the first step ("tape");
synchronously or asynchronously, as the job's environment says. Every worker starts from the same weights:
asynchronously the servers start from the weights of the first worker to push, synchronously the broadcast
gives rank 0's, and a comparison of the two must start from the same place. Prints the training loss and the
test accuracy of the final weights, which synchronize_weights() makes the servers' on every worker."""

import os
import sys

import numpy as np
import tensorflow as tf

import bps_tf.keras as hvd
import bps_tf.tensorflow as bps_tensorflow
from testing.digits import fingerprint, load, training_loss

keras = tf.keras
EPOCHS = int(os.environ.get("EPOCHS", 15))
LEARNING_RATE = float(os.environ.get("LEARNING_RATE", 0.1))


def build():
    return keras.Sequential([
        keras.Input((64,)),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])


def train_fit(model, optimizer, x, y):
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, batch_size=32, epochs=EPOCHS, shuffle=False, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])


def train_loop(model, optimizer, x, y):
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)

    @tf.function
    def step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    first = True
    for _ in range(EPOCHS):
        for images, labels in dataset:
            step(images, labels)
            if first:  # as Horovod's examples do, once the optimizer's variables exist
                hvd.broadcast_variables(model.variables + optimizer.variables, root_rank=0)
                first = False


def train_tape(model, optimizer, x, y):
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)

    @tf.function
    def step(images, labels, first_batch):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        tape = bps_tensorflow.DistributedGradientTape(tape)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        if first_batch:
            bps_tensorflow.broadcast_variables(model.variables, root_rank=0)
            bps_tensorflow.broadcast_variables(optimizer.variables, root_rank=0)
        return loss

    first = True
    for _ in range(EPOCHS):
        for images, labels in dataset:
            step(images, labels, first)
            first = False


def main():
    how = sys.argv[1]
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    x_train, y_train, x_test, y_test = load(rank, size)
    keras.utils.set_random_seed(1234)
    model = build()
    # Synchronously one step of the averaged gradient at the size-scaled rate (Horovod's rule); asynchronously
    # every worker's step at the base rate: the same progress per round of steps.
    rate = LEARNING_RATE if hvd.is_async() else LEARNING_RATE * size
    if how == "tape":
        train_tape(model, keras.optimizers.SGD(rate), x_train, y_train)
    else:
        optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(rate))
        (train_fit if how == "fit" else train_loop)(model, optimizer, x_train, y_train)
    hvd.synchronize_weights()
    predictions = np.argmax(model.predict(x_test, verbose=0), axis=1)
    accuracy = float(np.mean(predictions == y_test))
    loss = training_loss(lambda x: model.predict(x, verbose=0))
    mode = "async" if hvd.is_async() else "sync"
    print(f"rank {rank}: {how} {mode} loss {loss:.4f} accuracy {accuracy:.4f} weights "
          f"{fingerprint(model.get_weights())}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    sys.exit(main())
