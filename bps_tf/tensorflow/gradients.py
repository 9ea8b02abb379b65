"""Reducing a list of gradients across workers: named after their variables, prioritised so that layers
nearer the input (listed first) go first, and all in flight together. Gradients of worker-local variables
(register_local_var, PartialDistributedGradientTape) stay local."""

import dataclasses

import tensorflow as tf

from bps_tf import process_sets
from bps_tf.ops import Average, Compression, Sum, check_op, gather_is_smaller, push_pull, push_pull_slices
from bps_tf.ops.batched import compiling, push_pull_batch
from bps_tf.ops.compression import wire_codec
from bps_tf.ops.together import in_one_function
from bps_tf.ops.variable_keys import variable_key


@dataclasses.dataclass(frozen=True)
class GradientReduction:
    """How DistributedOptimizer and DistributedGradientTape reduce gradients (Horovod's arguments)."""

    scope: str
    compression: type = Compression.none
    op: str = Average
    sparse_as_dense: bool = False
    process_set: object = None
    # The sum is taken of gradients divided by this factor and multiplied by it afterwards (op=Average).
    gradient_predivide_factor: float = 1.0
    # Gradients of local variables are divided by the number of workers, as the reduced ones are averaged.
    scale_local_gradients: bool = True

    def __post_init__(self):
        check_op(self.op, self.scope)
        if self.gradient_predivide_factor != 1.0 and self.op != Average:
            raise ValueError("gradient_predivide_factor needs op=bps.Average")
        if self.gradient_predivide_factor <= 0:
            raise ValueError(f"gradient_predivide_factor must be > 0, got {self.gradient_predivide_factor}")


def _variable_label(variable, index):
    label = getattr(variable, "path", None) or getattr(variable, "name", None) or "tensor"
    return f"{index}.{label}"


def _reduce_one(gradient, name, reduction, priority):
    if gradient is None:
        return None
    if isinstance(gradient, tf.IndexedSlices):
        return push_pull_slices([gradient], name, reduction.op, priority, process_set=reduction.process_set)
    factor = reduction.gradient_predivide_factor
    return push_pull(gradient, name=name, op=reduction.op, compression=reduction.compression, priority=priority,
                     prescale_factor=1.0 / factor, postscale_factor=factor, process_set=reduction.process_set,
                     backups=True)


def _reduce_all(gradients, names, reduction):
    count = len(gradients)
    if _batched(gradients, reduction):
        # Inside XLA: one batch, every sum started before any is waited for (bps_tf/ops/batched.py).
        factor = reduction.gradient_predivide_factor
        summed = push_pull_batch([g / factor if factor != 1.0 else g for g in gradients], names,
                                 range(count, 0, -1), reduction.compression)
        if reduction.op == Average:
            factor = factor / process_sets.set_size(reduction.process_set)
        return [s * tf.cast(factor, s.dtype) if factor != 1.0 else s for s in summed]
    return [_reduce_one(g, n, reduction, count - i) for i, (g, n) in enumerate(zip(gradients, names))]


def _batched(gradients, reduction):
    codec = wire_codec(reduction.compression)
    return (compiling() and reduction.op in (Average, Sum) and reduction.process_set is None
            and all(g.dtype.is_floating and (codec is None or not codec.applies_to(g)) for g in gradients))


def _prepared(gradient, sparse_as_dense):
    """Sparse gradients stay sparse (their rows are gathered) unless densifying them sends fewer bytes, or
    inside XLA, which has no lowering for the gather."""
    if gradient is None:
        return None
    if isinstance(gradient, tf.IndexedSlices) and not sparse_as_dense and not compiling() and \
            gather_is_smaller([gradient]):
        return gradient
    return tf.convert_to_tensor(gradient)


def _scaled_local(gradient, reduction):
    if gradient is None or not reduction.scale_local_gradients:
        return gradient
    count = process_sets.set_size(reduction.process_set)
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(gradient.values / count, gradient.indices, gradient.dense_shape)
    return gradient / count


def push_pull_gradients(gradients, variables, reduction, local_variables=()):
    """push_pull of each gradient (None stays None), named `scope/<index>.<variable>`; the gradients of
    `local_variables` (variable_key()s) are not reduced."""
    local = set(local_variables)
    is_local = [variable_key(v) in local for v in variables]
    names = [f"{reduction.scope}/{_variable_label(v, i)}" for i, v in enumerate(variables)]
    shared = [i for i, g in enumerate(gradients) if g is not None and not is_local[i]]
    prepared = [_prepared(gradients[i], reduction.sparse_as_dense) for i in shared]
    key = ("gradients", tuple(names[i] for i in shared), reduction)
    reduced = in_one_function(key, lambda gs: _reduce_all(gs, list(key[1]), reduction), prepared)
    result = [_scaled_local(g, reduction) if is_local[i] else g for i, g in enumerate(gradients)]
    for i, value in zip(shared, reduced):
        result[i] = value
    return result
