"""Keras 3 makes an iterator of the distributed dataset at the end of every epoch, ready for the next one, and,
unless steps_per_epoch is given, another at the start of the next epoch (or nothing, at the end of fit): the
first is thrown away unused, one iterator made for nothing per epoch (so at least one per fit() call).
Making an iterator costs more than the rest of an epoch's fixed work under BytePSStrategy (TensorFlow
instantiates the input pipeline's functions and starts its threads, about 10 ms of CPU for an array
dataset). So under BytePSStrategy an epoch iterator's iterators are made when a step first takes one: the
same iterators, in the same order, minus the unused ones.

Deleting an iterator joins its pipeline's threads, and one of them may be in a timed wait that the
cancellation does not cut short: 6 to 114 ms without CPU here, on the thread that drops the last reference, which
is Keras's training thread at the first step of the next epoch (or at the end of fit). Every other worker
then waits for this one in that step's push_pull. So the iterators made here are deleted by one thread of
bps_tf's, each once nothing else holds it (TensorFlow releases the GIL while it deletes, so training goes on);
those still held when the process exits are deleted at exit.
"""

import atexit
import gc
import os
import sys
import threading

from bps_tf import compat


def _count_of_one_holder():
    """What sys.getrefcount(held[k]) says of an object held by the list `held` only: _Releaser._run looks at
    its iterators with this same expression (a loop variable would add a reference on some Python versions,
    and Python 3.14 leaves some references on the interpreter's stack uncounted)."""
    held = [object()]
    return sys.getrefcount(held[0])


class _Releaser:
    """Holds iterators until it is their last holder, then drops them on its own thread (at exit, on the
    exiting one)."""

    _ALONE = _count_of_one_holder()
    _FIRST_POLL_S = 0.002
    _LAST_POLL_S = 1.0  # an iterator that stays in use (steps_per_epoch) is looked at this often
    _STOP_TIMEOUT_S = 10.0

    def __init__(self):
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self):
        """A lock and no thread (in a forked child: the parent's thread did not come along). What is held
        stays: dropping it in the fork hook would delete those iterators right there."""
        self._cond = threading.Condition()
        self._held = getattr(self, "_held", [])
        self._new = False  # an iterator came since the thread last looked: look again soon
        self._thread = None
        self._stopping = False

    def hold(self, iterator):
        with self._cond:
            if self._stopping:
                return
            self._held.append(iterator)
            self._new = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="bps_tf-iterator-release", daemon=True)
                self._thread.start()
                atexit.register(self._stop)
            self._cond.notify()

    def _stop(self):
        """At exit, while every module is still there: the thread ends (a deletion it is running finishes
        first, within _STOP_TIMEOUT_S), and what is still held is deleted here, with any reference cycle
        that also holds it (an interrupted elastic attempt's). Deleting a running pipeline (a generator's)
        while the interpreter takes its modules apart can hang the process."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(self._STOP_TIMEOUT_S)
        with self._cond:
            held, self._held = self._held, []
        del held
        gc.collect()

    def _run(self):
        poll_s = self._FIRST_POLL_S
        while True:
            with self._cond:
                while not self._held and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                if self._new:
                    self._new, poll_s = False, self._FIRST_POLL_S
                alone = [sys.getrefcount(self._held[k]) <= self._ALONE for k in range(len(self._held))]
                released = [it for it, free in zip(self._held, alone) if free]
                self._held = [it for it, free in zip(self._held, alone) if not free]
            released.clear()  # the last references: the deletions run here, outside the lock
            with self._cond:
                if self._held and not self._stopping and not self._new:
                    self._cond.wait(poll_s)
                    poll_s = min(2 * poll_s, self._LAST_POLL_S)


_releaser = _Releaser()


class _Deferred:
    """An iterator of `dataset`, made when first asked for, then the same one every time. It is an iterator
    itself (Python's iter() insists), whose next() is the made iterator's."""

    def __init__(self, dataset):
        self._dataset = dataset
        self._iterator = None

    def made(self):
        if self._iterator is None:
            self._iterator = iter(self._dataset)
            _releaser.hold(self._iterator)
        return self._iterator

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.made())


class _DeferredIterable:
    """What Keras calls iter() on in place of the distributed dataset: iter() gives a _Deferred."""

    def __init__(self, dataset):
        self._dataset = dataset

    def __iter__(self):
        return _Deferred(self._dataset)


def install(is_bps_strategy):
    local_get_iterator = compat.target("TFEpochIterator._get_iterator")
    local_next = compat.target("TFEpochIterator.__next__")

    def _get_iterator(self):
        dataset = local_get_iterator(self)
        if is_bps_strategy(getattr(self, "_distribute_strategy", None)):
            return _DeferredIterable(dataset)
        return dataset

    def __next__(self):
        begin_step, end_step, iterator = local_next(self)
        if isinstance(iterator, _Deferred):
            iterator = iterator.made()
        return begin_step, end_step, iterator

    compat.replace("TFEpochIterator._get_iterator", _get_iterator)
    compat.replace("TFEpochIterator.__next__", __next__)
