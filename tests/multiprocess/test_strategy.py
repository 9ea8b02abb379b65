"""BytePSStrategy across real processes (bpslaunch --local), each check against a single-process reference."""

import re

import pytest

from testing.jobs import REPO_ROOT, assert_job_ok, run_local


@pytest.mark.timeout(500)
def test_keras_3_with_several_devices_per_worker():
    """3 workers x 2 logical devices: fit and custom loops equal single-process training; evaluate, predict,
    metrics, int32, mixed precision, uneven data, XLA refused with 2 devices; sparse gradients gathered."""
    result = run_local("run_checks.py", 3, 2, "strategy_equivalence.py", 2, "--", "strategy_features.py", "--",
                       "sparse_gradients.py", 2, TF_USE_LEGACY_KERAS=0)
    for marker in ("strategy equals single-process training", "strategy features ok",
                   "sparse gradients equal single-process training"):
        assert_job_ok(result, 3, marker)


@pytest.mark.timeout(300)
def test_fits_from_one_generator_follow_each_other_and_the_job_ends_right_after():
    """fit twice and evaluate on one Python generator: each pipeline stops reading it before the next starts
    (no "generator already executing"); the last is still running when the workers exit, which must not
    hang."""
    result = run_local("generator_fits.py", 2, 1, timeout=120, TF_USE_LEGACY_KERAS=0)
    assert_job_ok(result, 2, "generator fits done")


@pytest.mark.timeout(300)
def test_one_device_per_worker_still_reduces_across_workers():
    """The single-replica shortcut of MirroredStrategy must not skip communication."""
    result = run_local("strategy_equivalence.py", 2, 1, 1, TF_USE_LEGACY_KERAS=0)
    assert_job_ok(result, 2, "strategy equals single-process training")


@pytest.mark.timeout(300)
def test_gradients_of_8_mb_are_summed_in_place_and_training_equals_one_process():
    """A hidden layer of 420000 units: its kernel's 8 MB gradient lies in the workers' shareable memory, and
    the server on the host reads and writes it there."""
    result = run_local("strategy_equivalence.py", 2, 1, 1, TF_USE_LEGACY_KERAS=0, WIDTH=420000)
    assert_job_ok(result, 2, "strategy equals single-process training")
    assert_job_ok(result, 2, "pushed in place yes")


@pytest.mark.timeout(500)
@pytest.mark.parametrize("legacy_keras", [0, 1], ids=["keras3", "tf_keras"])
def test_xla_equals_single_process_xla(tmp_path, legacy_keras):
    """jit_compile=True fit, strategy.run loops compiled with XLA, mixed precision and sparse gradients: the
    push_pulls run inside XLA's computations (found in its HLO dumps) and training equals one process's."""
    dump = tmp_path / "hlo"
    result = run_local("strategy_xla.py", 2, 1, 1, TF_USE_LEGACY_KERAS=legacy_keras, XLA_DUMP_DIR=dump,
                       XLA_FLAGS=f"--xla_dump_to={dump} --xla_dump_hlo_as_text")
    assert_job_ok(result, 2, "XLA under the strategy equals single-process XLA training")


@pytest.mark.timeout(400)
def test_tf_keras():
    result = run_local("run_checks.py", 2, 2, "strategy_equivalence.py", 2, "--", "sparse_gradients.py", 2,
                       TF_USE_LEGACY_KERAS=1)
    for marker in ("strategy equals single-process training", "sparse gradients equal single-process training"):
        assert_job_ok(result, 2, marker)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("compression", [None, "onebit,momentum=0.9"], ids=["plain", "compressed"])
def test_checkpoint_then_resume(tmp_path, compression):
    args = ("strategy_checkpoint.py", 2, 1, "interrupt", tmp_path) + ((compression,) if compression else ())
    env = {"BYTEPS_MIN_COMPRESS_BYTES": 0} if compression else {}
    interrupted = run_local(*args, **env)
    assert_job_ok(interrupted, 2, "interrupted")
    assert "[worker 1] rank 1: files []" in interrupted.stdout  # only worker 0 writes
    assert "epoch2.weights.h5" in interrupted.stdout and "'logs'" in interrupted.stdout
    assert ("bps_compression_state.npz" in interrupted.stdout) == bool(compression), interrupted.stdout[-3000:]
    resumed = run_local(*args[:3], "resume", *args[4:], **env)
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


@pytest.mark.timeout(400)
@pytest.mark.parametrize("legacy_keras", [0, 1], ids=["keras_3", "tf_keras"])
def test_multi_worker_tutorial_code_with_the_strategy_swapped(tmp_path, legacy_keras):
    """Cluster resolver, fit with ModelCheckpoint and BackupAndRestore inside the scope on shared paths,
    every worker loading the checkpoint right after fit, a variable created on worker 0 only."""
    result = run_local("strategy_real_client.py", 2, 1, tmp_path, TF_USE_LEGACY_KERAS=legacy_keras)
    assert_job_ok(result, 2, "real client code ok")
    assert (tmp_path / "model.keras").exists() and (tmp_path / "saved" / "final.keras").exists()


def _assert_uneven_results(out):
    """Every worker holds bit-identical results, equal to single-process MirroredStrategy's within float
    tolerance; predict returned every example once, in order (as the reference's rows)."""
    import numpy as np

    ranks = [dict(np.load(out / f"rank{r}.npz")) for r in range(3)]
    reference = dict(np.load(out / "reference.npz"))
    assert sorted(ranks[0]) == sorted(list(reference) + [f"xla/{key}" for key in reference]), sorted(ranks[0])
    for key in ranks[0]:
        want = reference[key.removeprefix("xla/")]  # XLA's results too equal MirroredStrategy's without it
        for r in (1, 2):
            assert np.array_equal(ranks[r][key], ranks[0][key]), f"{key}: worker {r} differs from worker 0"
        assert ranks[0][key].shape == want.shape, (key, ranks[0][key].shape, want.shape)
        np.testing.assert_allclose(ranks[0][key], want, rtol=1e-4, atol=1e-5, err_msg=key)
    assert reference["numpy/predict"].shape[0] == 1437  # the digits' training set, batches of 32 and 29


@pytest.mark.timeout(400)
@pytest.mark.parametrize("legacy_keras", [0, 1], ids=["keras3", "tf_keras"])
def test_uneven_batches_train_as_mirrored_strategy(tmp_path, legacy_keras):
    """3 workers, global batch 32 (11, 11, 10 per worker; a last batch of 29): fit from numpy, a finite and a
    repeated tf.data pipeline, evaluate and predict, with and without XLA, equal single-process
    MirroredStrategy with 3 replicas.
    First, in the same job: strategy.reduce and the Horovod API's allreduce of tensors whose shapes differ
    between workers fail within a second on every worker, naming the shapes and uneven batches."""
    result = run_local("uneven_batches.py", 3, 1, tmp_path, TF_USE_LEGACY_KERAS=legacy_keras)
    for marker in ("unequal reduce fails at once", "unequal allreduce fails at once", "uneven batches trained"):
        assert_job_ok(result, 3, marker)
    _assert_uneven_results(tmp_path)
