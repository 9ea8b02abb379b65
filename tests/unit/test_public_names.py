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
SyncBatchNormalization
""".split()
HOROVOD_KERAS = """
init shutdown is_initialized start_timeline stop_timeline size local_size cross_size rank local_rank cross_rank
mpi_threads_supported mpi_enabled mpi_built gloo_enabled gloo_built nccl_built ddl_built ccl_built cuda_built
rocm_built ProcessSet global_process_set add_process_set remove_process_set Average Sum Compression
DistributedOptimizer broadcast_global_variables allreduce allgather broadcast reducescatter load_model callbacks
SyncBatchNormalization
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


@pytest.mark.parametrize("module_name", ["bps_tf", "bps_tf.tensorflow", "bps_tf.keras"])
def test_elastic_is_refused_with_a_reason(module_name):
    import importlib

    from bps_tf.tensorflow.not_offered import NotOfferedError

    module = importlib.import_module(module_name)
    with pytest.raises(NotOfferedError, match="fixed set of workers"):
        module.elastic
    with pytest.raises(AttributeError, match="no attribute"):
        module.no_such_name
