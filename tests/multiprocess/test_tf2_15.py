"""The second TensorFlow line: TensorFlow 2.15 with tf.estimator and Keras 2 (.venv-tf2.15, made by
scripts/setup_tf2.15.sh; its op library by scripts/build_ops.sh, both run by `make test`). Workers run that
Python; bpslaunch, the scheduler and the servers are the main environment's."""

import glob
import re
import subprocess
import tempfile

import pytest

from testing.jobs import REPO_ROOT, assert_job_ok, clean_env, run_local

TF215_PYTHON = REPO_ROOT / ".venv-tf2.15" / "bin" / "python"


@pytest.fixture(scope="module")
def python():
    if not TF215_PYTHON.exists():
        pytest.fail(f"{TF215_PYTHON} is missing: `make test` creates it (scripts/setup_tf2.15.sh, then "
                    "scripts/build_ops.sh .venv-tf2.15/bin/python)")
    return TF215_PYTHON


def run_python(python, code):
    return subprocess.run([str(python), "-c", code], env=clean_env(), capture_output=True, text=True, timeout=120)


def test_every_private_target_holds_and_versions_are_named(python):
    result = run_python(python, """
import tensorflow as tf
from bps_tf import compat
assert compat.keras_in_use() == "tf_keras" and compat.keras2_module_name() == "keras"
for part in (compat.OPS, compat.HOROVOD_API, compat.STRATEGY):
    compat.check_part(part)
for target in compat.TARGETS:
    if compat.installed_version(target.package):
        assert compat.problem(target) is None, (target.key, compat.problem(target))
compat.SUPPORTED_VERSIONS[compat.STRATEGY]["tensorflow"] = ("2.21",)
compat.checker._checked.clear()
try:
    compat.check_part(compat.STRATEGY)
except compat.IncompatibleVersionError as error:
    print(error)
""")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "tensorflow 2.15.1 was not tested with bps_tf's strategy" in result.stdout
    assert "installed: tensorflow 2.15.1, tf_keras 2.15.0" in result.stdout, result.stdout


def test_an_op_library_built_for_another_line_is_refused_clearly(python):
    result = run_python(python, """
from bps_tf import compat
compat.op_library_name = lambda: "_bps_ops_tf2.99.so"
import bps_tf.ops
""")
    assert result.returncode != 0
    assert "not built for TensorFlow 2.15.1" in result.stderr and "scripts/build_ops.sh" in result.stderr
    assert "_bps_ops_tf2.15.so" in result.stderr and "_bps_ops_tf2.21.so" in result.stderr  # the ones built


@pytest.mark.timeout(500)
def test_ops_and_the_horovod_api(python):
    """Every collective against NumPy, the ops' misuse errors, the Keras 2 module and a Horovod Keras job,
    TF1 gradient accumulation."""
    result = run_local("run_checks.py", 2, 1, "horovod_collectives.py", "--", "tf_ops.py", "--",
                       "horovod_keras_module.py", "--", "horovod_keras_job.py", "--", "v1_accumulation.py",
                       python=python, timeout=400)
    for marker in ("horovod collectives exact", "tf ops exact", "keras module exact", "horovod keras job",
                   "v1 accumulation exact"):
        assert_job_ok(result, 2, marker)


@pytest.mark.timeout(400)
def test_bytepsstrategy_with_keras_2(python, tmp_path):
    result = run_local("run_checks.py", 2, 1, "strategy_equivalence.py", 2, "--", "sparse_gradients.py", 2, "--",
                       "strategy_real_client.py", tmp_path, 2, python=python)
    for marker in ("strategy equals single-process training", "sparse gradients equal single-process training",
                   "real client code ok"):
        assert_job_ok(result, 2, marker)


def _estimator_job(python, workers, model_dir):
    result = run_local(str(REPO_ROOT / "examples" / "estimator_digits.py"), workers, 1, model_dir, python=python)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
    reports = re.findall(r"worker (\d): test accuracy ([0-9.]+), model fingerprint (\w+), steps (\d+)", result.stdout)
    assert len(reports) == workers, result.stdout[-6000:]
    return reports


@pytest.mark.timeout(400)
def test_estimator_job_follows_single_process_training(python, tmp_path):
    scratch_before = set(glob.glob(f"{tempfile.gettempdir()}/bps_tf_estimator_worker*"))
    two = _estimator_job(python, 2, tmp_path / "two")
    one = _estimator_job(python, 1, tmp_path / "one")
    assert len({fingerprint for _, _, fingerprint, _ in two}) == 1, two  # identical variables everywhere
    assert len({accuracy for _, accuracy, _, _ in two}) == 1, two  # global evaluation metrics
    assert abs(float(two[0][1]) - float(one[0][1])) <= 0.01 and float(one[0][1]) > 0.9, (two, one)
    assert all(steps == "400" for _, _, _, steps in two)
    # Worker 0 alone wrote the model directory: one checkpoint per save, one training event file, one
    # evaluation event file; the other workers' scratch directories are gone.
    written = sorted(p.name for p in (tmp_path / "two").iterdir())
    assert [n for n in written if n.endswith(".index")] == [f"model.ckpt-{s}.index" for s in (0, 100, 200, 300, 400)]
    assert len([n for n in written if n.startswith("events.out")]) == 1, written
    assert len(list((tmp_path / "two" / "eval").iterdir())) == 1
    assert set(glob.glob(f"{tempfile.gettempdir()}/bps_tf_estimator_worker*")) == scratch_before


@pytest.mark.timeout(300)
def test_estimator_train_distribute_is_refused_clearly(python):
    assert_job_ok(run_local("estimator_refuses_strategy.py", 2, 1, python=python), 2, "train_distribute refused")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("example", ["keras_digits.py", "tf1_session.py"])
def test_horovod_examples(python, example):
    result = run_local(str(REPO_ROOT / "examples" / example), 2, 1, python=python)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
    reports = re.findall(r"worker (\d): test accuracy ([0-9.]+), model fingerprint (\w+)", result.stdout)
    assert len(reports) == 2 and len({f for _, _, f in reports}) == 1, reports
    assert all(float(accuracy) > 0.9 for _, accuracy, _ in reports), reports
