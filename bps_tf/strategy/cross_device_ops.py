"""BytePSCrossDeviceOps: the strategy's reductions. Local replicas are summed first, then one push_pull per
process goes through the parameter servers, then the result is copied to every local destination (the
hierarchical strategy). A batch of reductions (Keras's gradients) is issued together, so all their
partitions pipeline, prioritised so that gradients listed first (layers nearer the input) go first.
Sparse gradients (an embedding's IndexedSlices) stay sparse when their gathered rows are smaller than the
dense tensor (bps_tf.ops.gather)."""

import contextlib

import tensorflow as tf

from bps_tf import compat
from bps_tf.ops import Average, Compression, Sum, all_gather, gather_is_smaller, naming, push_pull, push_pull_slices
from bps_tf.ops import shape_agreement
from bps_tf.ops.batched import push_pull_batch
from bps_tf.ops.compression import wire_codec
from bps_tf.ops.together import function_of_its_own
from bps_tf.ops.info import worker_info
from bps_tf.process import is_elastic, size
from bps_tf.strategy import xla

compat.check_part(compat.STRATEGY)
_CrossDeviceOps = compat.target("CrossDeviceOps")
_simple_broadcast = compat.target("simple_broadcast")
_get_devices_from = compat.target("get_devices_from")
_values = compat.target("distribute_values")
ReduceOp = tf.distribute.ReduceOp


# A stack of label lists, each for the next batch of gradients (gradient_labels). One for the process: the
# local replicas' threads each push the same labels for the batch they reduce together.
_gradient_labels = []


@contextlib.contextmanager
def gradient_labels(labels):
    """The batch of gradients reduced inside takes `labels` (one per gradient) for its push_pulls' names in place
    of its tensors' names, which differ between functions: with backup workers a step that skips its compute
    pushes under the names of the step that computes."""
    _gradient_labels.append(list(labels))
    try:
        yield
    finally:
        _gradient_labels.pop()


def _local_values(value):
    if isinstance(value, _values.DistributedValues):
        return list(value.values)
    return [value]


def _label(value):
    """A name for the reduction that is the same on every worker (and every step in a tf.function)."""
    first = _local_values(value)[0]
    if isinstance(first, tf.Variable):
        # Variables of one name (two tf-keras metrics' "total") may be read in one graph: count them.
        label = f"var/{first.name}"
        occurrence = naming.occurrence_in_graph(label)
        return f"{label}#{occurrence}" if occurrence else label
    if not tf.executing_eagerly() and hasattr(first, "name"):
        return None  # the graph tensor's name (see naming.tensor_name)
    return "eager"


def _on_gpu(tensor):
    return "GPU" in (tensor.device or "").upper()


def _to_destinations(reduced, destinations):
    """A Mirrored value on `destinations`, from one reduced tensor or from one per local GPU."""
    if isinstance(reduced, list):
        devices = _get_devices_from(destinations)
        by_device = {tf.DeviceSpec.from_string(r.device).to_string(): r for r in reduced}
        picked = [by_device.get(tf.DeviceSpec.from_string(d).to_string()) for d in devices]
        if all(p is not None for p in picked):
            return _values.Mirrored(picked) if len(picked) > 1 else picked[0]
        # Keep every GPU's op: inside a tf.function an unused one would be pruned and the others would wait
        # for its part of the local reduction.
        with tf.control_dependencies(reduced):
            reduced = tf.identity(reduced[0])
    return _simple_broadcast(reduced, destinations, always_mirrored=True)


def _signature(tensor):
    return f"{tensor.dtype.name}{tensor.shape.as_list() if tensor.shape.rank is not None else '?'}"


def _dense(tensor):
    return tf.convert_to_tensor(tensor)  # IndexedSlices become dense, as in push_pull


def _shapes_checked(value):
    """`value`, once every worker's shape was found equal (a clear error at once on every worker otherwise).
    Checked: a single reduction (a user's strategy.reduce) of tensors of rank 1 or more, whose shape may
    follow the batch. Variables (metrics) and scalars have one shape everywhere; gradients go in batches."""
    local = _local_values(value)
    first = local[0]
    if (isinstance(first, (tf.Variable, tf.IndexedSlices)) or not shape_agreement.needs_check(first)
            or xla.active() or size() == 1):
        return value
    label = _label(value)
    checked = shape_agreement.check([_dense(t) for t in local], label and f"strategy.{label}",
                                    "BytePSStrategy.reduce", shape_agreement.STRATEGY_REMEDY)
    if checked is None:
        return value
    after = []
    for tensor in local:
        with tf.device(tensor.device), tf.control_dependencies([checked]):
            after.append(tf.identity(tensor))
    return _values.PerReplica(after) if len(after) > 1 else after[0]


def _stays_sparse(local_values):
    return all(isinstance(t, tf.IndexedSlices) for t in local_values) and gather_is_smaller(local_values)


class BytePSCrossDeviceOps(_CrossDeviceOps):
    """Cross-device (and cross-process) reductions through bps_tf's parameter servers."""

    def __init__(self, num_replicas_in_sync, compression=Compression.none, local_gradients=False):
        super().__init__()
        # Asynchronous training: gradient batches are reduced within this process only (each worker applies
        # its own); other reductions (metrics) still span the job.
        self._local_gradients = local_gradients
        self._num_replicas_in_sync = num_replicas_in_sync
        self._local_replicas = max(1, num_replicas_in_sync // size())
        self._compression = compression  # for batches (gradients); single reductions (metrics) travel exactly
        self._eager_batches = {}

    def follow_job(self, num_replicas_in_sync):
        """Elastic jobs: the replica count of the next generation."""
        self._num_replicas_in_sync = num_replicas_in_sync
        self._eager_batches = {}

    def _replica_count(self):
        """The replicas a MEAN divides by: in an elastic job read when the graph runs (a function traced in
        one generation runs in the next), except under XLA, which cannot read it."""
        if is_elastic() and not xla.active():
            return worker_info("size") * self._local_replicas
        return self._num_replicas_in_sync

    @property
    def _num_between_graph_workers(self):
        # More than one process: TF must not skip the reduction of a single local replica.
        return size()

    def _reduce_one(self, reduce_op, local_tensors, priority, name, compression=Compression.none, backups=False):
        """The reduced value: one tensor, or one per local GPU (already on each GPU)."""
        if reduce_op not in (ReduceOp.SUM, ReduceOp.MEAN):
            raise ValueError(f"BytePSStrategy reduces with SUM or MEAN, not {reduce_op}")
        if isinstance(local_tensors[0], tf.IndexedSlices):
            name = name or naming.tensor_name(local_tensors[0].values, None, "strategy.sparse")
            op = Average if reduce_op == ReduceOp.MEAN else Sum
            with tf.device(local_tensors[0].device):
                return push_pull_slices(local_tensors, name, op, priority, replicas=self._num_replicas_in_sync)
        codec = wire_codec(compression)
        encoded = codec is not None and codec.applies_to(local_tensors[0])
        if len(local_tensors) > 1 and all(_on_gpu(t) for t in local_tensors) and not encoded:
            # One op per GPU under one name: the core reduces them with NCCL before the servers.
            name = name or naming.tensor_name(local_tensors[0], None, "strategy")
            results = []
            for tensor in local_tensors:
                with tf.device(tensor.device):
                    summed = push_pull(tensor, name=name, op=Sum, priority=priority, local_devices=len(local_tensors))
                    results.append(self._finish_mean(reduce_op, summed))
            return results
        with tf.device(local_tensors[0].device):
            local = local_tensors[0] if len(local_tensors) == 1 else tf.add_n(local_tensors)
        summed = push_pull(local, name=name, op=Sum, priority=priority, compression=compression,
                           backups=backups and local.dtype.is_floating)
        return self._finish_mean(reduce_op, summed)

    def _finish_mean(self, reduce_op, summed):
        if reduce_op != ReduceOp.MEAN:
            return summed
        count = tf.cast(self._replica_count(), summed.dtype)
        # Integers keep their dtype (floor division), as a mean of counters is used.
        return summed / count if summed.dtype.is_floating else summed // count

    def _reduce_groups(self, reduce_op, groups, names, compression, backups=False):
        count = len(groups)
        if xla.sums_together(groups, compression):
            summed = push_pull_batch([g[0] for g in groups], names, range(count, 0, -1), compression)
            return [self._finish_mean(reduce_op, s) for s in summed]
        return [self._reduce_one(reduce_op, g, count - i, n, compression, backups)
                for i, (g, n) in enumerate(zip(groups, names))]

    def _reduce_batch(self, reduce_op, values, compression=Compression.none, backups=False):
        """One reduced tensor per value (each value: a PerReplica/Mirrored value, a variable or a tensor).
        `backups`: gradients, whose rounds may complete without the job's backup workers."""
        groups = [_local_values(v) for v in values]
        compiled = xla.active()
        if compiled:
            xla.check_reduction(groups, compression)
        # Gathering sparse rows has no XLA lowering: inside XLA they are reduced dense.
        groups = [g if not compiled and _stays_sparse(g) else [_dense(t) for t in g] for g in groups]
        names = []
        given = _gradient_labels[-1] if backups and _gradient_labels else None
        if given is not None and len(given) != len(values):
            raise ValueError(f"{len(given)} gradient labels for a batch of {len(values)} gradients")
        for i, (value, group) in enumerate(zip(values, groups)):
            label = given[i] if given is not None else _label(value)
            # Same label, different shapes (two metrics' "total") must not share a tensor.
            names.append(None if label is None else f"strategy.{label}.{i}.{_signature(group[0])}")
        if not tf.executing_eagerly() or (len(groups) == 1 and len(groups[0]) == 1):
            return self._reduce_groups(reduce_op, groups, names, compression, backups)
        # Eagerly each op would wait for its own result (and one GPU's op for the others' part of the local
        # reduction): run the batch as one function so they overlap.
        key = (reduce_op, tuple(names), tuple(len(g) for g in groups), compression, backups)
        function = self._eager_batches.get(key)
        if function is None:
            function = function_of_its_own(
                lambda gs: self._reduce_groups(reduce_op, gs, list(key[1]), compression, backups))
            self._eager_batches[key] = function
        return function(groups)

    def reduce_implementation(self, reduce_op, per_replica_value, destinations, options):
        reduced = self._reduce_batch(reduce_op, [_shapes_checked(per_replica_value)])[0]
        return _to_destinations(reduced, destinations)

    def reduce_together(self, reduce_op, values, destinations):
        """`values` (variables or per-replica values, of one shape on every worker) reduced in one batch,
        uncompressed, each as reduce_implementation would give it."""
        return [_to_destinations(r, destinations) for r in self._reduce_batch(reduce_op, values)]

    def batch_reduce_implementation(self, reduce_op, value_destination_pairs, options):
        if self._local_gradients:
            return [_to_destinations(self._reduce_locally(reduce_op, v), d) for v, d in value_destination_pairs]
        # The optimizers' gradients come this way (compressed, and with backup workers, the first workers'
        # only); single reductions (metrics, losses) wait for every worker.
        reduced = self._reduce_batch(reduce_op, [v for v, _ in value_destination_pairs], self._compression,
                                     backups=True)
        return [_to_destinations(r, d) for r, (_, d) in zip(reduced, value_destination_pairs)]

    def _reduce_locally(self, reduce_op, value):
        """This process's part of the job's reduction: its replicas' sum (a MEAN divides it by the job's
        replica count, as the loss of each replica was scaled; the workers' steps add up to one step of the
        mean)."""
        local = [_dense(t) for t in _local_values(value)]
        with tf.device(local[0].device):
            summed = local[0] if len(local) == 1 else tf.add_n(local)
        return self._finish_mean(reduce_op, summed)

    def _gather_implementation(self, per_replica_value, destinations, axis, options):
        if xla.active():
            xla.refuse("gather values across workers (all_gather)")
        local = [_dense(v) for v in _local_values(per_replica_value)]
        with tf.device(local[0].device):
            mine = local[0] if len(local) == 1 else tf.concat(local, axis=axis)
            # Not named after the shape: workers' lengths along `axis` may differ.
            gathered = all_gather(mine, axis, naming.tensor_name(mine, None, "gather", with_shape=False))
        return _simple_broadcast(gathered, destinations, always_mirrored=True)

    def broadcast_implementation(self, tensor, destinations):
        # Within this process: every worker already holds the same cross-replica value.
        return _simple_broadcast(tensor, destinations, always_mirrored=True)

    def _all_reduce(self, reduce_op, value, replica_id, options):
        raise ValueError("BytePSStrategy reduces through merge_call; this path is not used")

