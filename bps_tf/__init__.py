"""bps_tf: BytePS-style distributed training for TensorFlow.

`import bps_tf as bps` gives the Horovod-compatible TensorFlow API (bps.init, bps.push_pull,
bps.DistributedOptimizer, ...) and `bps_tf.BytePSStrategy`. Importing the package itself is cheap: the
launcher, the servers and the scheduler import it and must not load TensorFlow, so the public names are
resolved on first use.
"""

__version__ = "0.1.0"

# bps_tf.tensorflow.__all__ (a unit test keeps the two equal).
_TENSORFLOW_NAMES = (
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
)
_STRATEGY_NAMES = ("BytePSStrategy",)


def __getattr__(name):
    if name == "elastic":  # a subpackage, with the names of bps_tf.tensorflow.elastic
        import importlib

        return importlib.import_module("bps_tf.elastic")
    if name in _TENSORFLOW_NAMES:
        from bps_tf import tensorflow

        return getattr(tensorflow, name)
    if name in _STRATEGY_NAMES:
        from bps_tf import strategy

        return getattr(strategy, name)
    raise AttributeError(f"module 'bps_tf' has no attribute '{name}'")


def __dir__():
    return sorted(list(globals()) + list(_TENSORFLOW_NAMES) + list(_STRATEGY_NAMES))
