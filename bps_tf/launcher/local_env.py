"""Environment of each process of a --local job: the DMLC_* variables of a ps-lite job on loopback."""

import secrets
import socket

from bps_tf import tf_environment
from bps_tf.launcher import allocator

LOOPBACK_ADDRESS = "127.0.0.1"


def find_free_port():
    """A TCP port that nobody listens on now, found by binding port 0 (the scheduler binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK_ADDRESS, 0))
        return probe.getsockname()[1]


def job_environment(base, num_workers, num_servers, port, elastic=None):
    """`base` (the user's environment, BYTEPS_* included) plus what every process of the job shares: among
    it a fresh job secret, unless the user chose one (BYTEPS_JOB_SECRET or BYTEPS_JOB_SECRET_FILE), and an
    elastic job's limits, `elastic` = (min workers, max workers)."""
    env = dict(base)
    if elastic is not None:
        env.update(BYTEPS_MIN_WORKERS=str(elastic[0]), BYTEPS_MAX_WORKERS=str(elastic[1]))
    if not env.get("BYTEPS_JOB_SECRET") and not env.get("BYTEPS_JOB_SECRET_FILE"):
        env["BYTEPS_JOB_SECRET"] = secrets.token_hex(32)
    env.update({
        "DMLC_NUM_WORKER": str(num_workers),
        "DMLC_NUM_SERVER": str(num_servers),
        "DMLC_PS_ROOT_URI": LOOPBACK_ADDRESS,
        "DMLC_PS_ROOT_PORT": str(port),
        "DMLC_NODE_HOST": LOOPBACK_ADDRESS,
        # Output goes through pipes; unbuffered, each line shows up when it is printed, not at exit.
        "PYTHONUNBUFFERED": "1",
    })
    # Only workers have an id and a local rank; ones left in the user's shell must not reach the scheduler or
    # servers, and --local-size decides the workers' (not a BYTEPS_LOCAL_SIZE left in the shell).
    for name in ("DMLC_WORKER_ID", "BYTEPS_LOCAL_SIZE", "BYTEPS_LOCAL_RANK"):
        env.pop(name, None)
    return env


def role_environment(job_env, role, worker_id=None, local_rank=0, local_size=1):
    """The environment of one process: `role` is scheduler, server or worker.

    A worker runs on machine `worker_id` as process `local_rank` of the machine's `local_size`, with the
    TensorFlow settings of tf_environment. Every process preloads the malloc of launcher/allocator.py.
    """
    env = allocator.apply(dict(job_env, DMLC_ROLE=role))
    if worker_id is not None:
        tf_environment.apply(env)
        env.update(DMLC_WORKER_ID=str(worker_id), BYTEPS_LOCAL_RANK=str(local_rank),
                   BYTEPS_LOCAL_SIZE=str(local_size))
    return env
