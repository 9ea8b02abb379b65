"""The shape of Horovod's elastic Keras MNIST example (examples/elastic/tensorflow2/tensorflow2_keras_mnist_elastic.py)
on bps_tf, with only the import changed under tf-keras: the same calls in the same order. A DistributedOptimizer
with backward_passes_per_step=1 and average_aggregated_gradients=True, compile(experimental_run_tf_function=
False), one fit() step before the KerasState is made, a reset callback that sets the learning rate with
backend.set_value and runs fit() again, the three elastic callbacks (a commit every batch), ModelCheckpoint on
rank 0 only, fit(steps_per_epoch=N // size(), epochs=E - state.epoch) inside elastic.run.

What cannot run here is replaced: scikit-learn's digits (8x8 images) instead of downloading MNIST, smaller
convolutions and layers, fewer batches and epochs, checkpoints in LOG_DIR instead of the working directory.

Under Keras 3 (the default) only Keras 3's own API changes apply, each marked "Keras 3:" below:
`optimizer.lr` is `optimizer.learning_rate`, a Keras variable that `backend.set_value` cannot set (its `assign`
does), and compile() has no experimental_run_tf_function.

Added for the test (testing.elastic_steps): each step is logged, a worker started again waits before init() until
the others went on without it, and at the end every worker prints its weights' fingerprint.

Usage: elastic_keras_mnist_example.py LOG_DIR. Keras 3, or tf-keras with TF_USE_LEGACY_KERAS=1."""

import faulthandler
import os
import signal
import sys

import tensorflow as tf

import bps_tf.keras as hvd
from testing.digits import fingerprint, load
from testing.elastic_steps import log_step, wait_until_the_others_went_on

KERAS3 = os.environ.get("TF_USE_LEGACY_KERAS") != "1"
BATCHES = 60  # per epoch, divided among the workers
EPOCHS = 4


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

    model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(8, [3, 3], activation='relu'),
        tf.keras.layers.Conv2D(16, [3, 3], activation='relu'),
        tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
        tf.keras.layers.Dropout(0.25),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(32, activation='relu'),
        tf.keras.layers.Dropout(0.5),
        tf.keras.layers.Dense(10, activation='softmax'),
    ])

    scaled_lr = 0.001 * hvd.size()
    opt = tf.optimizers.Adam(scaled_lr)
    opt = hvd.DistributedOptimizer(opt, backward_passes_per_step=1, average_aggregated_gradients=True)

    if KERAS3:  # Keras 3: compile() has no experimental_run_tf_function
        model.compile(loss=tf.losses.SparseCategoricalCrossentropy(), optimizer=opt, metrics=['accuracy'])
    else:
        model.compile(loss=tf.losses.SparseCategoricalCrossentropy(), optimizer=opt, metrics=['accuracy'],
                      experimental_run_tf_function=False)

    # Builds the model and the optimizer's variables before the state is made.
    model.fit(dataset, steps_per_epoch=1, epochs=1, callbacks=None)

    state = hvd.elastic.KerasState(model, batch=0, epoch=0)

    def on_state_reset():
        if KERAS3:  # Keras 3: `lr` is `learning_rate`, a Keras variable, which backend.set_value cannot set
            state.model.optimizer.learning_rate.assign(0.001 * hvd.size())
        else:
            tf.keras.backend.set_value(state.model.optimizer.lr, 0.001 * hvd.size())
        state.model.fit(dataset, steps_per_epoch=1, epochs=1, callbacks=None)

    state.register_reset_callbacks([on_state_reset])

    callbacks = [
        hvd.elastic.UpdateEpochStateCallback(state),
        hvd.elastic.UpdateBatchStateCallback(state),
        hvd.elastic.CommitStateCallback(state),
    ]

    if hvd.rank() == 0:
        callbacks.append(tf.keras.callbacks.ModelCheckpoint(os.path.join(log_dir, 'checkpoint-{epoch}.h5')))

    class StepLog(tf.keras.callbacks.Callback):  # for the test
        def on_train_batch_end(self, batch, logs=None):
            log_step(log_dir, state.epoch, state.batch)

    callbacks.append(StepLog())

    @hvd.elastic.run
    def train(state):
        state.model.fit(dataset, steps_per_epoch=BATCHES // hvd.size(), epochs=EPOCHS - state.epoch,
                        callbacks=callbacks, verbose=1)

    train(state)

    learning_rate = float(model.optimizer.learning_rate.numpy())
    print(f"rank {hvd.rank()}: weights {fingerprint(model.get_weights())} epochs {state.epoch} size {hvd.size()} "
          f"learning rate {learning_rate:.4f}", flush=True)


if __name__ == "__main__":
    main()
