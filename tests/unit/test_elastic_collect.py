"""An interrupted elastic attempt's garbage is collected off the training thread: the tf.data iterator of a
Keras fit that a change of workers interrupted waits for tf.data's autotuning thread when it is destroyed
(seconds after a fit of some length), and that wait must never fall on the training thread, where the other
workers would wait for it in the middle of a collective."""

import gc
import threading
import time
import types

import numpy as np
import pytest

FIT_SECONDS = 12  # long enough for tf.data's autotuning thread to sleep for seconds between its rounds


@pytest.mark.timeout(120)
def test_the_training_thread_never_waits_for_an_interrupted_fits_iterator(monkeypatch):
    import keras
    import tensorflow as tf

    from bps_tf.elastic import HorovodInternalError, ObjectState, generations
    from bps_tf.elastic.collection import SETTLE_S
    from bps_tf.elastic.generations import run_fn

    # One process without a job: the next generation is this process again.
    monkeypatch.setattr(generations, "process", types.SimpleNamespace(size=lambda: 1, rank=lambda: 0))

    x = np.random.default_rng(0).random((256, 16), dtype=np.float32)
    data = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).repeat().batch(32)
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")

    class Interrupt(keras.callbacks.Callback):  # what a lost worker does to the survivors' fit
        def on_train_begin(self, logs=None):
            self.started = time.monotonic()

        def on_train_batch_end(self, batch, logs=None):
            if time.monotonic() - self.started > FIT_SECONDS:
                interrupted.append(time.monotonic())
                raise HorovodInternalError("a worker was lost")

    state = ObjectState(bcast_object=lambda value: value, get_rank=lambda: 0)
    attempts, interrupted = [], []

    def train(state):
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            model.fit(data, steps_per_epoch=10**9, epochs=1, verbose=0, callbacks=[Interrupt()])

    gc.collect()
    run_fn(train, reset_fn=lambda: None)(state)
    time.sleep(SETTLE_S + 0.5)  # training resumed
    started = time.monotonic()
    gc.collect()  # the training thread's next collection
    waited = time.monotonic() - started
    assert len(attempts) == 2
    recovery = attempts[1] - interrupted[0]
    assert recovery < 2.0 and waited < 1.0, (f"the training thread waited for the interrupted fit's garbage: "
                                             f"{recovery:.1f} s to the next attempt, {waited:.1f} s in its next "
                                             "collection")
    for thread in threading.enumerate():
        if thread.name == "bps_tf.elastic.collection":
            thread.join(timeout=60)
    assert gc.isenabled(), "automatic collection stays paused after the collection aside"
