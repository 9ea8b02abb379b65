"""The op library `_bps_ops.so`, loaded once, and the one TensorFlow-global setting bps_tf makes."""

import os

import tensorflow as tf

from bps_tf import compat

compat.check_part(compat.OPS)

_LIBRARY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_bps_ops.so")
if not os.path.exists(_LIBRARY):
    raise ImportError(f"{_LIBRARY} is missing: build bps_tf first (`make build`, see README.md)")
ops = tf.load_op_library(_LIBRARY)

OP_TYPES = frozenset({"BytepsPushPull", "BytepsGather", "BytepsBroadcast", "BytepsPublish"})

# tf.function runs stateful ops in program order unless they are known to be order-insensitive, as TF's own
# collectives are. Ours must not wait for one another: their overlap is the point.
if not OP_TYPES <= compat.target("ASYNC_STATEFUL_OPS"):
    compat.replace("ASYNC_STATEFUL_OPS", compat.target("ASYNC_STATEFUL_OPS") | OP_TYPES)
