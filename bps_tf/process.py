"""Joining and leaving the job, and the process's place in it.

A worker process joins the job at its first init() and may run several generations in it: shutdown() ends
one once every worker has, init() starts the next. At exit the process leaves the job. An uncaught
exception ends the whole job at once, every worker naming this one and the exception.
"""

import atexit
import os
import sys
import traceback

from bps_tf._native import load_core

_core = load_core()
_hooks_installed = False
_generation_callbacks = []


def on_generation_start(callback):
    """Runs `callback()` at every init() from now on, once the generation started: the servers then know
    nothing of the last one (asynchronous training's weights are initialised again). It runs again when an
    elastic worker's collectives become the job's (pushes_were_local)."""
    _generation_callbacks.append(callback)


def pushes_were_local():
    """What this worker pushed since the generation started never reached the servers (an elastic worker's
    collectives were local until its state was synchronised): the on_generation_start callbacks run again."""
    _servers_know_nothing_of_this_worker()


def _servers_know_nothing_of_this_worker():
    for callback in list(_generation_callbacks):
        callback()


def init():
    """Joins the job described by the DMLC_* environment (bpslaunch sets it), or starts a new generation
    of it after shutdown(). Blocks until every server and worker joined, or BYTEPS_TIMEOUT passes."""
    _core.init()
    _install_hooks()
    _tell_the_launcher()
    _servers_know_nothing_of_this_worker()


def shutdown():
    """Ends this worker's generation: waits for its operations, then for the other workers to finish."""
    _core.shutdown()


def join():
    """Ends this worker's part in the current work without ending it for the others: until every worker has
    called join(), their push_pulls complete without this one (it contributes zeros to sums and is left
    out of min, max and product). Returns the rank of the last worker to call join(); this worker then
    continues with a new generation (as after shutdown() and init())."""
    return _core.join()


def _install_hooks():
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(_leave_at_exit)
    previous = sys.excepthook

    def abort_job_then(exc_type, exc, tb):
        # Without this the other workers would wait for this one's push_pulls until BYTEPS_TIMEOUT.
        why = "".join(traceback.format_exception_only(exc_type, exc)).strip()
        try:
            _core.abort(f"uncaught {why}")
        finally:
            previous(exc_type, exc, tb)

    sys.excepthook = abort_job_then


def _tell_the_launcher():
    # bpslaunch waits for the worker processes that joined an elastic job to exit on their own once it ended,
    # and stops the ones started too late to join (bps_tf/launcher/elastic_end.py).
    path = os.environ.get("BPSLAUNCH_JOINED_FILE")
    if path:
        try:
            open(path, "a").close()
        except OSError:
            pass  # bpslaunch then stops this process once the job ended, as one that never joined


def _leave_at_exit():
    try:
        _core.leave()  # ends the generation first if shutdown() was not called
    except Exception as error:  # exiting anyway: report, never raise from atexit
        print(f"bps_tf: leaving the job at exit failed: {error}", file=sys.stderr)


def is_initialized():
    return _core.is_initialized()


def is_elastic():
    """Whether this process's job is elastic (bpslaunch --min-workers/--max-workers): its size and this
    worker's rank may change from one generation to the next. Known once init() joined it."""
    return bool(_core.elastic_state()["elastic"])


def is_async():
    """Whether the job trains asynchronously (BYTEPS_ENABLE_ASYNC=1 or BYTEPS_STALENESS set): the servers hold
    the weights, and a push_pull sends a change of them and returns them (docs/strategy.md)."""
    if not _core.is_initialized():  # as init() will read it (and check it)
        return os.environ.get("BYTEPS_ENABLE_ASYNC") == "1" or bool(os.environ.get("BYTEPS_STALENESS"))
    return bool(_core.training_mode()["async"])


def staleness():
    """BYTEPS_STALENESS: how many steps a worker may lead the slowest; None when unbounded or synchronous."""
    value = _core.training_mode()["staleness"]
    return None if value < 0 else int(value)


def rank():
    """This worker process's rank: DMLC_WORKER_ID * local_size + local_rank."""
    return _core.rank()


def size():
    """The number of worker processes in the job."""
    return _core.size()


def backup_workers():
    """BYTEPS_BACKUP_WORKERS: how many workers' pushes each round of a gradient completes without (0: none, also
    before init())."""
    return _core.backup_workers()


def local_rank():
    return _core.local_rank()


def local_size():
    return _core.local_size()
