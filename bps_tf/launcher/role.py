"""Runs this process as the scheduler or a server, as DMLC_ROLE says: `python -m bps_tf.launcher.role`."""

import contextlib
import signal
import sys

from bps_tf._native import load_core
from bps_tf.launcher.output import report
from bps_tf.launcher.stop_signals import STOP_SIGNALS


def run_this_role():
    """Validates the DMLC_* variables, then serves until the job ends; returns the process exit code."""
    with _default_stop_signals():
        try:
            core = load_core()
            core.validate_environment()
            core.run_role()
        except (ValueError, RuntimeError) as error:  # bad environment, missing core, or a failed job
            report(str(error))
            return 1
    return 0


@contextlib.contextmanager
def _default_stop_signals():
    # run_role blocks in native code, where Python signal handlers would wait until it returns: a SIGTERM
    # would be ignored. The default action ends the process at once, and the kernel closes its sockets.
    previous = {signum: signal.signal(signum, signal.SIG_DFL) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


if __name__ == "__main__":
    sys.exit(run_this_role())
