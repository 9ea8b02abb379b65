"""DistributedOptimizer in asynchronous training (BYTEPS_ENABLE_ASYNC, BYTEPS_STALENESS): gradients stay on
their worker; the optimizer applies them locally, then the change of every variable goes to the servers and
the servers' weights come back (bps_tf/ops/async_weights.py)."""

import types

from bps_tf import compat
from bps_tf.ops.async_weights import WeightSync, check_async_compression
from bps_tf.process_sets import global_process_set


def check_async_arguments(compression, process_set, what):
    check_async_compression(compression, what)
    if process_set is not None and process_set is not global_process_set:
        raise ValueError(f"{what}: process sets are not offered with asynchronous training: every worker "
                         "trains the one model the servers hold")


_auto_jit_resolved = []


def _keep_async_steps_off_xla():
    """Keras 3's jit_compile="auto" compiles fit's step with XLA on a GPU, where the weights cannot travel
    (bps_tf/ops/async_weights.py): a model whose optimizer pushes asynchronously resolves "auto" to False."""
    if _auto_jit_resolved:
        return
    local_resolve = compat.target("Trainer._resolve_auto_jit_compile")

    def _resolve_auto_jit_compile(self):
        if getattr(getattr(self, "optimizer", None), "_bps_async", False):
            return False
        return local_resolve(self)

    compat.replace("Trainer._resolve_auto_jit_compile", _resolve_auto_jit_compile)
    _auto_jit_resolved.append(True)


def wrap_keras3_async(optimizer, scope):
    """Keras 3: every apply() (also apply_gradients(), and a LossScaleOptimizer's) pushes its changes."""
    if getattr(optimizer, "_bps_wrapped", False):
        raise ValueError("this optimizer is already a DistributedOptimizer")
    _keep_async_steps_off_xla()
    sync = WeightSync(scope)
    original_apply = optimizer.apply

    def apply(self, grads, trainable_variables=None):
        variables = self._trainable_variables if trainable_variables is None else trainable_variables
        return sync.step(variables, lambda: original_apply(grads, trainable_variables))

    optimizer.apply = types.MethodType(apply, optimizer)
    optimizer._bps_wrapped = optimizer._bps_async = True
    return optimizer


def wrap_keras2_async(optimizer, scope):
    """tf-keras: every apply_gradients() pushes its changes."""
    if getattr(optimizer, "_bps_wrapped", False):
        raise ValueError("this optimizer is already a DistributedOptimizer")
    sync = WeightSync(scope)
    original_apply = optimizer.apply_gradients

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        grads_and_vars = list(grads_and_vars)
        return sync.step([v for _, v in grads_and_vars], lambda: original_apply(grads_and_vars, *args, **kwargs))

    optimizer.apply_gradients = types.MethodType(apply_gradients, optimizer)
    optimizer._bps_wrapped = True
    return optimizer
