"""The op library built for the installed TensorFlow line (`_bps_ops_tf<major>.<minor>.so`), loaded once,
the environment TensorFlow starts with (tf_environment), and the one TensorFlow-global setting bps_tf
makes."""

import glob
import os
import sys

from bps_tf import compat, tf_environment

tf_environment.apply(os.environ)  # before TensorFlow's first op creates its CPU allocator

import tensorflow as tf  # noqa: E402

compat.check_part(compat.OPS)

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARY = os.path.join(_PACKAGE_DIR, compat.op_library_name())
if not os.path.exists(_LIBRARY):
    _built = sorted(os.path.basename(p) for p in glob.glob(os.path.join(_PACKAGE_DIR, "_bps_ops_tf*.so")))
    raise ImportError(
        f"bps_tf's TensorFlow ops are not built for TensorFlow {tf.__version__}: {_LIBRARY} is missing (built: "
        f"{', '.join(_built) or 'none'}). Install the bps_tf wheel for this TensorFlow in place of this one: "
        f"{compat.wheel_name()} (docs/install.md); or, in a checkout, build them for this Python with "
        f"`scripts/build_ops.sh {sys.executable}` (docs/launch.md, \"Another TensorFlow\").")
ops = tf.load_op_library(_LIBRARY)

OP_TYPES = frozenset({"BytepsPushPull", "BytepsGather", "BytepsBroadcast", "BytepsPublish"})

# tf.function runs stateful ops in program order unless they are known to be order-insensitive, as TF's own
# collectives are. Ours must not wait for one another: their overlap is the point.
if not OP_TYPES <= compat.target("ASYNC_STATEFUL_OPS"):
    compat.replace("ASYNC_STATEFUL_OPS", compat.target("ASYNC_STATEFUL_OPS") | OP_TYPES)
