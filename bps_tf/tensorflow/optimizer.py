"""DistributedOptimizer: wraps a Keras 3, tf-keras or tf.compat.v1 optimizer so that gradients are averaged
(or summed) across workers before they are applied.

The Keras optimizers are wrapped in place (the object keeps its class, so models that hold it still save
and load); the tf.compat.v1 optimizer is wrapped by a delegating subclass, as v1 code expects.
"""

import types

import tensorflow as tf

from bps_tf import compat, process
from bps_tf.ops import Average, Compression
from bps_tf.ops.variable_keys import variable_key
from bps_tf.process_sets import global_process_set
from bps_tf.tensorflow.accumulation import LocalAccumulator
from bps_tf.tensorflow.async_optimizer import check_async_arguments, wrap_keras2_async, wrap_keras3_async
from bps_tf.tensorflow.gradients import GradientReduction, push_pull_gradients


def _is_keras3(optimizer):
    if compat.installed_version("keras") is None:
        return False
    import keras

    return isinstance(optimizer, keras.optimizers.Optimizer)


def _is_keras2(optimizer):
    if compat.installed_version("tf_keras") is None:
        return False
    keras2 = compat.keras2()
    return isinstance(optimizer, (keras2.optimizers.Optimizer, keras2.optimizers.legacy.Optimizer))


def _add_local_variable_registry(optimizer, local_variables):
    def register_local_var(self, variable):
        """Keeps `variable`'s gradient local: it is not reduced across workers (divided by their number when
        scale_local_gradients)."""
        local_variables.add(variable_key(variable))

    optimizer.register_local_var = types.MethodType(register_local_var, optimizer)


def _wrap_keras3(optimizer, reduce, backward_passes_per_step, average_aggregated_gradients):
    import keras

    compat.check(compat.HOROVOD_API, "keras")
    if getattr(optimizer, "_bps_wrapped", False):
        raise ValueError("this optimizer is already a DistributedOptimizer")
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        if backward_passes_per_step > 1:
            raise ValueError("backward_passes_per_step > 1 is not supported with a LossScaleOptimizer")
        # Reduce the scaled gradients before the finiteness check, so every worker takes the same decision
        # (skip or apply) and nobody waits for a push_pull another worker skipped.
        original_apply = optimizer.apply

        def apply(self, grads, trainable_variables=None):
            # Without variables, Keras applies the gradients to those the optimizer was built with.
            variables = self._trainable_variables if trainable_variables is None else trainable_variables
            return original_apply(reduce(list(grads), list(variables)), trainable_variables)

        optimizer.apply = types.MethodType(apply, optimizer)
    else:
        if backward_passes_per_step > 1:
            if optimizer.built:
                raise ValueError("wrap the optimizer before training when backward_passes_per_step > 1")
            optimizer.gradient_accumulation_steps = backward_passes_per_step
        # Keras averages accumulated gradients; Horovod's default sums them.
        accumulated_scale = 1 if average_aggregated_gradients else backward_passes_per_step
        # Keras calls this on update steps only (after its own gradient accumulation), where tf.distribute
        # would all-reduce: gradients are clipped per worker before averaging, as under tf.distribute.
        original_reduce = optimizer._all_reduce_sum_gradients

        def _all_reduce_sum_gradients(self, grads_and_vars):
            grads_and_vars = list(original_reduce(grads_and_vars))
            grads = reduce([g for g, _ in grads_and_vars], [v for _, v in grads_and_vars])
            if accumulated_scale != 1:
                grads = [None if g is None else g * accumulated_scale for g in grads]
            return list(zip(grads, [v for _, v in grads_and_vars]))

        optimizer._all_reduce_sum_gradients = types.MethodType(_all_reduce_sum_gradients, optimizer)
    optimizer._bps_wrapped = True
    return optimizer


def _wrap_keras2(optimizer, reduce, backward_passes_per_step, average_aggregated_gradients):
    compat.check(compat.HOROVOD_API, "tf_keras")
    if getattr(optimizer, "_bps_wrapped", False):
        raise ValueError("this optimizer is already a DistributedOptimizer")
    original_apply = optimizer.apply_gradients
    accumulator = LocalAccumulator(backward_passes_per_step, average_aggregated_gradients)

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        grads_and_vars = list(grads_and_vars)
        variables = [v for _, v in grads_and_vars]

        def reduce_and_apply(grads):
            return original_apply(list(zip(reduce(grads, variables), variables)), *args, **kwargs)

        return accumulator.run([g for g, _ in grads_and_vars], reduce_and_apply,
                               prepare=lambda: _build_keras2(self, variables))

    optimizer.apply_gradients = types.MethodType(apply_gradients, optimizer)
    optimizer._bps_wrapped = True
    return optimizer


def _build_keras2(optimizer, variables):
    """Creates the optimizer's slots now: later they would be created inside a conditional branch."""
    if hasattr(optimizer, "_create_all_weights"):  # tf-keras legacy optimizers
        optimizer._create_all_weights(variables)
    else:
        optimizer.build(variables)


class _DistributedOptimizerV1(tf.compat.v1.train.Optimizer):
    """A tf.compat.v1 optimizer whose compute_gradients() returns gradients reduced across workers."""

    def __init__(self, optimizer, reduce, backward_passes_per_step, average_aggregated_gradients, name):
        super().__init__(use_locking=False, name=name)
        self._optimizer = optimizer
        self._reduce = reduce
        self._accumulator = LocalAccumulator(backward_passes_per_step, average_aggregated_gradients)
        self._variables = None

    def compute_gradients(self, *args, **kwargs):
        grads_and_vars = self._optimizer.compute_gradients(*args, **kwargs)
        self._variables = [v for _, v in grads_and_vars]
        if self._accumulator.steps > 1:
            return grads_and_vars  # reduced in apply_gradients, once per accumulated step
        grads = self._reduce([g for g, _ in grads_and_vars], self._variables)
        return list(zip(grads, self._variables))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        if self._accumulator.steps == 1:
            return self._optimizer.apply_gradients(grads_and_vars, global_step=global_step, name=name)
        grads_and_vars = list(grads_and_vars)
        variables = [v for _, v in grads_and_vars]

        def reduce_and_apply(grads):
            return self._optimizer.apply_gradients(list(zip(self._reduce(grads, variables), variables)),
                                                   global_step=global_step, name=name)

        return self._accumulator.run([g for g, _ in grads_and_vars], reduce_and_apply,
                                     prepare=lambda: self._optimizer._create_slots(variables))

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs) + self._accumulator.variables()


def _check_groups(num_groups, groups):
    if not isinstance(num_groups, int) or num_groups < 0:
        raise ValueError(f"num_groups must be an integer >= 0, got {num_groups!r}")
    if groups is not None and not (isinstance(groups, int) and groups >= 0) and not (
            isinstance(groups, (list, tuple)) and all(isinstance(g, (list, tuple)) for g in groups)):
        raise ValueError("groups must be an integer >= 0 or a list of lists of variables")


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False, backward_passes_per_step=1,
                         op=Average, gradient_predivide_factor=1.0, average_aggregated_gradients=False,
                         num_groups=0, groups=None, process_set=global_process_set, scale_local_gradients=True):
    """Wraps `optimizer` so that gradients are reduced across workers (Horovod's signature and defaults).

    backward_passes_per_step > 1 sums (average_aggregated_gradients: averages) that many local gradients
    before one exchange and one update. Sparse gradients (IndexedSlices) are gathered as rows unless
    `sparse_as_dense` or the dense tensor is smaller; gradients accumulated over several backward passes are
    dense. `gradient_predivide_factor` f: gradients are divided by f before the sum and the sum by
    size/f (op=Average). `process_set`: reduce among its members only. The optimizer's register_local_var()
    keeps a variable's gradient local (divided by the number of workers when `scale_local_gradients`).
    `num_groups` and `groups` are accepted: every gradient of a step is already in flight together.
    """
    del use_locking, device_dense, device_sparse
    if backward_passes_per_step < 1:
        raise ValueError(f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
    _check_groups(num_groups, groups)
    if process.is_async():
        return _async_optimizer(optimizer, name or "DistributedOptimizer", compression, process_set)
    reduction = GradientReduction(scope=name or "DistributedOptimizer", compression=compression, op=op,
                                  sparse_as_dense=sparse_as_dense, process_set=process_set,
                                  gradient_predivide_factor=gradient_predivide_factor,
                                  scale_local_gradients=scale_local_gradients)
    local_variables = set()

    def reduce(grads, variables):
        return push_pull_gradients(grads, variables, reduction, local_variables)

    if _is_keras3(optimizer):
        wrapped = _wrap_keras3(optimizer, reduce, backward_passes_per_step, average_aggregated_gradients)
    elif _is_keras2(optimizer):
        wrapped = _wrap_keras2(optimizer, reduce, backward_passes_per_step, average_aggregated_gradients)
    elif isinstance(optimizer, tf.compat.v1.train.Optimizer):
        wrapped = _DistributedOptimizerV1(optimizer, reduce, backward_passes_per_step, average_aggregated_gradients,
                                          reduction.scope)
    else:
        raise ValueError(
            f"DistributedOptimizer: unsupported optimizer {type(optimizer).__name__}; expected a Keras 3, tf-keras "
            "or tf.compat.v1.train optimizer"
        )
    _add_local_variable_registry(wrapped, local_variables)
    return wrapped


def _async_optimizer(optimizer, scope, compression, process_set):
    """Asynchronous training: the optimizer steps locally and its changes go to the servers."""
    check_async_arguments(compression, process_set, "DistributedOptimizer")
    if _is_keras3(optimizer):
        return wrap_keras3_async(optimizer, scope)
    if _is_keras2(optimizer):
        return wrap_keras2_async(optimizer, scope)
    raise ValueError(f"DistributedOptimizer: asynchronous training is offered for Keras 3 and tf-keras optimizers, "
                     f"not {type(optimizer).__name__}; run tf.compat.v1 optimizers synchronously (unset "
                     "BYTEPS_ENABLE_ASYNC and BYTEPS_STALENESS)")
