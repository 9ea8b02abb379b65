"""BytePSStrategy across real processes (bpslaunch --local), each check against a single-process reference."""

import re

import pytest

from jobs import REPO_ROOT, assert_job_ok, run_local



@pytest.mark.timeout(300)
@pytest.mark.parametrize("workers,local_devices,legacy_keras", [
    (2, 2, "0"),  # the proof: 2 workers x 2 logical CPU devices
    (2, 1, "0"),  # one device per worker: the single-replica shortcut must not skip communication
    (3, 2, "0"),
    (2, 2, "1"),  # tf-keras
])
def test_training_equals_single_process_training(workers, local_devices, legacy_keras):
    result = run_local("strategy_equivalence.py", workers, 1, local_devices, TF_USE_LEGACY_KERAS=legacy_keras)
    assert_job_ok(result, workers, "strategy equals single-process training")


@pytest.mark.timeout(400)
@pytest.mark.parametrize("workers", [2, 3])
def test_evaluate_predict_metrics_int32_mixed_precision_uneven_data_and_xla(workers):
    result = run_local("strategy_features.py", workers, 2)
    assert_job_ok(result, workers, "strategy features ok")


@pytest.mark.timeout(400)
def test_checkpoint_then_resume(tmp_path):
    interrupted = run_local("strategy_checkpoint.py", 2, 1, "interrupt", tmp_path)
    assert_job_ok(interrupted, 2, "interrupted")
    assert "[worker 1] rank 1: files []" in interrupted.stdout  # only worker 0 writes
    assert "epoch2.weights.h5" in interrupted.stdout and "'logs'" in interrupted.stdout
    resumed = run_local("strategy_checkpoint.py", 2, 1, "resume", tmp_path)
    assert_job_ok(resumed, 2, "resumed run equals uninterrupted run")
    assert "[worker 1] rank 1: files []" in resumed.stdout


@pytest.mark.timeout(300)
@pytest.mark.parametrize("example", ["keras_strategy.py", "custom_loop.py"])
def test_strategy_example_trains_to_a_good_test_accuracy(example):
    result = run_local(str(REPO_ROOT / "examples" / example), 2, 1)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
    accuracies = re.findall(r"worker (\d): test (?:loss [0-9.]+, test )?accuracy ([0-9.]+)", result.stdout)
    assert len(accuracies) == 2, result.stdout[-6000:]
    assert accuracies[0][1] == accuracies[1][1] and float(accuracies[0][1]) > 0.9, accuracies


@pytest.mark.timeout(300)
@pytest.mark.parametrize("workers,local_devices,legacy_keras", [(2, 2, "0"), (3, 1, "1")])
def test_sparse_gradients_are_gathered_and_equal_single_process_training(workers, local_devices, legacy_keras):
    result = run_local("sparse_gradients.py", workers, 2, local_devices, TF_USE_LEGACY_KERAS=legacy_keras)
    assert_job_ok(result, workers, "sparse gradients equal single-process training")
