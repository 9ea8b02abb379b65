"""The shape of Horovod's elastic TensorFlow 2 MNIST example (examples/elastic/tensorflow2/tensorflow2_mnist_elastic.py)
on bps_tf, with only the import changed under tf-keras: the same calls in the same order. A tf.function training
step with DistributedGradientTape (or without it, for the first step, which makes the optimizer's variables
before the state exists), TensorFlowKerasState(model, optimizer, batch=0), a reset callback that assigns
`opt.lr`, a loop over `dataset.skip(state.batch).take(N // size())` inside elastic.run with a commit after every
batch, and a tf.train.Checkpoint of model and optimizer saved by rank 0 at the end.

What cannot run here is replaced: scikit-learn's digits (8x8 images) instead of downloading MNIST, smaller
convolutions and layers, fewer batches, the checkpoint in LOG_DIR instead of the working directory.

Under Keras 3 (the default) only Keras 3's own API change applies, marked "Keras 3:" below: `opt.lr` is
`opt.learning_rate`.

Added for the test (testing.elastic_steps): each step is logged, a worker started again waits before init() until
the others went on without it, and at the end every worker prints its weights' fingerprint (in asynchronous
training, BYTEPS_ENABLE_ASYNC=1, after synchronize_weights()).

Usage: elastic_tf2_mnist_example.py LOG_DIR. Keras 3, or tf-keras with TF_USE_LEGACY_KERAS=1."""

import faulthandler
import os
import signal
import sys

import tensorflow as tf

import bps_tf.tensorflow as hvd
from testing.digits import fingerprint, load
from testing.elastic_steps import log_step, wait_until_the_others_went_on

KERAS3 = os.environ.get("TF_USE_LEGACY_KERAS") != "1"
BATCHES = 240  # divided among the workers


def main():
    log_dir = sys.argv[1]
    faulthandler.register(signal.SIGUSR1)  # a stuck worker shows where it is

    wait_until_the_others_went_on(log_dir)  # for the test
    hvd.init()

    gpus = tf.config.experimental.list_physical_devices('GPU')
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], 'GPU')

    images, labels, _, _ = load(0, 1)  # every worker the whole training set, as with MNIST
    images = images.reshape(-1, 8, 8)
    dataset = tf.data.Dataset.from_tensor_slices(
        (tf.cast(images[..., tf.newaxis], tf.float32), tf.cast(labels, tf.int64)))
    dataset = dataset.repeat().shuffle(10000).batch(32)

    mnist_model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(8, [3, 3], activation='relu'),
        tf.keras.layers.Conv2D(16, [3, 3], activation='relu'),
        tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
        tf.keras.layers.Dropout(0.25),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(32, activation='relu'),
        tf.keras.layers.Dropout(0.5),
        tf.keras.layers.Dense(10, activation='softmax'),
    ])
    loss = tf.losses.SparseCategoricalCrossentropy()

    lr = 0.001
    opt = tf.optimizers.Adam(lr * hvd.size())

    @tf.function
    def training_step(images, labels, allreduce=True):
        with tf.GradientTape() as tape:
            probs = mnist_model(images, training=True)
            loss_value = loss(labels, probs)

        if allreduce:
            tape = hvd.DistributedGradientTape(tape)

        grads = tape.gradient(loss_value, mnist_model.trainable_variables)
        opt.apply_gradients(zip(grads, mnist_model.trainable_variables))
        return loss_value

    # Makes the model's and the optimizer's variables before the state is made.
    for batch_idx, (images, labels) in enumerate(dataset.take(1)):
        training_step(images, labels, allreduce=False)

    @hvd.elastic.run
    def train(state):
        start_batch = state.batch

        for batch_idx, (images, labels) in enumerate(dataset.skip(state.batch).take(BATCHES // hvd.size())):
            state.batch = start_batch + batch_idx
            loss_value = training_step(images, labels)

            if state.batch % 10 == 0 and hvd.rank() == 0:
                print('Step #%d\tLoss: %.6f' % (state.batch, loss_value))

            state.commit()
            log_step(log_dir, state.batch)  # for the test

    def on_state_reset():
        if KERAS3:  # Keras 3: `opt.lr` is `opt.learning_rate`
            opt.learning_rate.assign(lr * hvd.size())
        else:
            opt.lr.assign(lr * hvd.size())

    state = hvd.elastic.TensorFlowKerasState(mnist_model, opt, batch=0)
    state.register_reset_callbacks([on_state_reset])

    train(state)

    checkpoint_dir = os.path.join(log_dir, 'checkpoints')
    checkpoint = tf.train.Checkpoint(model=mnist_model, optimizer=opt)

    if hvd.rank() == 0:
        checkpoint.save(checkpoint_dir)

    if hvd.is_async():  # for the test: asynchronous workers hold the servers' weights as they last saw them
        hvd.synchronize_weights()
    print(f"rank {hvd.rank()}: weights {fingerprint(mnist_model.get_weights())} batch {state.batch} "
          f"size {hvd.size()} learning rate {float(opt.learning_rate.numpy()):.4f}", flush=True)


if __name__ == "__main__":
    main()
