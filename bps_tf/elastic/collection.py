"""When an elastic run collects the garbage of an interrupted attempt.

The interrupted call's objects are garbage in reference cycles (its frames, held by the exception's
traceback), among them the tf.data iterator of an interrupted Keras fit, whose destruction waits for
tf.data's autotuning thread: up to seconds after a long fit (the longer the fit, the longer the wait).
Collected on the training thread, that wait would stall the worker at some later point, in the middle of a
collective the other workers wait for. So Python's automatic collection is paused from the interruption,
and once the next generation is synchronised the garbage is collected on a thread of its own: TensorFlow
releases the GIL while it waits, and Python runs no other collection until that one is done (under
BytePSStrategy with Keras 3 the collection only drops the cycles' references to such an iterator, and
bps_tf/strategy/iterator_release.py, which also holds its resources, deletes them). That thread
first lets training resume (SETTLE_S): the collection's own work holds the GIL, and would slow the
Python-heavy start of the next attempt (Keras traces its train function again) if it ran at once."""

import gc
import threading
import time

SETTLE_S = 2.0


class DeferredCollection:
    def __init__(self, settle_s=SETTLE_S):
        self._settle_s = settle_s
        self._lock = threading.Lock()
        self._paused = False  # automatic collection disabled by this object
        self._was_enabled = False
        self._interruptions = 0
        self._collecting_for = 0  # the interruptions a collection was started for

    def pause(self):
        """At an interruption: no automatic collection until a collection that collect_aside() starts is done
        (and no later interruption came meanwhile)."""
        with self._lock:
            self._interruptions += 1
            if not self._paused:
                self._paused, self._was_enabled = True, gc.isenabled()
                gc.disable()

    def collect_aside(self):
        """Once the workers are synchronised (or the run ends): collects on a thread of its own."""
        with self._lock:
            if not self._paused or self._collecting_for == self._interruptions:
                return
            interruptions = self._collecting_for = self._interruptions
        threading.Thread(target=self._collect, args=(interruptions,), name="bps_tf.elastic.collection",
                         daemon=True).start()

    def _collect(self, interruptions):
        time.sleep(self._settle_s)
        gc.collect()
        with self._lock:
            if self._paused and self._interruptions == interruptions:  # else a later collection resumes it
                self._paused = False
                if self._was_enabled:
                    gc.enable()
