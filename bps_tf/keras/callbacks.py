"""Keras callbacks with Horovod's names and meaning."""

import numpy as np
import tensorflow as tf

import bps_tf.numpy as bps_numpy
from bps_tf.communication_metrics import CommunicationMeter
from bps_tf.keras.learning_rate import get_learning_rate, get_momentum, set_learning_rate, set_momentum
from bps_tf.ops import broadcast_variables

_Callback = tf.keras.callbacks.Callback


def _model_variables(model):
    """The model's variables; none while it is unbuilt (tf-keras raises then instead of returning [])."""
    return list(model.variables) if getattr(model, "built", True) else []


def _optimizer_variables(model):
    optimizer = getattr(model, "optimizer", None)
    return list(getattr(optimizer, "variables", []) or []) if optimizer is not None else []


class BroadcastGlobalVariablesCallback(_Callback):
    """Starts every worker from worker `root_rank`'s model and optimizer state.

    A built model is broadcast when training begins, so that the first step starts from the same weights.
    Everything (model and optimizer, whose state the first step creates, and a model built by its first
    batch) is broadcast again after the first batch, as Horovod does. Training with nothing to broadcast
    then is an error, never silent divergence. `local_variables` are left alone.
    """

    def __init__(self, root_rank, device="", local_variables=None):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self._local = {id(v) for v in (local_variables or [])}
        self.broadcast_done = False

    def _broadcast(self, variables, name):
        variables = [v for v in variables if id(v) not in self._local]
        broadcast_variables(variables, self.root_rank, name=name)
        return len(variables)

    def on_train_begin(self, logs=None):
        self._broadcast(_model_variables(self.model), "model.begin")

    def on_train_batch_end(self, batch, logs=None):
        if self.broadcast_done:
            return
        self.broadcast_done = True
        model_variables = _model_variables(self.model)
        if not model_variables:
            raise RuntimeError(
                "BroadcastGlobalVariablesCallback: the model has no variables after its first batch, so workers "
                "cannot be made to start alike; build the model before training (an Input layer or model.build)")
        self._broadcast(model_variables, "model")
        self._broadcast(_optimizer_variables(self.model), "optimizer")


class MetricAverageCallback(_Callback):
    """Replaces each epoch's metrics with their average over all workers, so logs (and callbacks after this
    one, such as checkpoints and early stopping) see global values."""

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        for key in sorted(logs):
            value = logs[key]
            if isinstance(value, (int, float, np.floating, np.integer)) or (hasattr(value, "numpy")):
                local = np.asarray(float(np.asarray(value)), dtype=np.float64)
                logs[key] = float(bps_numpy.push_pull(local, f"metric.{key}", average=True))


class LearningRateScheduleCallback(_Callback):
    """Sets the learning rate to initial_lr * multiplier(epoch) for start_epoch <= epoch < end_epoch;
    `multiplier` is a number or a function of the (fractional, unless staircase) epoch."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        self.initial_lr = initial_lr
        self.multiplier = multiplier if callable(multiplier) else (lambda epoch: multiplier)
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = 0
        self._restore_momentum = None

    def _active(self, epoch):
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def _adjust(self, epoch):
        optimizer = self.model.optimizer
        old_lr = get_learning_rate(optimizer)
        new_lr = self.initial_lr * self.multiplier(epoch)
        set_learning_rate(optimizer, new_lr)
        momentum = get_momentum(optimizer)
        # Momentum correction (Goyal et al.): scale momentum with the lr change for one step.
        if self.momentum_correction and momentum and old_lr > 0:
            self._restore_momentum = momentum
            set_momentum(optimizer, momentum * new_lr / old_lr)

    def on_train_begin(self, logs=None):
        if self.steps_per_epoch is None:
            self.steps_per_epoch = (self.params or {}).get("steps")

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch
        if self._active(epoch) and self.staircase:
            self._adjust(epoch)

    def on_train_batch_begin(self, batch, logs=None):
        if self._active(self.current_epoch) and not self.staircase:
            if not self.steps_per_epoch:
                raise ValueError("LearningRateScheduleCallback: staircase=False needs steps_per_epoch")
            self._adjust(self.current_epoch + batch / self.steps_per_epoch)

    def on_train_batch_end(self, batch, logs=None):
        if self._restore_momentum is not None:
            set_momentum(self.model.optimizer, self._restore_momentum)
            self._restore_momentum = None

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = get_learning_rate(self.model.optimizer)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Ramps the learning rate from initial_lr / size() to initial_lr over warmup_epochs (Goyal et al.),
    for large global batches."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True, steps_per_epoch=None, verbose=0):
        size = bps_numpy.size()

        def multiplier(epoch):
            return 1.0 / size * (epoch * (size - 1) / warmup_epochs + 1)

        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs, staircase=False,
                         momentum_correction=momentum_correction, steps_per_epoch=steps_per_epoch)
        self.verbose = verbose

    def on_epoch_begin(self, epoch, logs=None):
        super().on_epoch_begin(epoch, logs)
        if epoch == self.end_epoch:  # the ramp ends exactly at initial_lr
            set_learning_rate(self.model.optimizer, self.initial_lr)

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose and bps_numpy.rank() == 0:
            print(f"Epoch {epoch + 1}: finished learning rate warmup to {get_learning_rate(self.model.optimizer):g}")


class CommunicationMetrics(_Callback):
    """Puts this worker's communication per training step into Keras's logs, so that the progress bar,
    `History` and `keras.callbacks.TensorBoard` show it: bps/push_pull_ms, bps/wait_ms, bps/bytes_pushed,
    bps/bytes_pulled, bps/messages_sent, bps/messages_received, bps/compression_ratio and bps/workers
    (bps_tf.communication_metrics.CommunicationMeter).

    Every `every_n_steps` steps a batch's logs get the figures per step of the last `every_n_steps` steps
    (the batches between keep the latest); an epoch's logs get that epoch's figures per step. List it before
    the callbacks that should see them (TensorBoard: `update_freq` for the batch figures).
    """

    def __init__(self, every_n_steps=10):
        super().__init__()
        if int(every_n_steps) < 1:
            raise ValueError(f"CommunicationMetrics: every_n_steps must be at least 1, got {every_n_steps}")
        self.every_n_steps = int(every_n_steps)
        # tf-keras hands callbacks without this a copy of the batch logs, which TensorBoard never sees.
        self._supports_tf_logs = True
        self._window = None
        self._epoch = None
        self._figures = {}
        self._last_batch = -1
        self._window_steps = 0

    def on_train_begin(self, logs=None):
        self._window = CommunicationMeter()
        self._window_steps = 0
        self._figures = {}

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = CommunicationMeter()
        self._last_batch = -1

    def on_train_batch_end(self, batch, logs=None):
        # `batch` counts steps: with steps_per_execution > 1 one call ends several.
        self._window_steps += batch - self._last_batch
        self._last_batch = batch
        if self._window_steps >= self.every_n_steps:
            self._figures = self._window.read(self._window_steps)
            self._window_steps = 0
        if logs is not None:
            logs.update(self._figures)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None and self._last_batch >= 0:
            logs.update(self._epoch.read(self._last_batch + 1))


class BestModelCheckpoint(tf.keras.callbacks.ModelCheckpoint):
    """Saves the model whenever the monitored value improves (save_best_only), on worker 0 only.

    Horovod's signature, plus `filepath`, which Horovod's Spark estimator sets afterwards: set it here, or
    assign `.filepath` before training.
    """

    def __init__(self, monitor="val_loss", verbose=0, save_weights_only=False, mode="auto", save_freq="epoch",
                 filepath=None):
        # Keras checks the file name when one is given; a placeholder stands in until one is set.
        super().__init__(filepath=filepath or _PLACEHOLDER_PATH[save_weights_only], monitor=monitor,
                         verbose=verbose, save_best_only=True, save_weights_only=save_weights_only, mode=mode,
                         save_freq=save_freq)
        if filepath is None:
            self.filepath = None

    def on_train_begin(self, logs=None):
        if self.filepath is None:
            raise ValueError("BestModelCheckpoint needs a filepath: pass filepath= or set .filepath before training")
        super().on_train_begin(logs)

    def _save_model(self, *args, **kwargs):
        # Under a distribution strategy across workers (BytePSStrategy) the strategy chooses who writes.
        strategy = getattr(self.model, "distribute_strategy", None)
        if bps_numpy.rank() == 0 or (strategy is not None and strategy.num_replicas_in_sync > 1):
            super()._save_model(*args, **kwargs)


# Names Keras accepts for a model or for weights, used only until the real filepath is set.
_PLACEHOLDER_PATH = {False: "unset.keras", True: "unset.weights.h5"}
