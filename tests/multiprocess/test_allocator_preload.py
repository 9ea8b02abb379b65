"""bpslaunch preloads jemalloc (bps_tf/launcher/allocator.py) into the processes it starts, real ones: the
workers, scheduler and servers of a --local job, and a server started by hand with DMLC_ROLE, which replaces
itself with one that has it. Where jemalloc is not installed, nothing is preloaded and the jobs run as well."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from bps_tf.launcher import allocator
from testing.jobs import BPSLAUNCH, clean_env, free_port

INSTALLED = allocator.find_jemalloc() is not None

# Each worker prints whether jemalloc is mapped into it, and the same for its parent's other children (the
# scheduler and servers of a --local job are the worker's siblings).
REPORT = """
import os
import bps_tf.numpy as bps
bps.init()
def mapped(pid):
    try:
        return 'libjemalloc' in open(f'/proc/{pid}/maps').read()
    except OSError:
        return None
siblings = []
for entry in os.listdir('/proc'):
    if entry.isdigit() and int(entry) != os.getpid():
        try:
            stat = open(f'/proc/{entry}/stat').read()
        except OSError:
            continue
        if int(stat.rsplit(')', 1)[1].split()[1]) == os.getppid():
            siblings.append(mapped(entry))
print('me', mapped(os.getpid()), 'siblings', sorted(s for s in siblings if s is not None))
bps.shutdown()
"""


def run_job(**env):
    command = [BPSLAUNCH, "--local", "--workers", "1", "--servers", "1", "--timeout", "60", "--",
               sys.executable, "-c", REPORT]
    environment = clean_env(**env)
    environment.pop("LD_PRELOAD", None)  # (what the tests' own shell may preload)
    result = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if "] me " in line)
    return line.split("] ", 1)[1]


@pytest.mark.timeout(150)
def test_every_process_of_a_local_job_runs_with_jemalloc_where_installed():
    # The scheduler, the server and the worker.
    expected = "True" if INSTALLED else "False"
    assert run_job() == f"me {expected} siblings [{expected}, {expected}]"


@pytest.mark.timeout(150)
def test_system_allocator_preloads_nothing():
    assert run_job(BYTEPS_ALLOCATOR="system") == "me False siblings [False, False]"


@pytest.mark.timeout(60)
def test_a_server_started_by_hand_restarts_itself_with_jemalloc(tmp_path):
    env = clean_env(DMLC_ROLE="server", DMLC_NUM_WORKER=1, DMLC_NUM_SERVER=1, DMLC_PS_ROOT_URI="127.0.0.1",
                    DMLC_PS_ROOT_PORT=free_port(), DMLC_NODE_HOST="127.0.0.1", BYTEPS_JOB_SECRET="s" * 32,
                    BYTEPS_TIMEOUT=30)
    env.pop("LD_PRELOAD", None)
    log = open(tmp_path / "server.log", "w")
    server = subprocess.Popen([BPSLAUNCH], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        # It waits for a scheduler that is not there; meanwhile its process shows what it runs with.
        # (The preload is mapped before the new program's first instruction, so once its command line shows,
        # its memory map shows the library too.)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
            if b"bps_tf.launcher.role" in cmdline or (not INSTALLED and b"bpslaunch" in b" ".join(cmdline)):
                break
            time.sleep(0.1)
        time.sleep(1)  # long enough for a process that were to restart to have done it
        cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
        maps = Path(f"/proc/{server.pid}/maps").read_text()
        assert server.poll() is None, (tmp_path / "server.log").read_text()
        assert (b"bps_tf.launcher.role" in cmdline) == INSTALLED  # the same process, replaced
        assert ("libjemalloc" in maps) == INSTALLED
    finally:
        server.kill()
        server.wait()
        log.close()
