"""The TensorFlow settings workers start with (bps_tf/tf_environment.py): set by bpslaunch for workers only,
kept where the user chose otherwise, and in effect in TensorFlow once bps_tf's TensorFlow layer is imported."""

import subprocess
import sys

import pytest

from bps_tf import tf_environment
from bps_tf.launcher.local_env import job_environment, role_environment
from testing.jobs import clean_env

BFC = tf_environment.ALLOCATOR_VARIABLE
LIMIT = tf_environment.ALLOCATOR_LIMIT_VARIABLE


def test_workers_get_the_bfc_allocator_capped_at_the_machine_memory():
    job = job_environment({}, 2, 1, 9000)
    worker = role_environment(job, "worker", 0)
    assert worker[BFC] == "true"
    assert int(worker[LIMIT]) > 0
    for role in ("scheduler", "server"):  # they run no TensorFlow
        assert BFC not in role_environment(job, role)


def test_a_setting_the_user_made_is_kept():
    job = job_environment({BFC: "false", LIMIT: "1024"}, 1, 1, 9000)
    worker = role_environment(job, "worker", 0)
    assert (worker[BFC], worker[LIMIT]) == ("false", "1024")


# TensorFlow reads the allocator's variables when its first op creates the CPU allocator. Without
# TF_CPU_ALLOCATOR_USE_BFC it takes the highest-priority registered allocator: oneDNN's (which keeps statistics)
# where oneDNN is on by default (CPUs with AVX512_VNNI, AMX, ...), the plain one (which keeps none) elsewhere.
# The probe turns oneDNN off so that only the BFC allocator keeps statistics, on any CPU.
_PROBE = """
import os
import tensorflow as tf
{import_bps_tf}
print(os.environ.get("TF_CPU_ALLOCATOR_USE_BFC"))
tf.ones([1000]) * 2  # TensorFlow's first op creates its CPU allocator
try:
    tf.config.experimental.get_memory_info("CPU:0")
    print("bfc")
except ValueError:
    print("default")
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("import_bps_tf, env, variable, allocator", [
    ("import bps_tf.ops", {}, "true", "bfc"),
    ("from bps_tf.strategy import BytePSStrategy", {}, "true", "bfc"),
    ("import bps_tf.ops", {BFC: "false"}, "false", "default"),
    ("", {}, "None", "default"),  # TensorFlow's own default: what the probe tells apart
])
def test_importing_bps_tf_before_the_first_op_selects_the_allocator(import_bps_tf, env, variable, allocator):
    probe = _PROBE.format(import_bps_tf=import_bps_tf)
    base = {k: v for k, v in clean_env().items() if k not in (BFC, LIMIT)}
    env = dict(base, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0", **env)
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=110)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == [variable, allocator]
