"""The TensorFlow ops and the Horovod-compatible API across real processes (bpslaunch --local). Several
checks share one job (tests/workers/run_checks.py), each a generation of it, so that TensorFlow starts
once per process."""

import re

import pytest

from testing.jobs import REPO_ROOT, assert_job_ok, run_local


@pytest.mark.timeout(400)
def test_ops_optimizers_and_tapes_with_keras_3():
    """3 workers, 2 servers: the ops against NumPy (eager and graph), GradientTape and TF1-style training
    equal to single-process training, Keras 3 fit with 2 backward passes per step."""
    result = run_local("run_checks.py", 3, 2, "tf_ops.py", "--", "tape_equivalence.py", "--",
                       "v1_accumulation.py", "--", "keras_fit.py", 2, TF_USE_LEGACY_KERAS=0)
    for marker in ("tf ops exact", "equals single-process training", "v1 accumulation exact", "loss"):
        assert_job_ok(result, 3, marker)
    assert result.stdout.count("weights identical") == 3, result.stdout[-3000:]


@pytest.mark.timeout(300)
def test_keras_fit_with_tf_keras_trains_and_ends_with_identical_weights():
    result = run_local("run_checks.py", 2, 1, "keras_fit.py", 1, "--", "keras_fit.py", 3, TF_USE_LEGACY_KERAS=1)
    assert_job_ok(result, 2, "loss")
    assert result.stdout.count("weights identical") == 4, result.stdout[-3000:]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("example", ["keras_digits.py", "gradient_tape.py", "tf1_session.py"])
def test_example_trains_the_same_model_everywhere(example):
    result = run_local(str(REPO_ROOT / "examples" / example), 2, 1)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
    reports = re.findall(r"worker (\d): test accuracy ([0-9.]+), model fingerprint (\w+)", result.stdout)
    assert len(reports) == 2, result.stdout[-6000:]
    assert len({fingerprint for _, _, fingerprint in reports}) == 1, reports
    assert all(float(accuracy) > 0.9 for _, accuracy, _ in reports), reports
