"""The Horovod-compatible TensorFlow API of bps_tf (`import bps_tf.tensorflow as bps`, or `import bps_tf`).

Horovod users switch by renaming: hvd.allreduce -> bps.push_pull.
"""

from bps_tf import compat
from bps_tf.ops import Average, Compression, Sum, broadcast, broadcast_object, broadcast_variables, push_pull
from bps_tf.process import init, is_initialized, local_rank, local_size, rank, shutdown, size
from bps_tf.tensorflow.gradient_tape import DistributedGradientTape
from bps_tf.tensorflow.hooks import BroadcastGlobalVariablesHook
from bps_tf.tensorflow.optimizer import DistributedOptimizer

compat.check_part(compat.HOROVOD_API)

__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank",
    "push_pull", "broadcast", "broadcast_variables", "broadcast_object", "Average", "Sum", "Compression",
    "DistributedOptimizer", "DistributedGradientTape", "BroadcastGlobalVariablesHook",
]
