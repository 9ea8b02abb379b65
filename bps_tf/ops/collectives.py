"""push_pull, broadcast and publish of tf.Tensors (the collectives every other layer builds on), with their
gradients."""

import contextlib
import sys

import tensorflow as tf

from bps_tf import process_sets
from bps_tf.ops import naming, shape_agreement
from bps_tf.ops.batched import compiling, refuse_backups_under_xla
from bps_tf.ops.compression import Compression, wire_codec
from bps_tf.ops.library import ops
from bps_tf.ops.wire_dtypes import SUPPORTED_DTYPES  # noqa: F401 (re-exported)
from bps_tf.ops.wire_dtypes import check_travels, from_wire, to_wire
from bps_tf.ops.info import worker_info
from bps_tf.process import backup_workers, is_elastic, rank

# Reduction ops, as in Horovod. Average is a sum divided by the number of workers taking part.
Sum = "Sum"
Average = "Average"
Min = "Min"
Max = "Max"
Product = "Product"
Adasum = "Adasum"
REDUCE_OPS = (Sum, Average, Min, Max, Product)
_SERVER_OP = {Sum: "sum", Average: "sum", Min: "min", Max: "max", Product: "product"}
_ADASUM_MESSAGE = (
    "bps_tf does not offer Adasum: its parameter servers combine gradients with a sum, min, max or product. "
    "Use op=bps.Average (the default), which Adasum is usually compared against, with a learning rate scaled "
    "by the number of workers.")


def check_op(op, what):
    if op == Adasum:
        raise NotImplementedError(f"{what}: {_ADASUM_MESSAGE}")
    if op not in REDUCE_OPS:
        raise ValueError(f"{what}: op must be one of bps.Sum, Average, Min, Max, Product; got {op!r}")


def _scaled(tensor, factor):
    """`tensor` * `factor` in its own dtype (integers are scaled in float64 and truncated, as Horovod does)."""
    if factor == 1.0:
        return tensor
    if tensor.dtype.is_floating:
        return tensor * tf.cast(factor, tensor.dtype)
    return tf.cast(tf.cast(tensor, tf.float64) * factor, tensor.dtype)


def set_label(members):
    """Each process set has names of its own, as in Horovod: '.set.0.2' for ranks 0 and 2, '' for all."""
    return "".join(f".{r}" for r in members) and ".set" + "".join(f".{r}" for r in members)


def push_pull(tensor, name=None, op=Average, compression=Compression.none, priority=0, shape_in_name=False,
              local_devices=1, prescale_factor=1.0, postscale_factor=1.0, process_set=None, ignore_name_scope=True,
              backups=False):
    """`tensor` reduced across all workers (or the members of `process_set`): op=Sum, Average (the sum
    divided by the number of workers taking part), Min, Max or Product.

    `name` identifies the tensor on every worker; without one, a deterministic name is derived (the graph
    tensor's name inside tf.function, the calling code's location in eager mode). `shape_in_name=True`
    suits a tensor whose shape changes from step to step (all workers agree on it at each step).
    `local_devices` > 1: this is one of that many replicas in this process, each on its own GPU and each
    issued under the same name; they are reduced together (NCCL) before the servers. Min, Max, Product and
    process sets run on the CPU. `prescale_factor` multiplies the input, `postscale_factor` the result.
    With `ignore_name_scope=False` a given name is taken inside the current name scope. `backups=True` marks a
    gradient: with BYTEPS_BACKUP_WORKERS=b its rounds take the first size() - b workers' values, the sum scaled
    by size() / (size() - b) (floating sums over every worker, on the CPU, uncompressed; docs/strategy.md).
    IndexedSlices (sparse gradients) become dense tensors first (see docs/api.md).
    """
    check_op(op, f"push_pull of '{name or 'tensor'}'")
    tensor = tf.convert_to_tensor(tensor)
    what = f"push_pull of '{name or tensor.dtype.name}'"
    members = process_sets.members(process_set, what)
    check_travels(tensor.dtype, what)
    if op == Average and not tensor.dtype.is_floating:
        raise ValueError(f"{what}: op=Average needs a floating dtype, got {tensor.dtype.name}; use op=bps.Sum")
    if tensor.dtype == tf.bool:
        raise ValueError(f"{what}: bool tensors cannot be reduced; cast them to an integer dtype")
    if name is None and tf.executing_eagerly() and shape_agreement.needs_check(tensor):
        # Eagerly a derived name holds the shape: workers whose shapes differ would wait for each other.
        shape_agreement.check([tensor], None, what, shape_agreement.HOROVOD_REMEDY, members)
    # The op and the set are part of the name: one call site may reduce the same tensor several ways.
    kind = "push_pull" + ("" if _SERVER_OP[op] == "sum" else f".{_SERVER_OP[op]}") + set_label(members)
    full_name = naming.tensor_name(tensor, name, kind, uses=int(local_devices), ignore_name_scope=ignore_name_scope)
    codec = _codec_for(compression, tensor, op, what)
    if codec is not None and int(local_devices) > 1:
        raise ValueError(f"{what}: compression {codec.wire} encodes one tensor per process; sum the "
                         f"{local_devices} local replicas first and push_pull the sum")
    # The core encodes on the CPU: a GPU tensor is copied there (compression is for slow networks). Backup
    # workers' rounds run through the CPU kernel too.
    backups = bool(backups) and backup_workers() > 0
    if backups and compiling():
        refuse_backups_under_xla()
    on_cpu = op in (Min, Max, Product) or bool(members) or codec is not None or backups
    with tf.device("/cpu:0") if on_cpu else contextlib.nullcontext():
        compressed, context = compression.compress(_scaled(tensor, prescale_factor))
        if codec is not None:
            compressed, context = tf.cast(compressed, tf.float32), tensor.dtype
        wire, original = to_wire(compressed, what)
        reduced = ops.byteps_push_pull(wire, tensor_name=full_name, priority=int(priority),
                                       shape_in_name=bool(shape_in_name), local_devices=int(local_devices),
                                       reduce_op=_SERVER_OP[op], process_set=members,
                                       compression=codec.wire if codec is not None else "",
                                       **({"backups": True} if backups else {}))
        result = from_wire(reduced, original)
        result = tf.cast(result, context) if codec is not None else compression.decompress(result, context)
    if op == Average:
        result = result / tf.cast(set_size_when_run(process_set), result.dtype)
    return _scaled(result, postscale_factor)


def set_size_when_run(process_set):
    """The number of workers of `process_set`: in an elastic job, for the whole job, read when the graph runs
    (a function traced in one generation runs in the next, with another size); otherwise a constant."""
    if is_elastic() and (process_set is None or process_set is process_sets.global_process_set):
        return worker_info("size")
    return process_sets.set_size(process_set)


def _codec_for(compression, tensor, op, what):
    """The wire codec that encodes `tensor`, or None (no codec, or a tensor it leaves alone)."""
    codec = wire_codec(compression)
    if codec is None:
        return None
    if op not in (Sum, Average):
        raise ValueError(f"{what}: compression {codec.wire} applies to sums and averages, not {op}")
    if not codec.applies_to(tensor):
        return None
    return codec


def push_pull_weights(tensor, name, priority=0, ordered=False):
    """Asynchronous training (bps_tf/ops/async_weights.py): the first call of `name` sends `tensor` as the
    initial weights, each later one a change of them; returns the servers' weights. `ordered`: the caller
    makes each push of `name` in a graph depend on the last one's result (the updates of one variable), so
    that a graph may push it more than once (an optimizer's weight decay, then its step)."""
    tensor = tf.convert_to_tensor(tensor)
    what = f"push_pull of weights '{name}'"
    check_travels(tensor.dtype, what)
    full_name = naming.tensor_name(tensor, name, "weights", uses=sys.maxsize if ordered else 1)
    with tf.device("/cpu:0"):
        wire, original = to_wire(tensor, what)
        weights = ops.byteps_push_pull(wire, tensor_name=full_name, priority=int(priority), reduce_op="weights")
        return from_wire(weights, original)


def broadcast(tensor, root_rank, name=None, process_set=None, ignore_name_scope=True):
    """The value of `tensor` on worker `root_rank` (a rank in the job, a member of `process_set` if given),
    returned on every worker (of the set)."""
    tensor = tf.convert_to_tensor(tensor)
    what = f"broadcast of '{name or tensor.dtype.name}'"
    members = process_sets.members(process_set, what)
    if members and root_rank not in members:
        raise ValueError(f"{what}: root_rank {root_rank} is not in {process_set}")
    full_name = naming.tensor_name(tensor, name, "broadcast" + set_label(members), ignore_name_scope=ignore_name_scope)
    with tf.device("/cpu:0") if members else contextlib.nullcontext():
        wire, original = to_wire(tensor, what)
        value = ops.byteps_broadcast(wire, tensor_name=full_name, root_rank=int(root_rank), process_set=members)
        return from_wire(value, original)


def publish(tensor, root_rank, name):
    """The value of `tensor` on worker `root_rank`: the root publishes it, a worker that calls this too
    fetches it, and nobody waits for a worker that never does (variables created on some workers only).
    Once per name until shutdown()."""
    tensor = tf.convert_to_tensor(tensor)
    wire, original = to_wire(tensor, f"publish of '{name}'")
    with tf.device("/cpu:0"):
        value = ops.byteps_publish(wire, tensor_name=naming.tensor_name(tensor, name, "publish"),
                                   root_rank=int(root_rank))
    return from_wire(value, original)


@tf.RegisterGradient("BytepsPushPull")
def _push_pull_grad(op, grad):
    """The gradient of a sum across workers is the sum of the gradients (for min, max and product, as in
    Horovod, the gradients are reduced with the same op)."""
    return ops.byteps_push_pull(grad, tensor_name=op.get_attr("tensor_name").decode() + "/grad",
                                priority=op.get_attr("priority"), shape_in_name=op.get_attr("shape_in_name"),
                                local_devices=op.get_attr("local_devices"), reduce_op=op.get_attr("reduce_op"),
                                process_set=op.get_attr("process_set"))


@tf.RegisterGradient("BytepsBroadcast")
def _broadcast_grad(op, grad):
    """Only the root's input influenced the output: it receives the summed gradient, others zero."""
    root = op.get_attr("root_rank")
    summed = ops.byteps_push_pull(grad, tensor_name=op.get_attr("tensor_name").decode() + "/grad",
                                  process_set=op.get_attr("process_set"))
    return summed if rank() == root else summed * 0


tf.no_gradient("BytepsPublish")
