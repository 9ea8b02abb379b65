"""Keras 3 fit under BytePSStrategy with stragglers (docs/strategy.md, "Training with stragglers").

In every mode that lets workers go at their own pace (backup workers, bounded staleness, asynchronous), a
step does not wait for every worker to agree that data remains, as TensorFlow's iterators of a multi-worker
strategy do at each step (a collective the straggler would hold): fit agrees the epoch's length before it
starts. (With steps_per_execution above 1 Keras asks for an optional batch, whose check TensorFlow always
makes: each execution still waits for every worker.)

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
gradients are named by their position among the variables it updates (gradient_names), not by the tensors
of the traced step, which differ between the two functions, and the zeros have the gradients' dtypes and
shapes. A step is skipped only when its trace reduced one batch of dense gradients, of the model's
optimizer (a custom train_step with two optimizers computes every step).
"""

import threading

import tensorflow as tf

import bps_tf.numpy as bps_numpy
from bps_tf import compat
from bps_tf.process import backup_workers, is_async, size
from bps_tf.strategy import gradient_names

_DistributedIterator = compat.target("DistributedIterator")
_lock = threading.Lock()
_skipped = 0  # steps this process skipped


def steps_caught_up():
    """How many training steps this process skipped since it started, taking their rounds' sums instead."""
    return _skipped


def _skippable(batches, model):
    """The batch a skipped step pushes zeros for, with the model's Keras variables in its order, when the
    step's trace reduced exactly one batch of dense gradients of the model's optimizer; else None."""
    if len(batches) != 1:
        return None
    batch = batches[0]
    optimizer = model.optimizer
    if (batch.sparse or batch.optimizer not in (optimizer, getattr(optimizer, "inner_optimizer", None))
            or not all(shape.is_fully_defined() for _, shape in batch.signatures)):
        return None
    # Recorded as Keras variables (a LossScaleOptimizer's) or as their TensorFlow variables.
    by_id = {id(getattr(v, "value", v)): v for v in model.trainable_variables}
    by_id.update({id(v): v for v in model.trainable_variables})
    found = [by_id.get(id(v)) for v in batch.variables]
    return None if any(v is None for v in found) else (found, batch.signatures)


class _CatchingUp:
    """Keras's train function, and in its place, when this worker is behind, a step that skips its compute."""

    def __init__(self, model, train_function):
        self._model = model
        self._train_function = train_function
        self._skip_function = None
        self._batches = []  # the gradient batches of the latest trace of the train function
        self._logs = None

    def __call__(self, iterator):
        if isinstance(iterator, _DistributedIterator):
            iterator._enable_get_next_as_optional = False  # no agreement that data remains at each step
        skippable = self._behind(iterator)
        if skippable is not None:
            self._skip(iterator, *skippable)
            return self._logs
        with gradient_names.batches_traced() as traced:
            self._logs = self._train_function(iterator)
        if traced:  # traced (again) by this call
            self._batches = list(traced.values())
        return self._logs

    def _behind(self, iterator):
        """What a skipped step updates, when this step can be skipped; else None."""
        # A skipped step returns the logs of the latest step that computed; one Keras call is one step.
        if (backup_workers() == 0 or self._logs is None or self._model.steps_per_execution != 1
                or not isinstance(iterator, _DistributedIterator)
                or bps_numpy.communication_counters()["rounds_behind"] == 0):
            return None
        return _skippable(self._batches, self._model)

    def _skip(self, iterator, variables, signatures):
        global _skipped
        key = [id(v) for v in variables]
        if self._skip_function is None or self._skip_function[0] != key:
            self._skip_function = (key, tf.function(lambda it: self._skip_step(it, variables, signatures)))
        self._skip_function[1](iterator)
        with _lock:
            _skipped += 1

    def _skip_step(self, iterator, variables, signatures):
        iterator.get_next()  # the batch this step would have trained on

        def apply_zeros():
            self._model.optimizer.apply([tf.zeros(shape, dtype) for dtype, shape in signatures], variables)

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
