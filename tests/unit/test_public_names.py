"""Every name of horovod.tensorflow and horovod.tensorflow.keras (0.28) is either offered by bps_tf's modules
or refused with NotOfferedError; `import bps_tf as bps` resolves the same names as bps_tf.tensorflow."""

import ast

import pytest

from testing.jobs import REPO_ROOT

HOROVOD_TENSORFLOW = """
init shutdown is_initialized start_timeline stop_timeline size local_size cross_size rank local_rank cross_rank
is_homogeneous rank_op local_rank_op size_op local_size_op process_set_included_op mpi_threads_supported
mpi_enabled mpi_built gloo_enabled gloo_built nccl_built ddl_built ccl_built cuda_built rocm_built ProcessSet
global_process_set add_process_set remove_process_set Average Sum Adasum Min Max Product Compression allreduce
grouped_allreduce allgather grouped_allgather broadcast broadcast_ alltoall reducescatter grouped_reducescatter
join broadcast_variables broadcast_global_variables broadcast_object broadcast_object_fn allgather_object
DistributedOptimizer DistributedGradientTape PartialDistributedGradientTape BroadcastGlobalVariablesHook
SyncBatchNormalization elastic
""".split()
HOROVOD_KERAS = """
init shutdown is_initialized start_timeline stop_timeline size local_size cross_size rank local_rank cross_rank
mpi_threads_supported mpi_enabled mpi_built gloo_enabled gloo_built nccl_built ddl_built ccl_built cuda_built
rocm_built ProcessSet global_process_set add_process_set remove_process_set Average Sum Compression
DistributedOptimizer broadcast_global_variables allreduce allgather broadcast reducescatter load_model callbacks
SyncBatchNormalization elastic
""".split()
HOROVOD_KERAS_CALLBACKS = """
BroadcastGlobalVariablesCallback MetricAverageCallback LearningRateScheduleCallback LearningRateWarmupCallback
BestModelCheckpoint
""".split()


def _literal(path, name):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name} not found in {path}")


def test_the_package_forwards_exactly_the_tensorflow_modules_names():
    forwarded = _literal(REPO_ROOT / "bps_tf" / "__init__.py", "_TENSORFLOW_NAMES")
    exported = _literal(REPO_ROOT / "bps_tf" / "tensorflow" / "__init__.py", "__all__")
    assert list(forwarded) == list(exported)


@pytest.mark.parametrize("module_name, names", [("bps_tf.tensorflow", HOROVOD_TENSORFLOW),
                                                ("bps_tf.keras", HOROVOD_KERAS),
                                                ("bps_tf.keras.callbacks", HOROVOD_KERAS_CALLBACKS)])
def test_every_horovod_name_is_offered(module_name, names):
    import importlib

    module = importlib.import_module(module_name)
    missing = [name for name in names if not hasattr(module, name)]
    assert not missing, f"{module_name} lacks {missing}"
    if module_name != "bps_tf.keras.callbacks":
        assert set(names) <= set(module.__all__) | {"push_pull"}


HOROVOD_ELASTIC = "run State ObjectState TensorFlowKerasState TensorFlowState".split()
HOROVOD_KERAS_ELASTIC = HOROVOD_ELASTIC + "KerasState CommitStateCallback UpdateBatchStateCallback " \
    "UpdateEpochStateCallback".split()


@pytest.mark.parametrize("module_name, names", [("bps_tf", HOROVOD_ELASTIC), ("bps_tf.tensorflow", HOROVOD_ELASTIC),
                                                ("bps_tf.keras", HOROVOD_KERAS_ELASTIC)])
def test_horovods_elastic_api_is_offered_as_hvd_elastic(module_name, names):
    import importlib

    from bps_tf.elastic import HorovodInternalError, HostsUpdatedInterrupt

    elastic = importlib.import_module(module_name).elastic
    missing = [name for name in names if not hasattr(elastic, name)]
    assert not missing, f"{module_name}.elastic lacks {missing}"
    assert elastic.HorovodInternalError is HorovodInternalError
    assert issubclass(HostsUpdatedInterrupt, RuntimeError) and HostsUpdatedInterrupt(True).skip_sync
    with pytest.raises(AttributeError, match="no attribute"):
        importlib.import_module(module_name).no_such_name
