"""bps_tf: BytePS-style distributed training for TensorFlow.

`import bps_tf as bps` gives the Horovod-compatible TensorFlow API (bps.init, bps.push_pull,
bps.DistributedOptimizer, ...) and `bps_tf.BytePSStrategy`. Importing the package itself is cheap: the
launcher, the servers and the scheduler import it and must not load TensorFlow, so the public names are
resolved on first use.
"""

__version__ = "0.1.0"

_TENSORFLOW_NAMES = (
    "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank",
    "push_pull", "broadcast", "broadcast_variables", "broadcast_object", "Average", "Sum", "Compression",
    "DistributedOptimizer", "DistributedGradientTape", "BroadcastGlobalVariablesHook",
)
_STRATEGY_NAMES = ("BytePSStrategy",)


def __getattr__(name):
    if name in _TENSORFLOW_NAMES:
        from bps_tf import tensorflow

        return getattr(tensorflow, name)
    if name in _STRATEGY_NAMES:
        from bps_tf import strategy

        return getattr(strategy, name)
    raise AttributeError(f"module 'bps_tf' has no attribute '{name}'")


def __dir__():
    return sorted(list(globals()) + list(_TENSORFLOW_NAMES) + list(_STRATEGY_NAMES))
