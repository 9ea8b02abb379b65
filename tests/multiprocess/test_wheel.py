"""bps_tf's wheels (scripts/build_wheels.py), installed as a user installs one: with pip into a new virtual
environment outside the repository, beside TensorFlow from the package index, and used from a temporary
directory: a NumPy job whose sums are checked, then examples/keras_strategy.py on 2 workers. And the refusal of
a wheel installed beside another TensorFlow line.

`make test` installs the wheel for Python 3.12 (a Python other than .venv's) with TensorFlow 2.21;
`make wheels-check` (BPS_TF_WHEEL_CHECK=all) every wheel of scripts/build_wheels.py this machine has a Python
for. Their virtual environments go under pytest's temporary directory."""

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from testing.jobs import REPO_ROOT, clean_env
from testing.scripts import load_script


builder = load_script("build_wheels")
ALL_WHEELS = [(python, line) for line, pythons in builder.WHEELS.items() for python in pythons]
CHECKED = ALL_WHEELS if os.environ.get("BPS_TF_WHEEL_CHECK") == "all" else [("3.12", "2.21")]
MAIN_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"  # .venv's
TF215_SITE = REPO_ROOT / ".venv-tf2.15" / "lib" / f"python{MAIN_PYTHON}" / "site-packages"
# What a user on each line installs beside the wheel: TensorFlow and the Keras bps_tf supports on it, as
# pinned for the tests. scikit-learn is the examples' data's (the newest for that Python).
REQUIREMENTS = {"2.21": REPO_ROOT / "requirements.txt", "2.15": REPO_ROOT / "requirements-tf2.15.txt"}
EXAMPLE_PACKAGES = ["scikit-learn"]
# Keras 3.15 needs Python 3.11: on 3.10, TensorFlow 2.21 comes with Keras 3.12 at most, which bps_tf supports
# too (docs/install.md).
OLDER_KERAS = {("3.10", "2.21"): "keras==3.12.4"}

NUMPY_JOB = """
import numpy as np, bps_tf, bps_tf.numpy as bps
bps.init()
rank, size = bps.rank(), bps.size()
total = bps.push_pull(np.full(1001, rank + 1, np.float32), "x", average=False)
assert np.all(total == size * (size + 1) / 2), total[:3]
print(f"rank {rank}: wheel sum exact from {bps_tf.__file__}", flush=True)
bps.shutdown()
"""


def run(command, cwd, timeout=300, venv=None, **extra_env):
    """`command` with nothing of the checkout on its path; inside `venv` as if it were activated."""
    env = clean_env(**extra_env)
    env.pop("PYTHONPATH")
    if venv is not None:
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
        env["VIRTUAL_ENV"] = str(venv)
    return subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def tail(result):
    # Without pip's notices about package locations this machine's configuration names.
    err = "\n".join(line for line in result.stderr.splitlines() if not line.startswith("WARNING: Location"))
    return result.stdout[-3000:] + err[-3000:]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    """wheels(python, line): the wheel, built by scripts/build_wheels.py on first use."""
    out = tmp_path_factory.mktemp("wheels")
    built = {}

    def wheel(python, line):
        if (python, line) not in built:
            result = run([sys.executable, REPO_ROOT / "scripts" / "build_wheels.py", "--only", f"{python}:{line}",
                          "--out", out], cwd=REPO_ROOT, timeout=1200)
            assert result.returncode == 0 and f"built    Python {python}, TensorFlow {line}" in result.stdout, \
                tail(result)
            tag = "cp" + python.replace(".", "")
            (built[python, line],) = out.glob(f"bps_tf-*+tf{line}-{tag}-{tag}-linux_x86_64.whl")
        return built[python, line]

    return wheel


def interpreter(python):
    found = builder.find_python(python)
    if found is None:
        pytest.fail(f"no Python {python} on this machine: the wheels are tried with the Pythons under pyenv "
                    f"(`pyenv install {python}`)")
    return found


def new_environment(directory, python, *packages, shared_site=None):
    """A virtual environment of `python` with `packages` pip-installed; with `shared_site`, a site-packages
    directory it also sees (after its own), and the packages are installed without their dependencies."""
    made = run([python, "-m", "venv", directory], cwd=directory.parent)
    assert made.returncode == 0, made.stderr
    venv_python = directory / "bin" / "python"
    if shared_site is not None:
        site = Path(run([venv_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        cwd=directory).stdout.strip())
        (site / "shared_packages.pth").write_text(f"{shared_site}\n")
    extra = ["--no-deps"] if shared_site is not None else []
    installed = run([venv_python, "-m", "pip", "install", "-q", *extra, *packages], cwd=directory, timeout=1200)
    assert installed.returncode == 0, tail(installed)
    return venv_python


def test_each_wheel_names_its_tensorflow_line_and_holds_its_native_parts(wheels):
    tag = "cp" + MAIN_PYTHON.replace(".", "")
    for line, other in (("2.21", "2.15"), ("2.15", "2.21")):
        wheel = wheels(MAIN_PYTHON, line)
        assert wheel.name.startswith("bps_tf-") and f"+tf{line}-{tag}-{tag}-linux_x86_64.whl" in wheel.name
        names = set(zipfile.ZipFile(wheel).namelist())
        assert {"bps_tf/libbps_core.so", "bps_tf/libbps_preload.so", f"bps_tf/_bps_ops_tf{line}.so",
                f"bps_tf/_core.cpython-{tag[2:]}-x86_64-linux-gnu.so"} <= names, sorted(names)
        assert f"bps_tf/_bps_ops_tf{other}.so" not in names  # one line's op library only
        assert any(n.endswith("entry_points.txt") for n in names)
        metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA")))
        assert re.search(rf"^Version: [\d.]+\+tf{re.escape(line)}$", metadata.decode(), re.M), metadata


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("python,line", CHECKED, ids=[f"py{p}-tf{line}" for p, line in CHECKED])
def test_a_new_environment_with_the_wheel_and_tensorflow_trains(wheels, tmp_path, python, line):
    wheel = wheels(python, line)
    venv = tmp_path / "env"
    tensorflow = builder.pins(["tensorflow-cpu", "keras"], REQUIREMENTS[line])
    if (python, line) in OLDER_KERAS:
        tensorflow = [tensorflow[0], OLDER_KERAS[python, line]]
    venv_python = new_environment(venv, interpreter(python), wheel, *tensorflow, *EXAMPLE_PACKAGES)
    work = tmp_path / "job"
    work.mkdir()
    (work / "numpy_job.py").write_text(NUMPY_JOB)
    shutil.copy(REPO_ROOT / "examples" / "keras_strategy.py", work / "keras_strategy.py")
    launch = ["bpslaunch", "--local", "--workers", "2", "--servers", "1", "--", "python"]

    result = run([*launch, "numpy_job.py"], cwd=work, venv=venv)
    assert result.returncode == 0, tail(result)
    for rank in (0, 1):
        assert f"rank {rank}: wheel sum exact from {venv}" in result.stdout, tail(result)

    result = run([*launch, "keras_strategy.py"], cwd=work, venv=venv, timeout=600)
    assert result.returncode == 0, tail(result)
    accuracies = [float(a) for a in re.findall(r"worker \d: test loss [\d.]+, test accuracy ([\d.]+)", result.stdout)]
    assert len(accuracies) == 2 and min(accuracies) > 0.9, tail(result)
    where = run([venv_python, "-c", "import bps_tf; print(bps_tf.__file__)"], cwd=work).stdout
    assert str(venv) in where


@pytest.mark.timeout(900)
def test_a_wheel_beside_another_tensorflow_line_names_the_wheel_to_take(wheels, tmp_path):
    if not TF215_SITE.exists():
        pytest.fail(f"{TF215_SITE} is missing: `make test` creates it (scripts/setup_tf2.15.sh)")
    wheel = wheels(MAIN_PYTHON, "2.21")
    python = new_environment(tmp_path / "env", Path(sys.base_prefix) / "bin" / "python3", wheel,
                             shared_site=TF215_SITE)
    result = run([python, "-c", "import bps_tf.tensorflow"], cwd=tmp_path)
    assert result.returncode != 0
    wanted = wheel.name.replace("+tf2.21-", "+tf2.15-")
    assert "not built for TensorFlow 2.15.1" in result.stderr and wanted in result.stderr, result.stderr[-2000:]
