"""A Horovod-style TensorFlow 2 Keras job with only the import changed: a Sequential without an input shape
(built by its first batch, with different random weights on every worker), the four callbacks, checkpoints
written by worker 0 only, then the checkpoint loaded back on every worker. Every worker must end with the
same weights, and the loaded model must match them.

Runs under Keras 3, or tf-keras with TF_USE_LEGACY_KERAS=1 (tf.keras follows)."""

import os
import sys
import tempfile

import numpy as np
import tensorflow as tf

import bps_tf.keras as hvd
from testing.digits import load
from testing.agreement import assert_identical_everywhere

keras = tf.keras


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    x_train, y_train, x_test, y_test = load(rank, size)
    keras.utils.set_random_seed(1234 + rank)  # every worker starts from other weights

    model = keras.Sequential([  # no input shape: built by the first batch
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dropout(0.1),
        keras.layers.Dense(10, activation="softmax"),
    ])
    scaled_lr = 0.01 * size
    optimizer = hvd.DistributedOptimizer(keras.optimizers.Adam(scaled_lr))
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=2, verbose=1),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=scaled_lr, multiplier=0.5, start_epoch=3),
    ]
    directory = os.environ.get("CHECKPOINT_DIR") or tempfile.mkdtemp(prefix="bps_tf_hvd_job_")
    checkpoint = os.path.join(directory, "checkpoint-{epoch}.keras" if not _tf_keras() else "checkpoint-{epoch}.h5")
    if rank == 0:
        callbacks.append(keras.callbacks.ModelCheckpoint(checkpoint))
    history = model.fit(x_train, y_train, batch_size=32, epochs=4, callbacks=callbacks, shuffle=False,
                        verbose=2 if rank == 0 else 0, validation_data=(x_test, y_test))
    accuracy = history.history["val_accuracy"][-1]
    assert accuracy > 0.85, history.history
    assert_identical_everywhere(model.get_weights(), "hvd-job-weights")

    hvd.barrier()  # worker 0 has written every checkpoint
    if os.path.exists(checkpoint.format(epoch=4)):  # shared by the workers of one machine
        restored = hvd.load_model(checkpoint.format(epoch=4))
        assert getattr(restored.optimizer, "_bps_wrapped", False), "load_model did not wrap the optimizer"
        for saved, trained in zip(restored.get_weights(), model.get_weights()):
            np.testing.assert_array_equal(saved, trained)
    print(f"rank {rank}: horovod keras job, val accuracy {accuracy:.3f}, weights identical", flush=True)
    hvd.shutdown()


def _tf_keras():
    return os.environ.get("TF_USE_LEGACY_KERAS") == "1"


if __name__ == "__main__":
    sys.exit(main())
