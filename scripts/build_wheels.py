#!/usr/bin/env python3
"""Builds bps_tf's wheels for every supported Python and TensorFlow line (WHEELS) that this machine has a
Python for, into dist/, and says which it built and which it skipped, and why. `make wheels` runs it after
`make build` and `make build-tf2.15`, whose native libraries it reuses.

    scripts/build_wheels.py                          # every wheel in WHEELS
    scripts/build_wheels.py --only 3.12:2.21 --out DIR

What each native library depends on (readelf -d, nm -D --undefined-only), and so what is built how often:
- libbps_core.so: neither Python nor TensorFlow (it needs only UCX and the C/C++ runtime): one for all wheels.
- _bps_ops_tf<line>.so, the op library: TensorFlow's C++ libraries (libtensorflow_framework.so.2 and, from
  2.16, libtensorflow_cc.so.2, which TensorFlow has loaded before it loads the op library) and libbps_core.so,
  no symbol of Python's: one per TensorFlow line, built against that line under any Python (TensorFlow's
  packages for different Pythons ship the same C++ libraries).
- _core.cpython-3XY-x86_64-linux-gnu.so, the pybind11 module: Python's C API (not its stable subset) and
  libbps_core.so, no TensorFlow: one per Python version, built here in a Bazel output base of that Python's
  own under ~/.cache/bps_tf, so the checkout's main build is left alone.

Each Python builds in a virtual environment under ~/.cache/bps_tf/wheel-venvs holding only setuptools and
pybind11 (pinned as in requirements.txt); the TensorFlow line a wheel is for comes from its op library.
"""

import argparse
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "bps_tf"
CACHE = Path.home() / ".cache" / "bps_tf"
VENVS = CACHE / "wheel-venvs"
BAZEL_FLAGS = ["--disk_cache=" + str(CACHE / "bazel-disk")]

# The wheels: TensorFlow line -> the Pythons it has packages for (and bps_tf supports on it).
WHEELS = {"2.21": ("3.10", "3.11", "3.12", "3.13"), "2.15": ("3.10", "3.11")}
# The make target that puts each line's op library into bps_tf/.
OP_LIBRARY_TARGETS = {"2.21": "make build", "2.15": "make build-tf2.15"}
BUILD_PACKAGES = ("setuptools", "pybind11")


def find_python(version):
    """The newest interpreter of `version` ("3.12") under pyenv, else python3.12 on PATH, else None."""
    candidates = glob.glob(str(Path.home() / ".pyenv" / "versions" / f"{version}.*" / "bin" / f"python{version}"))
    candidates.sort(key=lambda p: [int(n) for n in re.findall(r"\d+", Path(p).parent.parent.name)])
    if candidates:
        return Path(candidates[-1])
    found = shutil.which(f"python{version}")
    return Path(found) if found else None


def pins(names, requirements=REPO / "requirements.txt"):
    """`name==version` for each of `names` as pinned in the requirements file."""
    pinned = dict(line.split("==", 1) for line in requirements.read_text().split()
                  if "==" in line and not line.startswith("#"))
    return [f"{name}=={pinned[name]}" for name in names]


def python_version(python):
    return subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def run(command, **kwargs):
    print("+", " ".join(str(c) for c in command), flush=True)
    subprocess.run([str(c) for c in command], check=True, cwd=REPO, **kwargs)


def build_environment(python, version):
    """A venv of `python` with setuptools and pybind11, made once (a stamp records what it holds)."""
    venv = VENVS / f"build-py{version}"
    wanted = " ".join(pins(BUILD_PACKAGES))
    stamp = venv / ".bps_tf_build_packages"
    if not (venv / "bin" / "python").exists():
        run([python, "-m", "venv", "--clear", venv])
    if not stamp.exists() or stamp.read_text() != wanted:
        run([venv / "bin" / "python", "-m", "pip", "install", "-q", *wanted.split()])
        stamp.write_text(wanted)
    return venv / "bin" / "python"


def bazel(output_base, *args, **kwargs):
    # The server of an output base of its own exits when idle, rather than holding memory for the next run.
    return subprocess.run(["bazel", f"--output_base={output_base}", "--max_idle_secs=300", *args], cwd=REPO,
                          check=True, **kwargs)


def build_core_module(python):
    """The pybind11 module for `python` (a venv with pybind11), in that venv's own output base of this
    checkout: returns its path."""
    output_base = CACHE / ("bazel-" + hashlib.sha256(f"{REPO}:{python}".encode()).hexdigest()[:12])
    flags = [f"--repo_env=PYTHON_BIN_PATH={python}", *BAZEL_FLAGS]
    # --symlink_prefix=/ leaves the workspace's bazel-* links to the main build.
    bazel(output_base, "build", *flags, "--symlink_prefix=/", "//cc/python:_core.so")
    bin_dir = bazel(output_base, "info", *flags, "bazel-bin", capture_output=True, text=True).stdout.strip()
    return Path(bin_dir) / "cc" / "python" / "_core.so"


def core_module_for(version, python, main_python):
    """(the interpreter that builds the wheel, the pybind11 module for `version`): the main build's own
    when .venv has that Python, else one built for it."""
    if main_python.exists() and python_version(main_python) == version and (PACKAGE / "_core.so").exists():
        return main_python, PACKAGE / "_core.so"
    builder = build_environment(python, version)
    return builder, build_core_module(builder)


def build_wheel(builder, core_module, line, out):
    """One wheel from prebuilt native parts (setup.py takes them from BPS_TF_NATIVE_DIR); returns its path."""
    with tempfile.TemporaryDirectory() as native:
        shutil.copyfile(PACKAGE / "libbps_core.so", Path(native) / "libbps_core.so")
        shutil.copyfile(PACKAGE / "libbps_preload.so", Path(native) / "libbps_preload.so")
        shutil.copyfile(core_module, Path(native) / "_core.so")
        shutil.copyfile(PACKAGE / f"_bps_ops_tf{line}.so", Path(native) / f"_bps_ops_tf{line}.so")
        env = dict(os.environ, BPS_TF_NATIVE_DIR=native)
        run([builder, "-m", "pip", "wheel", ".", "--no-build-isolation", "--no-deps", "-q", "-w", out], env=env)
    tag = "cp" + python_version(builder).replace(".", "")
    return max(out.glob(f"bps_tf-*+tf{line}-{tag}-{tag}-*.whl"), key=lambda w: w.stat().st_mtime)


def wanted_wheels(only):
    everything = [(python, line) for line, pythons in WHEELS.items() for python in pythons]
    if not only:
        return everything
    chosen = [tuple(o.split(":")) for o in only]
    unknown = [f"{p}:{line}" for p, line in chosen if (p, line) not in everything]
    if unknown:
        raise SystemExit(f"no such wheel: {', '.join(unknown)} (the wheels: "
                         f"{' '.join(f'{p}:{line}' for p, line in everything)})")
    return chosen


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="PYTHON:LINE", help="e.g. 3.12:2.21 (repeatable)")
    parser.add_argument("--out", type=Path, default=REPO / "dist")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    main_python = REPO / ".venv" / "bin" / "python"

    wanted = wanted_wheels(args.only)
    needed = {f"_bps_ops_tf{line}.so": OP_LIBRARY_TARGETS[line] for _, line in wanted}
    needed["libbps_core.so"] = needed["libbps_preload.so"] = "make build"
    missing = [f"`{target}` (bps_tf/{name})" for name, target in needed.items() if not (PACKAGE / name).exists()]
    if missing:
        raise SystemExit("build the native libraries first: " + ", ".join(missing))

    built, skipped, failed = [], [], []
    for version in sorted({p for p, _ in wanted}, key=lambda v: [int(n) for n in v.split(".")]):
        lines = [line for p, line in wanted if p == version]
        python = find_python(version)
        if python is None:
            skipped += [(version, line, f"no Python {version} (looked for ~/.pyenv/versions/{version}.*/bin/"
                         f"python{version} and python{version} on PATH)") for line in lines]
            continue
        headers = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                                 capture_output=True, text=True).stdout.strip()
        if not Path(headers, "Python.h").exists():
            skipped += [(version, line, f"{python} has no Python.h (Debian: apt-get install python{version}-dev)")
                        for line in lines]
            continue
        try:
            builder, core_module = core_module_for(version, python, main_python)
            for line in lines:
                built.append((version, line, build_wheel(builder, core_module, line, args.out)))
        except subprocess.CalledProcessError as error:
            failed += [(version, line, f"{error} (its output above says why)") for line in lines
                       if line not in [b[1] for b in built if b[0] == version]]

    print("\nbps_tf wheels")
    for version, line, wheel in built:
        print(f"  built    Python {version}, TensorFlow {line}: {wheel}")
    for version, line, why in skipped:
        print(f"  skipped  Python {version}, TensorFlow {line}: {why}")
    for version, line, why in failed:
        print(f"  FAILED   Python {version}, TensorFlow {line}: {why}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
