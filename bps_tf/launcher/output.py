"""What the launcher writes to the terminal: its own messages, and its children's output prefixed by role and rank.

Children's output is cut into segments that each end in `\\n` or `\\r`: a line, or one redraw of a progress bar.
Every segment gets its process's prefix, so progress bars of several workers stay attributed and still redraw in
place on a terminal. A segment is shown once its terminator arrives: a bar that starts each redraw with `\r`
shows a redraw when the next one begins.
"""

import collections
import re
import sys
import threading
import time

from bps_tf.launcher.child_processes import describe_exit

_MESSAGE_PREFIX = "bpslaunch: "
# Output still buffered in the pipes once every process is gone arrives within this time.
DRAIN_TIMEOUT_S = 5.0
# Longer lines are cut into pieces, so one process writing without newlines cannot use unbounded memory.
_MAX_LINE_BYTES = 1 << 16
# Upper bound of one read from a pipe; a read returns whatever is there, without waiting for more.
_READ_BYTES = 1 << 16
# Lines of stderr kept from each worker whose output is hidden, shown if it fails.
HIDDEN_TAIL_LINES = 50

# `\r\n` first: it ends one line, not a redraw followed by an empty line.
_TERMINATOR = re.compile(rb"\r\n|\r|\n")
_UTF8_CONTINUATION_MASK, _UTF8_CONTINUATION_BITS = 0xC0, 0x80


def worker_label(worker_id, local_rank, local_size):
    """'worker 1' with one process per machine, else 'worker 1.0': machine (DMLC_WORKER_ID), then local rank."""
    return f"worker {worker_id}" if local_size == 1 else f"worker {worker_id}.{local_rank}"


def worker_rank(worker_id, local_rank, local_size):
    """A worker's rank in the job, numbered machine by machine as the core numbers them."""
    return worker_id * local_size + local_rank


def parse_output_ranks(text):
    """'0' or '0,2' -> frozenset of ranks; ValueError with a message that says what is expected."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() and part.isascii() for part in parts):
        raise ValueError(f"expected worker ranks as non-negative integers separated by commas, e.g. 0 or 0,2; "
                         f"got {text!r}")
    return frozenset(int(part) for part in parts)


def is_shown(rank, output_ranks):
    """Whether the output of the worker of this rank goes to the terminal (output_ranks None: every worker's)."""
    return output_ranks is None or rank in output_ranks


def report(message):
    """Prints one launcher message on stderr."""
    print(_MESSAGE_PREFIX + message, file=sys.stderr, flush=True)


class SegmentSplitter:
    """Cuts a byte stream, fed in pieces of any size, into text segments that end in `\\n` or `\\r`.

    `\\r\\n` ends a line like `\\n`. An empty segment ending in `\\r` (a progress bar that starts its redraw with
    `\\r`) carries nothing and is dropped; an empty line is kept. Segments longer than `max_bytes` are cut
    into lines. Bytes that are not UTF-8 become replacement characters.
    """

    def __init__(self, max_bytes=_MAX_LINE_BYTES):
        self._max_bytes = max_bytes
        self._pending = bytearray()

    def feed(self, data):
        """Returns the segments completed by `data`."""
        self._pending += data
        segments = []
        start = 0
        for match in _TERMINATOR.finditer(self._pending):
            # A final `\r` may be the first half of a `\r\n` whose `\n` is still on its way.
            if match.group() == b"\r" and match.end() == len(self._pending):
                break
            terminator = "\r" if match.group() == b"\r" else "\n"
            text = bytes(self._pending[start:match.start()])
            if text or terminator == "\n":
                segments += self._cut(text, terminator)
            start = match.end()
        del self._pending[:start]
        segments += self._cut_overlong_pending()
        return segments

    def finish(self):
        """Returns what is left once the stream ended, as a line: a stream need not end with a newline."""
        text = bytes(self._pending).rstrip(b"\r")
        self._pending.clear()
        return self._cut(text, "\n") if text else []

    def _cut_overlong_pending(self):
        """Lines cut from an unterminated segment that grew longer than max_bytes."""
        # A held-back final `\r` is a terminator, not text: cutting before it would leave a lone `\r\n` behind.
        held_back = b"\r" if self._pending.endswith(b"\r") else b""
        if len(self._pending) - len(held_back) <= self._max_bytes:
            return []
        lines, rest = self._lines_within_bound(bytes(self._pending[:len(self._pending) - len(held_back)]))
        self._pending = bytearray(rest + held_back)
        return lines

    def _cut(self, text, terminator):
        """`text` + `terminator`, as several lines when it is longer than max_bytes."""
        lines, rest = self._lines_within_bound(text)
        return lines + [_decode(rest) + terminator]

    def _lines_within_bound(self, text):
        """(lines of max_bytes cut from the start of `text`, the rest: at most max_bytes)."""
        lines = []
        while len(text) > self._max_bytes:
            end = self._utf8_boundary(text, self._max_bytes)
            lines.append(_decode(text[:end]) + "\n")
            text = text[end:]
        return lines, text

    @staticmethod
    def _utf8_boundary(data, end):
        """`end`, moved back to the start of a character it would split (not past 3 bytes: then it is not
        UTF-8 anyway)."""
        for candidate in range(end, max(end - 3, 1) - 1, -1):
            if data[candidate] & _UTF8_CONTINUATION_MASK != _UTF8_CONTINUATION_BITS:
                return candidate
        return end


def _decode(data):
    return bytes(data).decode(errors="replace")


class _StderrTail:
    """The last lines a process wrote, as a terminal would show them: what follows a segment that ends in `\\r`
    replaces it, so a progress bar's redraws do not push real lines out."""

    def __init__(self, max_lines=HIDDEN_TAIL_LINES):
        self._lines = collections.deque(maxlen=max_lines)

    def add(self, segments):
        for segment in segments:
            if self._lines and self._lines[-1].endswith("\r"):
                self._lines[-1] = segment
            else:
                self._lines.append(segment)

    def lines(self):
        """The kept lines, each ending in `\\n` so that none is overwritten when shown."""
        return [line[:-1] + "\n" if line.endswith("\r") else line for line in self._lines]


class PrefixedOutput:
    """Copies children's stdout and stderr to ours segment by segment, prefixing each with `[label] `.

    One lock serialises every write, so segments of different processes never mix. Output of a hidden worker
    is read (no child may block on a full pipe) but not shown, except the tail of its stderr if it fails.
    """

    def __init__(self, stdout=None, stderr=None):
        self._stdout = sys.stdout if stdout is None else stdout
        self._stderr = sys.stderr if stderr is None else stderr
        self._lock = threading.Lock()
        self._copiers = []
        self._stopped_by_launcher = set()

    def follow(self, label, process, shown=True):
        """Starts copying the stdout and stderr pipes of `process` (a subprocess.Popen).

        shown=False: drops its output, keeping the last HIDDEN_TAIL_LINES lines of its stderr; they are
        printed if the process exits with a non-zero status that the launcher did not cause by stopping it.
        """
        prefix = f"[{label}] "
        if shown:
            self._start_copier(label, process.stdout, self._shower(prefix, self._stdout))
            self._start_copier(label, process.stderr, self._shower(prefix, self._stderr))
            return
        tail = _StderrTail()
        self._start_copier(label, process.stdout, lambda segments: None)
        self._start_copier(label, process.stderr, tail.add,
                           at_end=lambda: self._show_tail_if_failed(label, prefix, process, tail))

    def stopping(self, processes):
        """Says that the launcher is about to stop `processes`: how those still running end is not a failure of
        their own, so no hidden tail is shown for them."""
        running = [process for process in processes if process.poll() is None]
        with self._lock:
            self._stopped_by_launcher.update(running)

    def report(self, message):
        """Prints one launcher message on our stderr, never inside a child's line."""
        self._write(self._stderr, _MESSAGE_PREFIX + message + "\n")

    def wait_until_drained(self, timeout):
        """Waits up to `timeout` seconds in all for every pipe to reach its end."""
        deadline = time.monotonic() + timeout
        for copier in self._copiers:
            copier.join(max(0.0, deadline - time.monotonic()))

    def _start_copier(self, label, pipe, deliver, at_end=None):
        copier = threading.Thread(target=self._copy_segments, args=(pipe, deliver, at_end),
                                  name=f"output of {label}", daemon=True)
        copier.start()
        self._copiers.append(copier)

    def _shower(self, prefix, sink):
        def show(segments):
            if segments:
                self._write(sink, "".join(prefix + segment for segment in segments))
        return show

    @staticmethod
    def _copy_segments(pipe, deliver, at_end):
        """Reads `pipe` to its end, handing each batch of complete segments to `deliver`."""
        splitter = SegmentSplitter()
        with pipe:
            # read1 returns what one read of the pipe gives, so a progress bar shows up as it is drawn.
            for chunk in iter(lambda: pipe.read1(_READ_BYTES), b""):
                deliver(splitter.feed(chunk))
            deliver(splitter.finish())
        if at_end is not None:
            at_end()

    def _show_tail_if_failed(self, label, prefix, process, tail):
        returncode = process.wait()
        lines = tail.lines()
        with self._lock:
            stopped = process in self._stopped_by_launcher
        if returncode == 0 or stopped or not lines:
            return
        last_lines = "the last line" if len(lines) == 1 else f"the last {len(lines)} lines"
        header = f"{_MESSAGE_PREFIX}{label} {describe_exit(returncode)}; its output was hidden, {last_lines} of " \
                 "its stderr:\n"
        self._write(self._stderr, header + "".join(prefix + line for line in lines))

    def _write(self, sink, text):
        with self._lock:
            try:
                sink.write(text)
                sink.flush()
            except (OSError, ValueError):
                # Our own output is gone (e.g. piped into `head`); keep draining so no child blocks on a full pipe.
                pass
