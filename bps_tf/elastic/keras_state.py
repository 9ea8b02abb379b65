"""The Keras part of Horovod's elastic API (horovod.tensorflow.keras.elastic): KerasState and the callbacks
that keep it current and commit it during `fit`, for Keras 3 and tf-keras, with the Horovod API or under BytePSStrategy
(docs/elastic.md).

`state.batch` counts the batches of the current epoch done; after a reset, the first epoch runs only the
batches that were left (steps_per_epoch - state.batch), and `fit(epochs=E - state.epoch)` runs the epochs
that were left, so a run resumes from its last commit."""

import tensorflow as tf

from bps_tf.elastic.tensorflow_state import TensorFlowKerasState

_Callback = tf.keras.callbacks.Callback


class KerasState(TensorFlowKerasState):
    """The state of a Keras model and optimizer (by default the model's), plus the Python attributes given as
    keyword arguments (batch=0, epoch=0 for the callbacks below)."""

    def __init__(self, model, optimizer=None, **kwargs):
        super().__init__(model, optimizer=optimizer, backend=tf.keras.backend, **kwargs)

    def reset(self):
        # Under a distribution strategy the train function is traced for a number of replicas (Keras scales
        # each loss by it): the next fit() traces it for the new one.
        if getattr(self.model, "_distribution_strategy", None) is not None or tf.distribute.has_strategy():
            forget_traced_functions(self.model)
        super().reset()


def forget_traced_functions(model):
    """The model traces its train, test and predict functions afresh at the next fit(), evaluate(), predict()."""
    for name in ("train_function", "test_function", "predict_function"):
        if hasattr(model, name):
            setattr(model, name, None)


class CommitStateCallback(_Callback):
    """Commits `state` every `batches_per_commit` batches, at the end of a batch, and at the end of every
    epoch."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs=None):
        # The same on every worker after each reset.
        self.batches_remaining = self.batches_per_commit

    def on_train_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.state.commit()


class UpdateBatchStateCallback(_Callback):
    """Keeps `state.batch` at the number of batches of the current epoch done (0 when an epoch ends). With
    `steps_per_epoch` known, the first epoch after a reset runs only the batches that were left."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.steps_per_epoch = None
        self._done_before = 0  # batches of the current epoch done before this fit() began
        self._stops_after = None  # this fit's batch count at which the shortened epoch ends
        self._stopped = False

    def on_train_begin(self, logs=None):
        self.steps_per_epoch = None
        self._done_before = int(self.state.batch)

    def on_epoch_begin(self, epoch, logs=None):
        steps = self.params.get("steps") if self.params else None
        if steps and self.steps_per_epoch is None:
            self.steps_per_epoch = steps
        self._stops_after = None
        if self.steps_per_epoch and self._done_before > 0:
            self._stops_after = max(1, self.steps_per_epoch - self._done_before)
            self.params["steps"] = self._stops_after

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch = self._done_before + batch + 1
        if self._stops_after is not None and batch + 1 >= self._stops_after:
            # Keras ends an epoch early when asked to stop training; on_epoch_end lets training go on.
            self.model.stop_training = True
            self._stopped = True

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0
        self._done_before = 0
        self._stops_after = None
        if self.steps_per_epoch:
            self.params["steps"] = self.steps_per_epoch
        if self._stopped:
            self.model.stop_training = False
            self._stopped = False


class UpdateEpochStateCallback(_Callback):
    """Keeps `state.epoch` at the number of epochs done, across resets (fit() counts from 0 each time it is
    called: give it `epochs=total - state.epoch`)."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.initial_epoch = self.state.epoch

    def on_train_begin(self, logs=None):
        self.initial_epoch = self.state.epoch

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = self.initial_epoch + epoch + 1

