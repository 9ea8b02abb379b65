"""Joining and leaving the job, and the process's place in it."""

import atexit

from bps_tf._native import load_core

_core = load_core()
_atexit_registered = False


def init():
    """Joins the job described by the DMLC_* environment (bpslaunch sets it). Blocks until every server and
    worker joined, or BYTEPS_TIMEOUT passes."""
    global _atexit_registered
    _core.init()
    if not _atexit_registered:
        atexit.register(_shutdown_at_exit)
        _atexit_registered = True


def shutdown():
    """Leaves the job: waits for this worker's operations, then for the other workers to finish."""
    _core.shutdown()


def _shutdown_at_exit():
    if _core.is_initialized():
        try:
            _core.shutdown()
        except Exception as error:  # exiting anyway: report, never raise from atexit
            print(f"bps_tf: shutdown at exit failed: {error}")


def is_initialized():
    return _core.is_initialized()


def rank():
    """This worker process's rank: DMLC_WORKER_ID * local_size + local_rank."""
    return _core.rank()


def size():
    """The number of worker processes in the job."""
    return _core.size()


def local_rank():
    return _core.local_rank()


def local_size():
    return _core.local_size()
