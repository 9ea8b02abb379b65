"""Checkpoints under BytePSStrategy: only worker 0 writes (ModelCheckpoint, BackupAndRestore); a job
interrupted after 2 of 4 epochs and started again resumes from the backup and ends with the same weights as
an uninterrupted run. Each worker is given its own directory, so worker 1 has no backup to read: the
restored state reaches it from worker 0.

    strategy_checkpoint.py interrupt DIR [COMPRESSION]  # trains until epoch 2, then fails
    strategy_checkpoint.py resume DIR [COMPRESSION]     # resumes, compares with an uninterrupted run

With COMPRESSION (and BYTEPS_MIN_COMPRESS_BYTES=0) the gradients are compressed, and the backup holds every
worker's momentum and error feedback and the server's residuals: the resumed run still equals the
uninterrupted one, whose optimizer has the same name as the resumed run's.
"""

import os
import sys

import numpy as np

from testing.worker_setup import split_cpu  # noqa: E402

split_cpu(2)

import keras  # noqa: E402

import bps_tf  # noqa: E402
from bps_tf.strategy import BytePSStrategy  # noqa: E402

EPOCHS = 4


class EpochLog(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch)


class Interrupt(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 2:
            raise RuntimeError("simulated failure")


def data():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((96, 5)).astype(np.float32)
    return x, np.sin(x).sum(axis=1, keepdims=True).astype(np.float32)


def train(strategy, callbacks):
    x, y = data()
    with strategy.scope():
        keras.utils.set_random_seed(9)
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(1)])
        # One name for every run's optimizer (as Keras 3.12 gives by default): the uninterrupted run in the
        # resuming process must still start its compression state afresh.
        model.compile(optimizer=keras.optimizers.Adam(0.01, name="adam"), loss="mse")
    model.fit(x, y, batch_size=16, epochs=EPOCHS, shuffle=False, verbose=0, callbacks=callbacks)
    return model


def main():
    phase, root = sys.argv[1], sys.argv[2]
    strategy = BytePSStrategy(compression=sys.argv[3] if len(sys.argv) > 3 else None)
    rank = bps_tf.rank()
    mine = os.path.join(root, f"rank{rank}")
    callbacks = [keras.callbacks.BackupAndRestore(os.path.join(mine, "backup")),
                 keras.callbacks.ModelCheckpoint(os.path.join(mine, "epoch{epoch}.weights.h5"),
                                                 save_weights_only=True),
                 keras.callbacks.TensorBoard(os.path.join(mine, "logs"))]
    if phase == "interrupt":
        try:
            train(strategy, callbacks + [Interrupt()])
        except RuntimeError as error:
            print(f"rank {rank}: interrupted ({error})", flush=True)
        backup = os.path.join(mine, "backup")
        print(f"rank {rank}: backup {sorted(os.listdir(backup)) if os.path.exists(backup) else []}", flush=True)
    else:
        log = EpochLog()
        resumed = train(strategy, callbacks + [log])
        assert log.epochs == [2, 3], f"did not resume from the backup: ran epochs {log.epochs}"
        uninterrupted = train(strategy, [])
        for got, want in zip(resumed.get_weights(), uninterrupted.get_weights()):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        print(f"rank {rank}: resumed run equals uninterrupted run", flush=True)
    written = sorted(os.listdir(mine)) if os.path.exists(mine) else []
    print(f"rank {rank}: files {written}", flush=True)
    bps_tf.shutdown()


if __name__ == "__main__":
    main()
