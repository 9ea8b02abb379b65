"""The Horovod-compatible TensorFlow API of bps_tf (`import bps_tf.tensorflow as bps`, or `import bps_tf`).

Horovod users switch by changing the import: every name of horovod.tensorflow is here with Horovod's
signature and meaning (docs/api.md lists each, and the few that are not offered say so when used).
BytePS's own name for allreduce, push_pull, is here too.
"""

from bps_tf import compat
from bps_tf.communication_metrics import CommunicationMeter
from bps_tf.compression_state import load as load_compression_state
from bps_tf.compression_state import save as save_compression_state
from bps_tf.objects import allgather_object, broadcast_object
from bps_tf.ops import Adasum, Average, Compression, Max, Min, Product, Sum, broadcast, push_pull
from bps_tf.process import is_async, is_initialized, local_rank, local_size, rank, shutdown, size, staleness
from bps_tf.process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set
from bps_tf.tensorflow.basics import (
    barrier, ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled, init, is_homogeneous,
    join, local_rank_op, local_size_op, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built,
    process_set_included_op, rank_op, rocm_built, size_op, start_timeline, stop_timeline,
)
from bps_tf.tensorflow import elastic
from bps_tf.tensorflow.collectives import (
    allgather, allreduce, alltoall, broadcast_, grouped_allgather, grouped_allreduce, grouped_reducescatter,
    reducescatter,
)
from bps_tf.tensorflow.functions import (
    broadcast_global_variables, broadcast_object_fn, broadcast_variables,
)
from bps_tf.tensorflow.gradient_tape import DistributedGradientTape, PartialDistributedGradientTape
from bps_tf.tensorflow.hooks import BroadcastGlobalVariablesHook
from bps_tf.tensorflow.optimizer import DistributedOptimizer
from bps_tf.tensorflow.summaries import write_communication_summaries
from bps_tf.tensorflow.synchronize import synchronize_weights
from bps_tf.tensorflow.not_offered import not_offered

compat.check_part(compat.HOROVOD_API)

__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank", "cross_size", "cross_rank",
    "is_homogeneous", "rank_op", "size_op", "local_rank_op", "local_size_op", "process_set_included_op",
    "mpi_built", "mpi_enabled", "mpi_threads_supported", "gloo_built", "gloo_enabled", "nccl_built", "ddl_built",
    "ccl_built", "cuda_built", "rocm_built", "start_timeline", "stop_timeline", "barrier", "join",
    "ProcessSet", "global_process_set", "add_process_set", "remove_process_set",
    "Average", "Sum", "Min", "Max", "Product", "Adasum", "Compression",
    "push_pull", "allreduce", "grouped_allreduce", "allgather", "grouped_allgather", "broadcast", "broadcast_",
    "alltoall", "reducescatter", "grouped_reducescatter", "broadcast_variables", "broadcast_global_variables",
    "broadcast_object", "broadcast_object_fn", "allgather_object",
    "DistributedOptimizer", "DistributedGradientTape", "PartialDistributedGradientTape",
    "BroadcastGlobalVariablesHook", "SyncBatchNormalization", "save_compression_state", "load_compression_state",
    "elastic", "CommunicationMeter", "write_communication_summaries", "is_async", "staleness",
    "synchronize_weights",
]


def __getattr__(name):
    if name == "SyncBatchNormalization":  # built on first use: it imports Keras
        from bps_tf.tensorflow.sync_batch_norm import sync_batch_normalization_class

        return sync_batch_normalization_class()
    return not_offered(__name__, name)
