"""The end of an elastic job as bpslaunch sees it. The scheduler and servers exit 0 as soon as every worker left
the job (at its exit), while the workers' processes may still be exiting: code at exit, the interpreter's
teardown. A worker process started again too late to join has nothing left to do. To tell the two apart, each
worker process gets a file to create once it joined the job (bps_tf.process.init creates it)."""

import os
import shutil
import tempfile
import time

from bps_tf.launcher.child_processes import describe_exit, exit_code_of

# The variable's name is also in bps_tf/process.py, which creates the file.
JOINED_FILE = "BPSLAUNCH_JOINED_FILE"
_POLL_INTERVAL_S = 0.05


class JoinedFiles:
    """One path per worker process started, in a directory of their own."""

    def __init__(self):
        self._directory = tempfile.mkdtemp(prefix="bpslaunch_joined_")
        self._started = 0

    def environment(self, env):
        """(env for one more worker process, the path it creates once it joined the job)."""
        self._started += 1
        path = os.path.join(self._directory, str(self._started))
        return dict(env, **{JOINED_FILE: path}), path

    def remove(self):
        shutil.rmtree(self._directory, ignore_errors=True)


def end_of_elastic_job(workers, grace, output):
    """The job's scheduler and servers exited 0: its last workers finished. `workers`: the last process of each
    worker place (label, popen, joined_file). Waits up to `grace` s for those that joined the job to exit on
    their own, reports each that did not exit 0, and names those that never joined. Returns the exit code."""
    joined = [w for w in workers if w.joined_file and os.path.exists(w.joined_file)]
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(w.popen.poll() is None for w in joined):
        time.sleep(_POLL_INTERVAL_S)
    code = 0
    for worker in joined:
        returncode = worker.popen.poll()
        if returncode is None:
            output.report(f"{worker.label} did not exit within {grace:g} s after the job ended; stopping it")
            code = code or 1
        elif returncode != 0:  # it failed after its part in the job, as a worker's failure fails any job
            output.report(f"{worker.label} {describe_exit(returncode)} after the job ended")
            code = code or exit_code_of(returncode)
    # Turned away by the scheduler (the job had ended), or still starting: nothing depended on them.
    for worker in workers:
        returncode = worker.popen.poll()
        if worker not in joined and returncode != 0:
            how = "stopping it" if returncode is None else f"it {describe_exit(returncode)}"
            output.report(f"the job ended before {worker.label} joined it; {how}")
    return code
