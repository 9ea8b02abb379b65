"""Gradients of two Keras 3 optimizers never share a push_pull name under BytePSStrategy.

A gradient's push_pull is named after its tensor in the traced step, made inside the optimizer's name scope
(`one_step_on_data/adam/AddN:0`, the sum of a worker's local replicas' gradients). Two optimizers of one name in
one process, which Keras 3.12 gives every optimizer of a class by default (Adam: "adam"; later Keras numbers
them: "adam_1"), or a name the user gave twice, would push their gradients under the same names, and the second
optimizer's gradients would carry on the first's compression state (momentum, error feedback, the servers'
residuals) instead of starting afresh. The first optimizer of a name to train in a process keeps its names (so a
checkpoint's compression state finds its tensors again when the job resumes); each later one of that name pushes
its gradients under a name scope of its own. Optimizers are numbered in the order they first train, which the
same program repeats on every worker and in a resumed job.
"""

import collections
import contextlib
import threading
import weakref

import tensorflow as tf

from bps_tf import compat
from bps_tf.process import backup_workers
from bps_tf.strategy.cross_device_ops import gradient_labels

_lock = threading.Lock()
_scopes = weakref.WeakKeyDictionary()  # optimizer -> its name scope for gradients, or None: Keras's own names
_users = {}  # optimizer name -> how many optimizers of that name have trained in this process


def gradient_scope(optimizer):
    """None for the first optimizer of its name to ask in this process, else a scope of its own."""
    with _lock:
        if optimizer not in _scopes:
            name = getattr(optimizer, "name", None) or type(optimizer).__name__
            earlier = _users.get(name, 0)
            _users[name] = earlier + 1
            _scopes[optimizer] = f"{name}_bps{earlier}" if earlier else None
        return _scopes[optimizer]


class GradientBatch(collections.namedtuple("GradientBatch", "optimizer variables signatures sparse")):
    """A batch of gradients named by position: its optimizer, the variables updated, each gradient's
    (dtype, shape), and whether any gradient is sparse."""


_traced = None  # while batches_traced() records: {(optimizer id, variable ids): GradientBatch}


@contextlib.contextmanager
def batches_traced():
    """Yields a dict that collects the batches named by position meanwhile (while a train function is traced;
    the local replicas' threads name the same batch, collected once)."""
    global _traced
    with _lock:
        outer, _traced = _traced, {}
        collected = _traced
    try:
        yield collected
    finally:
        with _lock:
            _traced = outer


def named_for_backup_workers(optimizer, grads_and_vars):
    """With backup workers, the batch of `grads_and_vars` reduced inside is named by the optimizer and the
    positions of the gradients that are not None (Keras reduces those, in the variables' order), so that a
    step that skips its compute pushes under the same names (bps_tf/strategy/stragglers.py); without,
    nothing changes."""
    if backup_workers() == 0:
        return contextlib.nullcontext()
    present = [(g, v) for g, v in grads_and_vars if g is not None]
    batch = GradientBatch(optimizer, [v for _, v in present], [(g.dtype, g.shape) for g, _ in present],
                          any(isinstance(g, tf.IndexedSlices) for g, _ in present))
    with _lock:
        if _traced is not None:
            _traced[(id(optimizer), tuple(id(v) for v in batch.variables))] = batch
    name = gradient_scope(optimizer) or getattr(optimizer, "name", None) or type(optimizer).__name__
    return gradient_labels([f"gradient/{name}/{i}" for i in range(len(present))])


def install(is_bps_strategy):
    """Wraps the Keras 3 optimizer's gradient reduction (after loss_scaling's wrapper, which it calls)."""
    reduce_gradients = compat.target("strategy.TFOptimizer._all_reduce_sum_gradients")

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if not (tf.distribute.has_strategy() and is_bps_strategy(tf.distribute.get_strategy())):
            return reduce_gradients(self, grads_and_vars)
        scope = gradient_scope(self)
        grads_and_vars = list(grads_and_vars)
        with named_for_backup_workers(self, grads_and_vars):
            if scope is None:
                return reduce_gradients(self, grads_and_vars)
            # The push_pulls are named after the tensors they reduce: a replica's gradient, or the sum of the
            # local replicas' made inside the reduction. Both are made in the scope.
            with tf.name_scope(scope):
                renamed = [(g if g is None else tf.identity(g), v) for g, v in grads_and_vars]
                return reduce_gradients(self, renamed)

    compat.replace("strategy.TFOptimizer._all_reduce_sum_gradients", _all_reduce_sum_gradients)
