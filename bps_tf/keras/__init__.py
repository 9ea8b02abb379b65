"""bps_tf's Keras module, like horovod.tensorflow.keras: the job's functions, collectives on
tensor-compatible values, DistributedOptimizer, load_model, and the callbacks (bps_tf.keras.callbacks).
Works with Keras 3 and with tf-keras (TF_USE_LEGACY_KERAS=1), as tf.keras resolves.
"""

from bps_tf.keras import callbacks, elastic
from bps_tf.keras.functions import allgather, allreduce, broadcast, broadcast_global_variables, load_model, reducescatter
from bps_tf.ops import Average, Compression, Sum, broadcast_variables
from bps_tf.process import is_async, is_initialized, local_rank, local_size, rank, shutdown, size, staleness
from bps_tf.process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set
from bps_tf.tensorflow import (
    DistributedOptimizer, barrier, ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled, init,
    join, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, rocm_built, start_timeline, stop_timeline,
    synchronize_weights,
)
from bps_tf.tensorflow.not_offered import not_offered

__all__ = [
    "callbacks", "init", "shutdown", "is_initialized", "start_timeline", "stop_timeline", "size", "local_size",
    "cross_size", "rank", "local_rank", "cross_rank", "mpi_threads_supported", "mpi_enabled", "mpi_built",
    "gloo_enabled", "gloo_built", "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built",
    "ProcessSet", "global_process_set", "add_process_set", "remove_process_set", "Average", "Sum", "Compression",
    "DistributedOptimizer", "broadcast_global_variables", "broadcast_variables", "allreduce", "allgather",
    "broadcast", "reducescatter", "load_model", "SyncBatchNormalization", "barrier", "join", "elastic",
    "is_async", "staleness", "synchronize_weights",
]


def __getattr__(name):
    if name == "SyncBatchNormalization":
        from bps_tf.tensorflow.sync_batch_norm import sync_batch_normalization_class

        return sync_batch_normalization_class()
    return not_offered(__name__, name)
