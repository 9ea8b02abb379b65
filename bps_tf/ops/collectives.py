"""push_pull and broadcast of tf.Tensors (the collectives every other layer builds on), with their gradients."""

import tensorflow as tf

from bps_tf.ops import naming
from bps_tf.ops.compression import Compression
from bps_tf.ops.library import ops
from bps_tf.process import rank, size

# Reduction ops, as in Horovod.
Sum = "Sum"
Average = "Average"

SUPPORTED_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64)


def check_dtype(tensor, what):
    if tensor.dtype not in SUPPORTED_DTYPES:
        names = ", ".join(d.name for d in SUPPORTED_DTYPES)
        raise ValueError(f"{what}: unsupported dtype {tensor.dtype.name}; supported: {names}")


def push_pull(tensor, name=None, op=Average, compression=Compression.none, priority=0, shape_in_name=False,
              local_devices=1):
    """Sum (op=Sum) or mean (op=Average) of `tensor` across all workers.

    `name` identifies the tensor on every worker; without one, a deterministic name is derived (the graph
    tensor's name inside tf.function, the calling code's location in eager mode). `shape_in_name=True`
    suits a tensor whose shape changes from step to step (all workers agree on it at each step).
    `local_devices` > 1: this is one of that many replicas in this process, each on its own GPU and each
    issued under the same name; they are reduced together (NCCL) before the servers.
    IndexedSlices (sparse gradients) become dense tensors first (see docs/api.md).
    """
    if op not in (Sum, Average):
        raise ValueError(f"push_pull: op must be bps_tf.Sum or bps_tf.Average, got {op!r}")
    tensor = tf.convert_to_tensor(tensor)
    check_dtype(tensor, f"push_pull of '{name or tensor.dtype.name}'")
    if op == Average and not (tensor.dtype.is_floating):
        raise ValueError(
            f"push_pull: op=Average needs a floating dtype, got {tensor.dtype.name}; use op=bps_tf.Sum for integers"
        )
    full_name = naming.tensor_name(tensor, name, "push_pull", uses=int(local_devices))
    compressed, context = compression.compress(tensor)
    summed = ops.byteps_push_pull(compressed, tensor_name=full_name, priority=int(priority),
                                  shape_in_name=bool(shape_in_name), local_devices=int(local_devices))
    result = compression.decompress(summed, context)
    if op == Average:
        result = result / tf.cast(size(), result.dtype)
    return result


def broadcast(tensor, root_rank, name=None):
    """The value of `tensor` on worker `root_rank`, returned on every worker."""
    tensor = tf.convert_to_tensor(tensor)
    check_dtype(tensor, f"broadcast of '{name or tensor.dtype.name}'")
    return ops.byteps_broadcast(tensor, tensor_name=naming.tensor_name(tensor, name, "broadcast"),
                                root_rank=int(root_rank))


@tf.RegisterGradient("BytepsPushPull")
def _push_pull_grad(op, grad):
    """The gradient of a sum across workers is the sum of the gradients."""
    return ops.byteps_push_pull(grad, tensor_name=op.get_attr("tensor_name").decode() + "/grad",
                                priority=op.get_attr("priority"), shape_in_name=op.get_attr("shape_in_name"),
                                local_devices=op.get_attr("local_devices"))


@tf.RegisterGradient("BytepsBroadcast")
def _broadcast_grad(op, grad):
    """Only the root's input influenced the output: it receives the summed gradient, others zero."""
    root = op.get_attr("root_rank")
    summed = ops.byteps_push_pull(grad, tensor_name=op.get_attr("tensor_name").decode() + "/grad")
    return summed if rank() == root else summed * 0
