"""Turns SIGINT and SIGTERM into requests the launcher acts on in order, instead of dying in the middle."""

import signal
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """While active, records every SIGINT/SIGTERM in `received` (signal numbers, oldest first). Entered while
    another is active, it shares that one's record: a signal that came before it was entered is seen by both."""

    def __init__(self):
        self.received = []
        self._previous_handlers = {}

    def __enter__(self):
        # Python lets only the main thread install handlers; elsewhere signals keep their current handling.
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous_handlers[signum] = signal.signal(signum, self._record)
            outer = getattr(self._previous_handlers[signal.SIGTERM], "__self__", None)
            if isinstance(outer, StopSignals):
                self.received = outer.received
        return self

    def __exit__(self, *exc_info):
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)

    def _record(self, signum, _frame):
        self.received.append(signum)
