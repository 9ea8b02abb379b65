"""Deleting an input iterator's TensorFlow resources joins its pipeline's threads, and one of them may be in a
timed wait that the cancellation does not cut short: 6 to 114 ms without CPU here, on the thread that drops
the last reference. In Keras's fit that is the training thread, at the first step of the next epoch (or at
the end of fit), and every other worker then waits for this one in that step's push_pull.

So a thread of bps_tf's takes a reference to each such resource handle (an EagerTensor, which refers to no
Python object: it can be in no reference cycle) and drops it once nothing else holds the handle. The
iterator itself is deleted, or collected with a reference cycle, wherever Python does it; its resources are
deleted here, and TensorFlow releases the GIL while it deletes them, so training goes on. Handles still held
when the process exits are dropped at exit, while every module is still there: deleting a pipeline still
reading a Python generator during the interpreter's teardown can hang the process.
"""

import atexit
import gc
import os
import sys
import threading
import time

import tensorflow as tf

from bps_tf import compat

# Where a distributed iterator keeps its parts (lists or single objects) and their resource handles.
_PARTS = ("_iterators", "_iterator", "_device_iterators")
_HANDLES = ("_iterator_resource", "_multi_device_iterator_resource")


def resource_handles(iterator):
    """The resource handles of `iterator` (a tf.distribute DistributedIterator, or one of its parts)."""
    for key in ("DistributedIterator.parts", "SingleWorkerOwnedDatasetIterator", "OwnedMultiDeviceIterator",
                "OwnedIterator"):
        compat.target(key)  # checked against the installed TensorFlow: these classes set the attributes read
    found, todo = [], [iterator]
    while todo:
        obj = todo.pop()
        if isinstance(obj, (list, tuple)):
            todo.extend(obj)
            continue
        attributes = getattr(obj, "__dict__", {})
        found += [attributes[name] for name in _HANDLES
                  if getattr(attributes.get(name), "dtype", None) == tf.resource]
        todo += [attributes[name] for name in _PARTS if name in attributes]
    return found


def _count_of_one_holder():
    """What sys.getrefcount(held[k]) says of an object held by the list `held` only: _Releaser._run looks at
    its handles with this same expression (a loop variable would add a reference on some Python versions,
    and Python 3.14 leaves some references on the interpreter's stack uncounted)."""
    held = [object()]
    return sys.getrefcount(held[0])


class _Releaser:
    """Holds handles until it is their last holder, then drops them on a thread of their own (at exit, on the
    exiting one)."""

    _ALONE = _count_of_one_holder()
    _FIRST_POLL_S = 0.002
    _LAST_POLL_S = 1.0  # a handle that stays in use (steps_per_epoch) is looked at this often
    _STOP_TIMEOUT_S = 10.0

    def __init__(self):
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self):
        """A lock and no thread (in a forked child: the parent's thread did not come along). What is held
        stays: dropping it in the fork hook would delete those resources right there."""
        self._cond = threading.Condition()
        self._held = getattr(self, "_held", [])
        self._new = False  # a handle came since the thread last looked: look again soon
        self._thread = None
        self._deleting = []  # the threads that delete what was released
        self._stopping = False

    def hold(self, handles):
        with self._cond:
            if self._stopping or not handles:
                return
            self._held += handles
            self._new = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="bps_tf-iterator-release", daemon=True)
                self._thread.start()
                atexit.register(self._stop)
            self._cond.notify()

    def _stop(self):
        """At exit: the thread ends, the deletions under way finish (within _STOP_TIMEOUT_S in all), and what
        is still held is dropped here, with the reference cycles that still hold an iterator (an interrupted
        elastic attempt's)."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
            threads = [self._thread] + self._deleting if self._thread is not None else []
        deadline = time.monotonic() + self._STOP_TIMEOUT_S
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
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
                released = [h for h, free in zip(self._held, alone) if free]
                self._held = [h for h, free in zip(self._held, alone) if not free]
                if released:
                    self._deleting = [t for t in self._deleting if t.is_alive()]
                    # The last references go to a thread of their own: one deletion that waits long (it joins
                    # the pipeline's autotuning thread, seen to sleep over 30 s) must not hold up the next ones.
                    deleter = threading.Thread(target=released.clear, name="bps_tf-iterator-release", daemon=True)
                    self._deleting.append(deleter)
                    deleter.start()
                    del released
                if self._held and not self._stopping and not self._new:
                    self._cond.wait(poll_s)
                    poll_s = min(2 * poll_s, self._LAST_POLL_S)


_releaser = _Releaser()


def release_off_this_thread(iterator):
    """`iterator`'s resources will be deleted on bps_tf's thread once nothing else holds them."""
    _releaser.hold(resource_handles(iterator))
