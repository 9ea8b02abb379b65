"""BytePSStrategy: tf.distribute.MirroredStrategy across processes and machines, with gradients summed
through bps_tf's parameter servers."""

import tensorflow as tf

from bps_tf.elastic import generations
from bps_tf.ops.compression import from_environment as compression_from_environment
from bps_tf.ops.compression import parse as parse_compression
from bps_tf.ops.async_weights import check_async_compression
from bps_tf.process import init, is_async, is_initialized, local_rank, local_size
from bps_tf.strategy import keras_integration
from bps_tf.strategy.extended import BytePSExtended


def _local_devices():
    """All GPUs, else every logical CPU device (one unless configured otherwise). With one process per GPU
    (bpslaunch --local-size N), the GPU of this process's local rank."""
    if local_size() > 1 and tf.config.list_physical_devices("GPU"):
        return [_own_gpu()]
    gpus = tf.config.list_logical_devices("GPU")
    return [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]


def _own_gpu():
    """The GPU of this process's local rank, made the only one TensorFlow uses when it is not initialised
    yet (else TensorFlow would take memory on every GPU of the machine in every process)."""
    physical = tf.config.list_physical_devices("GPU")
    mine = physical[local_rank() % len(physical)]
    try:
        tf.config.set_visible_devices([mine], "GPU")
        return tf.config.list_logical_devices("GPU")[0].name
    except RuntimeError:  # TensorFlow already runs on every GPU: pick ours among them
        return tf.config.list_logical_devices("GPU")[local_rank() % len(physical)].name


class BytePSStrategy(tf.distribute.MirroredStrategy):
    """`with BytePSStrategy().scope():` then Keras fit/evaluate/predict or `strategy.run` loops, as with
    MirroredStrategy, but across every worker of the job (started by bpslaunch).

    devices: this process's devices (default: all GPUs, else the CPU; several logical CPU devices work; with
    one process per GPU, bpslaunch --local-size N, the GPU of the process's local rank).
    num_replicas_in_sync is the global replica count: local devices x worker processes.
    compression: how gradients travel (bps_tf.Compression: none, fp16, onebit, topk(ratio), randomk(ratio),
    or its spelling as in BYTEPS_COMPRESSION, e.g. "onebit,momentum=0.9"); default BYTEPS_COMPRESSION (none
    when unset). Only gradient batches are compressed, never metrics.
    """

    def __init__(self, devices=None, compression=None):
        if not is_initialized():
            init()
        devices = list(devices) if devices else _local_devices()
        if compression is None:
            compression = compression_from_environment()
        elif isinstance(compression, str):
            compression = parse_compression(compression)
        if is_async():
            check_async_compression(compression, "BytePSStrategy")
        extended = BytePSExtended(self, devices, compression)
        # Skip MirroredStrategy.__init__ (it would build its own extended); keep its base class's.
        super(tf.distribute.MirroredStrategy, self).__init__(extended)
        keras_integration.install()
        generations.on_reset(extended.follow_job)
