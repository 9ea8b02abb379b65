"""The Horovod API (bps_tf.tensorflow, bps_tf.keras) across real processes, under Keras 3 and tf-keras, with
2 and 3 workers: every collective against NumPy, process sets, the Keras module, and a Horovod-style Keras
job (unbuilt Sequential, the four callbacks, checkpoints on worker 0, loaded back everywhere) ending with
identical weights."""

import pytest

from testing.jobs import assert_job_ok, run_local

SCRIPTS = ("horovod_collectives.py", "--", "horovod_keras_module.py", "--", "horovod_keras_job.py")
MARKERS = ("horovod collectives exact", "keras module exact", "horovod keras job")


@pytest.mark.timeout(500)
def test_three_workers_with_keras_3(tmp_path):
    result = run_local("run_checks.py", 3, 2, *SCRIPTS, TF_USE_LEGACY_KERAS=0, CHECKPOINT_DIR=tmp_path, timeout=400)
    for marker in MARKERS:
        assert_job_ok(result, 3, marker)
    assert (tmp_path / "checkpoint-4.keras").exists()


@pytest.mark.timeout(500)
def test_two_workers_with_tf_keras(tmp_path):
    result = run_local("run_checks.py", 2, 1, *SCRIPTS, TF_USE_LEGACY_KERAS=1, CHECKPOINT_DIR=tmp_path, timeout=400)
    for marker in MARKERS:
        assert_job_ok(result, 2, marker)
    assert (tmp_path / "checkpoint-4.h5").exists()
