"""Keras 3 fit under BytePSStrategy with stragglers (docs/strategy.md, "Training with stragglers").

In every mode that lets workers go at their own pace (backup workers, bounded staleness, asynchronous), a
step does not wait for every worker to agree that data remains, as TensorFlow's iterators of a multi-worker
strategy do at each step (a collective the straggler would hold): fit agrees the epoch's length before it
starts.

Backup workers (BYTEPS_BACKUP_WORKERS): a worker behind catches up without computing.

A round of a gradient completes with the first N - b workers' pushes; a later push is dropped and answered
with that round's sum. A worker slower than the others (a persistent straggler) would otherwise compute
every step whose result is already decided, fall further behind each round, and hold the job once it is
more than BYTEPS_BACKUP_WINDOW rounds behind. So when the servers have completed its next rounds for every
gradient already (communication_counters()["rounds_behind"] > 0), Keras 3 `fit` skips the step's forward
and backward passes: it takes the step's batch (every worker's epoch stays the same length), has the
optimizer apply zero gradients, which are pushed as late and answered with the round's sum, and so applies
exactly what the others applied. Metrics are not updated by a skipped step.

The step that skips pushes under the names of the step that computes: with backup workers, an optimizer's
gradients are named by their position among the variables it updates (gradient_labels), not by the tensors
of the traced step, which differ between the two functions.
"""

import contextlib
import threading
import weakref

import tensorflow as tf

import bps_tf.numpy as bps_numpy
from bps_tf import compat
from bps_tf.process import backup_workers, is_async, size
from bps_tf.strategy.cross_device_ops import gradient_labels

_DistributedIterator = compat.target("DistributedIterator")
_lock = threading.Lock()
_updated = weakref.WeakKeyDictionary()  # optimizer -> the variables its latest gradient batch updated
_skipped = 0  # steps this process skipped


def steps_caught_up():
    """How many training steps this process skipped since it started, taking their rounds' sums instead."""
    return _skipped


@contextlib.contextmanager
def gradients_named_by_position(optimizer, name, grads_and_vars):
    """With backup workers, the gradients reduced inside are named `name` and their position among those
    present (Keras reduces the gradients that are not None, in the variables' order)."""
    if backup_workers() == 0:
        yield
        return
    updated = [v for g, v in grads_and_vars if g is not None]
    # Sparse gradients are gathered from every worker, not summed by rounds: a step can't be skipped.
    sparse = any(isinstance(g, tf.IndexedSlices) for g, _ in grads_and_vars)
    with _lock:
        _updated[optimizer] = None if sparse else updated
    with gradient_labels([f"gradient/{name}/{i}" for i in range(len(updated))]):
        yield


def _variables_updated_by(optimizer, model):
    """The model's Keras variables that the optimizer's latest gradient batch updated, in that batch's order,
    or None when they are unknown or not all the model's (then the step computes)."""
    inner = getattr(optimizer, "inner_optimizer", None)
    with _lock:
        updated = _updated.get(optimizer, _updated.get(inner) if inner is not None else None)
    if not updated:
        return None
    # Recorded as Keras variables (a LossScaleOptimizer's) or as their TensorFlow variables.
    by_value = {id(getattr(v, "value", v)): v for v in model.trainable_variables}
    by_value.update({id(v): v for v in model.trainable_variables})
    found = [by_value.get(id(v)) for v in updated]
    return None if any(v is None for v in found) else found


class _CatchingUp:
    """Keras's train function, and in its place, when this worker is behind, a step that skips its compute."""

    def __init__(self, model, train_function):
        self._model = model
        self._train_function = train_function
        self._skip_function = None
        self._logs = None

    def __call__(self, iterator):
        if isinstance(iterator, _DistributedIterator):
            iterator._enable_get_next_as_optional = False  # no agreement that data remains at each step
        variables = self._behind(iterator)
        if variables is not None:
            self._skip(iterator, variables)
            return self._logs
        self._logs = self._train_function(iterator)
        return self._logs

    def _behind(self, iterator):
        """The variables a skipped step updates, when this step can be skipped; else None."""
        # A skipped step returns the logs of the latest step that computed; one Keras call is one step.
        if (backup_workers() == 0 or self._logs is None or self._model.steps_per_execution != 1
                or not isinstance(iterator, _DistributedIterator)
                or bps_numpy.communication_counters()["rounds_behind"] == 0):
            return None
        return _variables_updated_by(self._model.optimizer, self._model)

    def _skip(self, iterator, variables):
        global _skipped
        if self._skip_function is None or self._skip_function[0] != [id(v) for v in variables]:
            self._skip_function = ([id(v) for v in variables], tf.function(lambda it: self._skip_step(it, variables)))
        self._skip_function[1](iterator)
        with _lock:
            _skipped += 1

    def _skip_step(self, iterator, variables):
        iterator.get_next()  # the batch this step would have trained on

        def apply_zeros():
            self._model.optimizer.apply([tf.zeros(v.shape, v.dtype) for v in variables], variables)

        self._model.distribute_strategy.run(apply_zeros)


def install(is_bps_strategy):
    """Keras 3's train function of a model under a multi-worker BytePSStrategy, in a mode with stragglers,
    goes without the per-step data agreement and, with backup workers, catches up when behind."""
    local_make = compat.target("TensorFlowTrainer.make_train_function")

    def make_train_function(self, force=False):
        made = local_make(self, force)
        function = self.train_function
        if ((backup_workers() > 0 or is_async()) and size() > 1 and function is not None
                and not isinstance(function, _CatchingUp)
                and is_bps_strategy(getattr(self, "_distribute_strategy", None))):
            self.train_function = _CatchingUp(self, function)
            return self.train_function if made is not None else None
        return made

    compat.replace("TensorFlowTrainer.make_train_function", make_train_function)
