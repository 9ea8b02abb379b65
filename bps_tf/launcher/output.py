"""What the launcher writes to the terminal: its own messages, and its children's lines prefixed by role and rank."""

import sys
import threading
import time

_MESSAGE_PREFIX = "bpslaunch: "
# Output still buffered in the pipes once every process is gone arrives within this time.
DRAIN_TIMEOUT_S = 5.0
# Longer lines are cut into pieces, so one process writing without newlines cannot use unbounded memory.
_MAX_LINE_BYTES = 1 << 16


def worker_label(worker_id, local_rank, local_size):
    """'worker 1' with one process per machine, else 'worker 1.0': machine (DMLC_WORKER_ID), then local rank."""
    return f"worker {worker_id}" if local_size == 1 else f"worker {worker_id}.{local_rank}"


def report(message):
    """Prints one launcher message on stderr."""
    print(_MESSAGE_PREFIX + message, file=sys.stderr, flush=True)


class PrefixedOutput:
    """Copies children's stdout and stderr to ours line by line, prefixing each line with `[label] `.

    One lock serialises every write, so lines of different processes never mix within a line.
    """

    def __init__(self, stdout=None, stderr=None):
        self._stdout = sys.stdout if stdout is None else stdout
        self._stderr = sys.stderr if stderr is None else stderr
        self._lock = threading.Lock()
        self._copiers = []

    def follow(self, label, process):
        """Starts copying the stdout and stderr pipes of `process` (a subprocess.Popen)."""
        for pipe, sink in ((process.stdout, self._stdout), (process.stderr, self._stderr)):
            copier = threading.Thread(
                target=self._copy_lines, args=(pipe, f"[{label}] ", sink), name=f"output of {label}", daemon=True
            )
            copier.start()
            self._copiers.append(copier)

    def report(self, message):
        """Prints one launcher message on our stderr, never inside a child's line."""
        self._write(self._stderr, _MESSAGE_PREFIX + message + "\n")

    def wait_until_drained(self, timeout):
        """Waits up to `timeout` seconds in all for every pipe to reach its end."""
        deadline = time.monotonic() + timeout
        for copier in self._copiers:
            copier.join(max(0.0, deadline - time.monotonic()))

    def _copy_lines(self, pipe, prefix, sink):
        with pipe:
            for raw_line in iter(lambda: pipe.readline(_MAX_LINE_BYTES), b""):
                line = raw_line.decode(errors="replace")
                self._write(sink, prefix + (line if line.endswith("\n") else line + "\n"))

    def _write(self, sink, text):
        with self._lock:
            try:
                sink.write(text)
                sink.flush()
            except (OSError, ValueError):
                # Our own output is gone (e.g. piped into `head`); keep draining so no child blocks on a full pipe.
                pass
