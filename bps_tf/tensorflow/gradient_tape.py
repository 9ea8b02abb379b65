"""DistributedGradientTape: a GradientTape whose gradients are averaged (or summed) across workers."""

import tensorflow as tf

from bps_tf.ops import Average, Compression
from bps_tf.tensorflow.gradients import push_pull_gradients


class _DistributedGradientTape:
    """Wraps a tf.GradientTape; everything but gradient() is the wrapped tape's."""

    def __init__(self, tape, compression, op, name, sparse_as_dense):
        self._tape = tape
        self._sparse_as_dense = sparse_as_dense
        self._compression = compression
        self._op = op
        self._name = name

    def gradient(self, target, sources, output_gradients=None, **kwargs):
        gradients = self._tape.gradient(target, sources, output_gradients=output_gradients, **kwargs)
        flat_sources = tf.nest.flatten(sources)
        flat_gradients = tf.nest.flatten(gradients, expand_composites=False)
        reduced = push_pull_gradients(flat_gradients, flat_sources, self._name, self._compression, self._op,
                                      self._sparse_as_dense)
        return tf.nest.pack_sequence_as(gradients, reduced)

    def __getattr__(self, attribute):
        return getattr(self._tape, attribute)

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, *exc):
        return self._tape.__exit__(*exc)


def DistributedGradientTape(gradtape, device_dense="", device_sparse="", compression=Compression.none,
                            sparse_as_dense=False, op=Average, name="tape"):
    """Wraps `gradtape` so that gradient() returns gradients reduced across workers (Horovod's signature;
    device arguments are accepted for compatibility). Sparse gradients (IndexedSlices) are gathered as rows
    unless `sparse_as_dense` or the dense tensor is smaller."""
    del device_dense, device_sparse
    return _DistributedGradientTape(gradtape, compression, op, name, sparse_as_dense)
