"""The wheel: built from this checkout with `pip wheel . --no-build-isolation`, installed into new virtual
environments outside the repository, and used from a temporary directory: a NumPy-only job, a TensorFlow
Keras job, and the refusal of an op library built for another TensorFlow line."""

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from testing.jobs import REPO_ROOT, clean_env

MAIN_SITE = Path(sysconfig.get_paths()["purelib"])  # this environment's packages (TensorFlow 2.21)
TF215_SITE = REPO_ROOT / ".venv-tf2.15" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / \
    "site-packages"

NUMPY_JOB = """
import numpy as np, bps_tf, bps_tf.numpy as bps
bps.init()
rank, size = bps.rank(), bps.size()
total = bps.push_pull(np.full(1001, rank + 1, np.float32), "x", average=False)
assert np.all(total == size * (size + 1) / 2), total[:3]
print(f"rank {rank}: wheel sum exact from {bps_tf.__file__}", flush=True)
bps.shutdown()
"""


def run(command, cwd, timeout=300):
    env = clean_env()
    env.pop("PYTHONPATH")  # nothing from the checkout: only what the environment has installed
    return subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    built = run([sys.executable, "-m", "pip", "wheel", str(REPO_ROOT), "--no-build-isolation", "--no-deps", "-w", out],
                cwd=out, timeout=1200)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (path,) = out.glob("bps_tf-*.whl")
    return path


def new_environment(directory, wheel, packages_from=None):
    """A virtual environment with the wheel; `packages_from`: a site-packages directory it also sees
    (after its own), else the wheel's dependencies come from the package index."""
    made = run([Path(sys.base_prefix) / "bin" / "python3", "-m", "venv", directory], cwd=directory.parent)
    assert made.returncode == 0, made.stderr
    python = directory / "bin" / "python"
    if packages_from is not None:
        site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        cwd=directory).stdout.strip())
        (site / "shared_packages.pth").write_text(f"{packages_from}\n")
    extra = ["--no-deps"] if packages_from is not None else []
    installed = run([python, "-m", "pip", "install", "-q", *extra, wheel], cwd=directory, timeout=600)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return python


def test_the_wheel_names_its_tensorflow_line_and_holds_the_native_parts(wheel):
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert "+tf2.21-" in wheel.name and wheel.name.endswith("-linux_x86_64.whl")
    assert {"bps_tf/libbps_core.so", "bps_tf/_bps_ops_tf2.21.so"} <= set(names)
    assert any(n.startswith("bps_tf/_core.") and n.endswith(".so") for n in names)
    assert any(n.endswith("entry_points.txt") for n in names)


@pytest.mark.timeout(900)
def test_a_numpy_job_from_the_installed_wheel(wheel, tmp_path):
    python = new_environment(tmp_path / "env", wheel)
    work = tmp_path / "job"
    work.mkdir()
    (work / "job.py").write_text(NUMPY_JOB)
    result = run([python.parent / "bpslaunch", "--local", "--workers", "2", "--servers", "1", "--", python, "job.py"],
                 cwd=work)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for rank in (0, 1):
        assert f"rank {rank}: wheel sum exact from {tmp_path / 'env'}" in result.stdout, result.stdout[-3000:]


@pytest.mark.timeout(900)
def test_a_keras_job_from_the_installed_wheel(wheel, tmp_path):
    python = new_environment(tmp_path / "env", wheel, packages_from=MAIN_SITE)
    work = tmp_path / "job"
    work.mkdir()
    shutil.copy(REPO_ROOT / "examples" / "keras_digits.py", work / "keras_digits.py")
    result = run([python.parent / "bpslaunch", "--local", "--workers", "2", "--servers", "1", "--", python,
                  "keras_digits.py"], cwd=work)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("test accuracy") == 2, result.stdout[-3000:]
    where = run([python, "-c", "import bps_tf; print(bps_tf.__file__)"], cwd=work).stdout
    assert str(tmp_path / "env") in where


@pytest.mark.timeout(900)
def test_the_wheel_under_another_tensorflow_line_says_so(wheel, tmp_path):
    if not TF215_SITE.exists():
        pytest.fail(f"{TF215_SITE} is missing: `make test` creates it (scripts/setup_tf2.15.sh)")
    python = new_environment(tmp_path / "env", wheel, packages_from=TF215_SITE)
    result = run([python, "-c", "import bps_tf.tensorflow"], cwd=tmp_path)
    assert result.returncode != 0
    assert "not built for TensorFlow 2.15.1" in result.stderr and "_bps_ops_tf2.21.so" in result.stderr, \
        result.stderr[-2000:]
