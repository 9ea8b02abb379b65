"""bps_tf's TensorFlow ops: the op library, push_pull, broadcast, publish and gather of tf.Tensors, their
gradients and their names. The Horovod-compatible API (bps_tf.tensorflow) and BytePSStrategy
(bps_tf.strategy) are both built on this layer, and neither on the other.

Importing it loads the op library built for the installed TensorFlow (`_bps_ops_tf<major>.<minor>.so`) and
checks that TensorFlow (bps_tf.compat).
"""

from bps_tf.ops.compression import Compression
from bps_tf.ops.gather import all_gather, gather_is_smaller, push_pull_slices, row_counts
from bps_tf.ops.collectives import (
    REDUCE_OPS, SUPPORTED_DTYPES, Adasum, Average, Max, Min, Product, Sum, broadcast, check_op, publish, push_pull,
)
from bps_tf.ops.info import build_info, worker_info
from bps_tf.ops.variables import broadcast_variables

__all__ = [
    "Compression", "all_gather", "gather_is_smaller", "push_pull_slices", "row_counts", "REDUCE_OPS",
    "SUPPORTED_DTYPES", "Adasum", "Average", "Max", "Min", "Product", "Sum", "broadcast", "check_op", "publish",
    "push_pull", "build_info", "worker_info", "broadcast_variables",
]
