"""The learning-rate callbacks (bps_tf.keras.callbacks) on a Keras 3 optimizer, without a job."""

import keras
import pytest

import bps_tf.numpy as bps_numpy
from bps_tf.keras import callbacks


class _Model:
    def __init__(self, optimizer):
        self.optimizer = optimizer


def attach(callback, optimizer, steps=None):
    callback.set_model(_Model(optimizer))
    callback.set_params({"steps": steps})
    return callback


def lr(optimizer):
    return float(optimizer.learning_rate.numpy())


def test_schedule_applies_its_multiplier_within_its_epochs():
    optimizer = keras.optimizers.SGD(learning_rate=0.1)
    callback = attach(callbacks.LearningRateScheduleCallback(0.1, multiplier=0.5, start_epoch=1, end_epoch=2),
                      optimizer)
    callback.on_train_begin()
    callback.on_epoch_begin(0)
    assert lr(optimizer) == pytest.approx(0.1)
    callback.on_epoch_begin(1)
    assert lr(optimizer) == pytest.approx(0.05)


def test_momentum_is_corrected_for_one_step_when_the_rate_changes():
    optimizer = keras.optimizers.SGD(learning_rate=0.1, momentum=0.9)
    callback = attach(callbacks.LearningRateScheduleCallback(0.1, multiplier=lambda epoch: 2.0), optimizer)
    callback.on_train_begin()
    callback.on_epoch_begin(0)
    assert lr(optimizer) == pytest.approx(0.2)
    assert float(optimizer.momentum) == pytest.approx(0.9 * 2)  # scaled with the rate for one step
    callback.on_train_batch_end(0)
    assert float(optimizer.momentum) == pytest.approx(0.9)


def test_warmup_ramps_from_a_worker_share_to_the_full_rate(monkeypatch):
    monkeypatch.setattr(bps_numpy, "size", lambda: 4)
    optimizer = keras.optimizers.SGD(learning_rate=0.4)
    callback = attach(callbacks.LearningRateWarmupCallback(0.4, warmup_epochs=2, momentum_correction=False),
                      optimizer, steps=10)
    callback.on_train_begin()
    callback.on_epoch_begin(0)
    callback.on_train_batch_begin(0)
    assert lr(optimizer) == pytest.approx(0.1)  # initial_lr / size
    callback.on_epoch_begin(1)
    callback.on_train_batch_begin(5)
    assert lr(optimizer) == pytest.approx(0.4 / 4 * (1.5 * 3 / 2 + 1))
    callback.on_epoch_begin(2)
    assert lr(optimizer) == pytest.approx(0.4)


def test_staircase_false_needs_steps_per_epoch():
    optimizer = keras.optimizers.SGD(learning_rate=0.1)
    callback = attach(callbacks.LearningRateScheduleCallback(0.1, multiplier=1.0, staircase=False), optimizer)
    callback.on_train_begin()
    callback.on_epoch_begin(0)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        callback.on_train_batch_begin(0)
