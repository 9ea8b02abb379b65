"""The TensorFlow ops and the Horovod-compatible API across real processes (bpslaunch --local)."""

import re
import subprocess
import sys

import pytest

from jobs import REPO_ROOT, assert_job_ok, clean_env, run_local



@pytest.mark.timeout(300)
@pytest.mark.parametrize("workers", [2, 3])
def test_ops_match_numpy_in_eager_and_graph_mode(workers):
    assert_job_ok(run_local("tf_ops.py", workers, 2), workers, "tf ops exact")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("keras_flavour,workers,backward_passes", [
    ("keras3", 2, 1), ("keras3", 3, 2), ("tf_keras", 2, 1), ("tf_keras", 2, 3),
])
def test_keras_fit_trains_and_ends_with_identical_weights(keras_flavour, workers, backward_passes):
    legacy = "1" if keras_flavour == "tf_keras" else "0"
    result = run_local("keras_fit.py", workers, 1, backward_passes, TF_USE_LEGACY_KERAS=legacy)
    assert_job_ok(result, workers, "loss")
    assert result.stdout.count("weights identical") == workers


@pytest.mark.timeout(300)
@pytest.mark.parametrize("workers", [2, 3])
def test_data_parallel_training_equals_single_process_training(workers):
    assert_job_ok(run_local("tape_equivalence.py", workers, 1), workers, "equals single-process training")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("example", ["keras_digits.py", "gradient_tape.py", "tf1_session.py"])
def test_example_trains_the_same_model_everywhere(example):
    result = run_local(str(REPO_ROOT / "examples" / example), 2, 1)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
    reports = re.findall(r"worker (\d): test accuracy ([0-9.]+), model fingerprint (\w+)", result.stdout)
    assert len(reports) == 2, result.stdout[-6000:]
    assert len({fingerprint for _, _, fingerprint in reports}) == 1, reports
    assert all(float(accuracy) > 0.9 for _, accuracy, _ in reports), reports


def run_python(code, **env):
    return subprocess.run([sys.executable, "-c", code], env=clean_env(**env), capture_output=True, text=True,
                          timeout=120)


@pytest.mark.timeout(150)
def test_op_before_init_is_a_clear_error():
    result = run_python(
        "import tensorflow as tf, bps_tf as bps\n"
        "try:\n    bps.push_pull(tf.ones(2), name='x')\nexcept tf.errors.FailedPreconditionError as e:\n"
        "    print('caught', e.message)")
    assert "caught" in result.stdout and "call bps_tf.init() first" in result.stdout, result.stdout + result.stderr


@pytest.mark.timeout(150)
def test_init_without_a_role_is_a_clear_error():
    result = run_python("import bps_tf as bps\ntry:\n    bps.init()\nexcept ValueError as e:\n    print('caught', e)")
    assert "caught DMLC_ROLE is not set" in result.stdout, result.stdout + result.stderr


@pytest.mark.timeout(150)
def test_v1_optimizer_accumulates_backward_passes_in_graph_mode():
    assert_job_ok(run_local("v1_accumulation.py", 2, 1), 2, "v1 accumulation exact")
