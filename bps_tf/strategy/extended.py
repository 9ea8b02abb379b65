"""BytePSExtended: every override of TensorFlow's private MirroredExtended in one place, each answering one
pitfall of using MirroredStrategy across processes (docs/strategy.md lists them, (a) to (g)). The methods
overridden are checked against the installed TensorFlow by bps_tf.compat."""

import collections
import contextlib

import tensorflow as tf

from bps_tf import compat
from bps_tf.elastic import generations
from bps_tf.ops import publish
from bps_tf.process import is_async, rank, size
from bps_tf.strategy.cross_device_ops import BytePSCrossDeviceOps
from bps_tf.strategy.server_weights import ServerWeights
from bps_tf.strategy.xla import ReplicaLoops

distribute_lib = compat.target("distribute_lib")
distribute_utils = compat.target("distribute_utils")
input_lib_v1 = compat.target("input_lib_v1")
input_util = compat.target("input_util")
_values_util = compat.target("values_util")


# Variables created so far by name, in this process (across strategies: a published name is used once),
# since the elastic meeting point `_counted_since` (every worker counts from the same point of the code).
_variables_by_name = collections.Counter()
_counted_since = None


def _occurrence(name):
    """How many variables named `name` this process created before, since the last elastic meeting point."""
    global _counted_since
    if _counted_since != generations.meeting_points():
        _variables_by_name.clear()
        _counted_since = generations.meeting_points()
    occurrence = _variables_by_name[name]
    _variables_by_name[name] += 1
    return occurrence


def job_cluster_resolver(num_workers, worker):
    """A cluster resolver describing the job as MultiWorkerMirroredStrategy's would: one "worker" task per
    worker process, this one `worker`, the chief being worker 0. The addresses are names only: bps_tf's
    processes find each other through its scheduler."""
    spec = tf.train.ClusterSpec({"worker": [f"bps_tf-worker-{i}:0" for i in range(num_workers)]})
    return tf.distribute.cluster_resolver.SimpleClusterResolver(spec, task_type="worker", task_id=worker,
                                                                rpc_layer="")


def _local_reduction(reduce_op, value):
    """This process's replicas of `value` reduced."""
    parts = [tf.identity(v) for v in value.values]
    total = parts[0] if len(parts) == 1 else tf.add_n(parts)
    return total / len(parts) if reduce_op == tf.distribute.ReduceOp.MEAN and len(parts) > 1 else total


class BytePSExtended(compat.target("MirroredExtended")):
    def __init__(self, container_strategy, devices, compression=None):
        self._num_workers = size()
        self._id_in_cluster = rank()
        # Asynchronous training: the servers hold the trainable variables, gradients stay on their worker.
        self._server_weights = ServerWeights() if is_async() else None
        self._bps_ops = BytePSCrossDeviceOps(num_replicas_in_sync=len(devices) * size(), compression=compression,
                                             local_gradients=self._server_weights is not None)
        self._local_reads = 0
        self._steps_running = 0  # strategy.run calls under way
        self._reduced_reads = {}
        self._xla_loops = ReplicaLoops(container_strategy)
        super().__init__(container_strategy, devices=devices, cross_device_ops=self._bps_ops)
        # Code written for MultiWorkerMirroredStrategy reads the job from these: a worker job, chief = worker 0.
        self._cluster_resolver = job_cluster_resolver(self._num_workers, self._id_in_cluster)
        self._task_type = "worker"
        self._task_id = self._id_in_cluster

    # Elastic jobs: after a reset the job has another size and this worker another rank (bps_tf.elastic.generations
    # calls this then). Keras traces its train function anew (bps_tf.elastic.keras_state.KerasState); the next
    # dataset distributed is sharded and rebatched for the new replica count.
    def follow_job(self):
        self._num_workers = size()
        self._id_in_cluster = rank()
        self._bps_ops.follow_job(len(self._devices) * self._num_workers)
        self._cluster_resolver = job_cluster_resolver(self._num_workers, self._id_in_cluster)
        self._task_id = self._id_in_cluster

    @contextlib.contextmanager
    def local_reads(self):
        """Reads of on-read variables (tf-keras's metrics) in the cross-replica context stay within this
        process meanwhile. TensorFlow reads such a variable back after assigning it there, which is a
        reduction over every worker: resetting metrics would be a collective, and a worker that joined an
        elastic job holds fewer metrics (tf-keras builds its compiled metrics at the first step), so the
        workers' collectives would no longer pair up."""
        self._local_reads += 1
        try:
            yield
        finally:
            self._local_reads -= 1

    @contextlib.contextmanager
    def reads_reduced_together(self, variables):
        """Reads of these sync-on-read variables (metrics) in the cross-replica context meanwhile give their
        values reduced across workers in one batch made now, instead of one reduction per read, each waiting
        for the last. Every worker must pass the same variables in the same order."""
        by_op = collections.defaultdict(list)
        for v in variables:
            if distribute_utils.is_sync_on_read(v) and v.aggregation != tf.VariableAggregation.ONLY_FIRST_REPLICA:
                by_op[tf.distribute.ReduceOp.from_variable_aggregation(v.aggregation)].append(v)
        before = self._reduced_reads
        self._reduced_reads = dict(before)
        for reduce_op, group in by_op.items():
            reduced = self._bps_ops.reduce_together(reduce_op, group, "/device:CPU:0")
            self._reduced_reads.update({id(v): (v, r) for v, r in zip(group, reduced)})
        try:
            yield
        finally:
            self._reduced_reads = before

    # (b) The replica count is global, or gradients would be `size` times too big.
    @property
    def _num_replicas_in_sync(self):
        return len(self._devices) * self._num_workers

    def _get_replica_id_in_sync_group(self, replica_id):
        return self._id_in_cluster * len(self._devices) + replica_id

    def _get_local_replica_id(self, replica_id_in_sync_group):
        return replica_id_in_sync_group - self._id_in_cluster * len(self._devices)

    def _in_multi_worker_mode(self):
        # Also makes TF's distributed iterators agree across workers on whether data remains.
        return self._num_workers > 1

    @property
    def experimental_between_graph(self):
        return True

    # (f) Only worker 0 writes checkpoints and summaries.
    @property
    def should_checkpoint(self):
        return self._id_in_cluster == 0

    @property
    def should_save_summary(self):
        return self._id_in_cluster == 0

    # (d) No silent fallback: int32 values, CPU destinations and XLA all go through our ops; merge_call is
    # always used, so collectives are issued once per process from the cross-replica context (g).
    def _use_merge_call(self):
        return True

    # XLA: a replica function compiled with XLA gets the replica loop inside it, on GPUs as on CPUs, so that
    # merge_call and our reductions are part of its computation (bps_tf/strategy/xla.py).
    def _call_for_each_replica(self, fn, args, kwargs):
        self._steps_running += 1  # asynchronous training: assignments inside a step are the step's updates
        try:
            if ReplicaLoops.applies_to(fn):
                return self._xla_loops.call(fn, args, kwargs, self._devices)
            return super()._call_for_each_replica(fn, args, kwargs)
        finally:
            self._steps_running -= 1

    def _get_cross_device_ops(self, value):
        return self._bps_ops

    def _reduce_to(self, reduce_op, value, destinations, options):
        if distribute_utils.is_mirrored(value) and reduce_op == tf.distribute.ReduceOp.MEAN:
            return value
        if isinstance(value, (list, tuple)) or isinstance(value, dict):
            return tf.nest.map_structure(lambda v: self._reduce_to(reduce_op, v, destinations, options), value)
        reduced = self._reduced_reads.get(id(value))
        if reduced is not None and reduced[0] is value:
            return reduced[1]
        if self._local_reads and distribute_utils.is_sync_on_read(value):
            return self._bps_ops.broadcast_implementation(_local_reduction(reduce_op, value), destinations)
        # (a) A single local replica is still reduced across processes (our ops report more than one
        # between-graph worker); a value that is not distributed is this process's contribution.
        return self._bps_ops.reduce(reduce_op, value, destinations=destinations, options=options)

    def _gather_to_implementation(self, value, destinations, axis, options):
        # A plain tensor is this process's part, as for reductions.
        return self._bps_ops._gather_implementation(value, destinations, axis, options)

    def _batch_reduce_to(self, reduce_op, value_destination_pairs, options):
        return self._bps_ops.batch_reduce(reduce_op, value_destination_pairs, options=options)

    # (e) Initial values come from worker 0, so every process starts from the same variables. Worker 0
    # publishes each value and the others fetch it when they create the same variable: a variable created
    # on some workers only (Keras's saving code makes one on worker 0) keeps nobody waiting. Variables are
    # matched by name and by how many of that name this worker created before.
    def _get_variable_creator_initial_value(self, replica_id, device, primary_var, **kwargs):
        # In an elastic run the State's sync gives every worker worker 0's values (bps_tf.elastic.generations.in_run).
        if replica_id != 0 or generations.in_run():
            return super()._get_variable_creator_initial_value(replica_id, device, primary_var, **kwargs)
        name = kwargs.get("name") or "variable"
        occurrence = _occurrence(name)

        def initial_value_fn():
            initial_value = kwargs["initial_value"]
            if callable(initial_value):
                initial_value = initial_value()
            initial_value = getattr(initial_value, "wrapped_value", initial_value)  # CheckpointInitialValue
            with tf.device(device):
                value = tf.convert_to_tensor(initial_value, dtype=kwargs.get("dtype", None))
                if self._num_workers == 1:
                    return value
                return publish(value, root_rank=0, name=f"strategy.initial_value.{name}.{occurrence}")

        return initial_value_fn

    # Asynchronous training: the servers hold each trainable variable from its first update in a generation;
    # every update pushes its change and takes the servers' weights (bps_tf/strategy/server_weights.py).
    def _create_variable(self, next_creator, **kwargs):
        variable = super()._create_variable(next_creator, **kwargs)
        if self._server_weights is not None and distribute_utils.is_mirrored(variable):
            self._server_weights.created(variable)
        return variable

    def _update(self, var, fn, args, kwargs, group):
        def apply():
            return super(BytePSExtended, self)._update(var, fn, args, kwargs, group)

        if self._server_weights is None:
            return apply()
        # Outside a step, a variable's assign() (restoring weights, set_weights) updates through TensorFlow's
        # values_util; an optimizer's update, anywhere, through its own function.
        assignment = self._steps_running == 0 and getattr(fn, "__module__", None) == _values_util.__name__
        return self._server_weights.update(var, apply, assignment=assignment)

    # (c) Datasets: each worker reads its own shard; batches are rebatched by the global replica count.
    def _make_input_context(self):
        return distribute_lib.InputContext(num_input_pipelines=self._num_workers,
                                           input_pipeline_id=self._id_in_cluster,
                                           num_replicas_in_sync=self._num_replicas_in_sync)

    def _iterator_options(self, options):
        """The options the distributed dataset's iterators are made with. With one local device that is the
        host's CPU, a plain iterator of the worker's dataset (the per-replica mode without fetching to a
        device gives one) yields the same batches as TensorFlow's default MultiDeviceIterator, which copies
        them to the devices in background threads and traces its own functions for every iterator, i.e. at
        every fit() call and epoch; here there is nothing to copy."""
        if len(self._devices) != 1 or tf.DeviceSpec.from_string(self._devices[0]).device_type != "CPU":
            return options
        if options and options.experimental_replication_mode != distribute_lib.InputReplicationMode.PER_WORKER:
            return options
        return tf.distribute.InputOptions(
            experimental_replication_mode=distribute_lib.InputReplicationMode.PER_REPLICA,
            experimental_fetch_to_device=False, experimental_place_dataset_on_device=False)

    def _experimental_distribute_dataset(self, dataset, options):
        if options and options.experimental_replication_mode == distribute_lib.InputReplicationMode.PER_REPLICA:
            raise NotImplementedError("InputReplicationMode.PER_REPLICA is supported in "
                                      "distribute_datasets_from_function only")
        return input_util.get_distributed_dataset(
            dataset, self._input_workers_with_options(options), self._container_strategy(),
            num_replicas_in_sync=self._num_replicas_in_sync, input_context=self._make_input_context(),
            options=self._iterator_options(options))

    def _distribute_datasets_from_function(self, dataset_fn, options):
        if options and options.experimental_replication_mode == distribute_lib.InputReplicationMode.PER_REPLICA:
            raise NotImplementedError("InputReplicationMode.PER_REPLICA is not supported by BytePSStrategy")
        return input_util.get_distributed_datasets_from_function(
            dataset_fn=dataset_fn, input_workers=self._input_workers_with_options(options),
            input_contexts=[self._make_input_context()], strategy=self._container_strategy(),
            options=self._iterator_options(options))

    def _experimental_distribute_values_from_function(self, value_fn):
        per_replica = []
        for local_id in range(len(self._devices)):
            replica_id = self._get_replica_id_in_sync_group(local_id)
            per_replica.append(value_fn(distribute_lib.ValueContext(replica_id, self._num_replicas_in_sync)))
        return distribute_utils.regroup(per_replica, always_wrap=True)

    def _make_dataset_iterator(self, dataset):
        return input_lib_v1.DatasetIterator(dataset, self._input_workers, self._container_strategy(),
                                            num_replicas_in_sync=self._num_replicas_in_sync,
                                            input_context=self._make_input_context())

    def _configure(self, session_config=None, cluster_spec=None, task_type=None, task_id=None):
        # Only TF1-style drivers configure a strategy: tf.estimator's train_distribute, which runs its own
        # multi-worker setup and would train each worker apart.
        raise NotImplementedError(
            "BytePSStrategy cannot drive tf.estimator (RunConfig(train_distribute=...)) or other TF1-style "
            "sessions. For estimators, wrap the optimizer in the model_fn with bps_tf.tensorflow."
            "DistributedOptimizer and add bps_tf.tensorflow.BroadcastGlobalVariablesHook(0) to the training "
            "hooks (docs/api.md, \"Estimators\").")

    def _make_input_fn_iterator(self, input_fn, replication_mode=distribute_lib.InputReplicationMode.PER_WORKER):
        return input_lib_v1.InputFunctionIterator(input_fn, self._input_workers, [self._make_input_context()],
                                                  self._container_strategy())


