"""DistributedGradientTape: a GradientTape whose gradients are averaged (or otherwise reduced) across workers;
PartialDistributedGradientTape keeps the gradients of chosen layers local. In asynchronous training the
gradients stay local and each gradient() pushes the last step's changes instead (bps_tf/ops/pending_changes.py)."""

import tensorflow as tf

from bps_tf import process
from bps_tf.ops import Average, Compression
from bps_tf.ops.pending_changes import push_changes
from bps_tf.ops.variable_keys import held_variable, variable_key
from bps_tf.process_sets import global_process_set
from bps_tf.tensorflow.async_optimizer import check_async_arguments
from bps_tf.tensorflow.gradients import GradientReduction, push_pull_gradients


class _DistributedGradientTape:
    """Wraps a tf.GradientTape; everything but gradient() is the wrapped tape's. Without a `reduction`
    (asynchronous training), gradient() pushes the sources' changes since the last one."""

    def __init__(self, tape, reduction, local_variables):
        self._tape = tape
        self._reduction = reduction
        self._local_variables = set(local_variables)

    def register_local_source(self, source):
        """Keeps `source`'s gradient local: it is not reduced across workers."""
        self._local_variables.add(variable_key(source))

    def gradient(self, target, sources, output_gradients=None, **kwargs):
        gradients = self._tape.gradient(target, sources, output_gradients=output_gradients, **kwargs)
        flat_sources = tf.nest.flatten(sources)
        if self._reduction is None:
            shared = [s for s in flat_sources if isinstance(held_variable(s), tf.Variable)
                      and variable_key(s) not in self._local_variables]
            computed = [g for g in tf.nest.flatten(gradients, expand_composites=True) if g is not None]
            push_changes(shared, after=computed)
            return gradients
        flat_gradients = tf.nest.flatten(gradients, expand_composites=False)
        reduced = push_pull_gradients(flat_gradients, flat_sources, self._reduction, self._local_variables)
        return tf.nest.pack_sequence_as(gradients, reduced)

    def __getattr__(self, attribute):
        return getattr(self._tape, attribute)

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, *exc):
        return self._tape.__exit__(*exc)


def DistributedGradientTape(gradtape, device_dense="", device_sparse="", compression=Compression.none,
                            sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0, num_groups=0,
                            groups=None, process_set=global_process_set, scale_local_gradients=True, name="tape"):
    """Wraps `gradtape` so that gradient() returns gradients reduced across workers (Horovod's signature;
    device arguments are accepted for compatibility, `num_groups` and `groups` too: every gradient is in
    flight together). Sparse gradients (IndexedSlices) are gathered as rows unless `sparse_as_dense` or the
    dense tensor is smaller. register_local_source() keeps a source's gradient local. In asynchronous
    training (BYTEPS_ENABLE_ASYNC, BYTEPS_STALENESS) nothing is reduced: gradient() returns this worker's
    gradients and pushes its sources' changes since they last took the servers' weights."""
    del device_dense, device_sparse, num_groups, groups
    if process.is_async():
        check_async_arguments(compression, process_set, "DistributedGradientTape")
        return _DistributedGradientTape(gradtape, None, ())
    reduction = GradientReduction(scope=name, compression=compression, op=op, sparse_as_dense=sparse_as_dense,
                                  process_set=process_set, gradient_predivide_factor=gradient_predivide_factor,
                                  scale_local_gradients=scale_local_gradients)
    return _DistributedGradientTape(gradtape, reduction, ())


def PartialDistributedGradientTape(gradtape, device_dense="", device_sparse="", compression=Compression.none,
                                   sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=global_process_set, local_layers=None,
                                   scale_local_gradients=True, name="tape"):
    """DistributedGradientTape whose `local_layers` (a Keras layer or a list of them) keep their gradients
    local: not reduced, and divided by the number of workers when `scale_local_gradients`."""
    if local_layers is None:
        local_layers = []
    elif not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    if not all(hasattr(layer, "trainable_weights") for layer in local_layers):
        raise ValueError("local_layers must be a Keras layer or a list of Keras layers")
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression, sparse_as_dense, op,
                                   gradient_predivide_factor, num_groups, groups, process_set, scale_local_gradients,
                                   name)
    for layer in local_layers:
        for variable in layer.trainable_weights:
            tape.register_local_source(variable)
    return tape
