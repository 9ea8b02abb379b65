"""When an elastic run collects the garbage of an interrupted attempt.

The interrupted call's objects are garbage in reference cycles (its frames, held by the exception's
traceback), among them the tf.data iterator of an interrupted Keras fit, whose destruction waits for
tf.data's autotuning thread: up to seconds after a long fit (the longer the fit, the longer the wait).
Collected on the training thread, that wait would stall the worker at some later point, in the middle of a
collective the other workers wait for. So Python's automatic collection is paused from the interruption until
the next generation is synchronised (the collection's own work would compete with the recovery for the
GIL), and the garbage is then collected on a thread of its own: TensorFlow releases the GIL while it waits,
and Python runs no other collection until that one is done."""

import gc
import threading


class DeferredCollection:
    def __init__(self):
        self._paused = False
        self._was_enabled = False

    def pause(self):
        """At an interruption: no automatic collection until collect_aside()."""
        if not self._paused:
            self._paused, self._was_enabled = True, gc.isenabled()
            gc.disable()

    def collect_aside(self):
        """Once the workers are synchronised (or the run ends): collects on a thread of its own, then lets Python
        collect automatically again if it did before."""
        if not self._paused:
            return
        self._paused = False
        threading.Thread(target=self._collect, name="bps_tf.elastic.collect", daemon=True).start()

    def _collect(self):
        try:
            gc.collect()
        finally:
            if self._was_enabled:
                gc.enable()
