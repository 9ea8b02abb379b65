"""Deleting an input iterator's TensorFlow resources joins its pipeline's threads, and one of them may be in a
timed wait that the cancellation does not cut short: 6 to 114 ms without CPU here, on the thread that drops
the last reference. In Keras's fit that is the training thread, at the first step of the next epoch (or at
the end of fit), and every other worker then waits for this one in that step's push_pull.

So a thread of bps_tf's takes a reference to each such resource handle and drops it once nothing else holds
the handle. It holds the handles, not the iterator: an iterator may sit in a reference cycle, which a
reference from outside would keep alive, while TensorFlow sets no attribute on these EagerTensors, so they
refer to no Python object. The iterator itself is deleted, or collected with its cycle, wherever Python does
it; its resources are deleted on a thread of their own, and TensorFlow releases the GIL while it deletes
them, so training goes on. Handles still held when the process exits are dropped at exit, before the
interpreter takes its modules apart; iterators still alive then are deleted in the teardown, as without
bps_tf.

Only pipelines that run no Python code of the user's should be given here: Keras reads a Python generator
through every iterator it makes of it, and an old pipeline still reading it while the next one starts fails
("generator already executing") or loses batches.
"""

import atexit
import gc
import os
import sys
import threading
import time

import tensorflow as tf
from tensorflow.python.framework import ops

from bps_tf import compat

# Where a distributed iterator keeps its parts (lists or single objects) and their resource handles. The
# classes that set them are among the strategy's targets, checked against the installed TensorFlow.
compat.check_part(compat.STRATEGY)
_PARTS = ("_iterators", "_iterator", "_device_iterators")
_HANDLES = ("_iterator_resource", "_multi_device_iterator_resource")


def resource_handles(iterator):
    """The resource handles of `iterator` (a tf.distribute DistributedIterator, or one of its parts)."""
    found, todo, seen = [], [iterator], set()
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, (list, tuple)):
            todo.extend(obj)
            continue
        attributes = getattr(obj, "__dict__", {})
        found += [attributes[name] for name in _HANDLES
                  if isinstance(attributes.get(name), ops.EagerTensor) and attributes[name].dtype == tf.resource]
        todo += [attributes[name] for name in _PARTS if name in attributes]
    return found


def _count_of_one_holder():
    """What sys.getrefcount(held[k]) says of an object held by the list `held` only: _Releaser._run looks at
    its handles with this same expression (a loop variable would add a reference on some Python versions,
    and Python 3.14 leaves some references on the interpreter's stack uncounted)."""
    held = [object()]
    return sys.getrefcount(held[0])


class _Releaser:
    """Holds handles until it is their last holder, then drops them on a deleting thread (at most
    _MAX_DELETERS at once, else on its own thread; at exit, on the exiting one)."""

    _ALONE = _count_of_one_holder()
    _FIRST_POLL_S = 0.002
    _LAST_POLL_S = 1.0  # a handle that stays in use (steps_per_epoch) is looked at this often
    _MAX_DELETERS = 4
    _STOP_TIMEOUT_S = 10.0
    _inherited = []  # handles a forked child got from its parent: never deleted there (see _reset)

    def __init__(self):
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self):
        """A lock and no thread (in a forked child: the parent's threads did not come along). A child
        leaves its parent's handles alone: deleting a pipeline whose threads stayed in the parent hangs."""
        self._cond = threading.Condition()
        self._inherited.extend(getattr(self, "_held", []))
        self._held = []
        self._new = False  # a handle came since the thread last looked: look again soon
        self._thread = None
        self._deleting = []  # the threads deleting what was released
        self._stopping = False
        self._pid = os.getpid()

    def hold(self, handles):
        with self._cond:
            if self._stopping or not handles:
                return
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="bps_tf-iterator-release", daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # no thread to be had: the handles go the usual way
                    return
                self._thread = thread
                atexit.register(self._stop)
            self._held += handles
            self._new = True
            self._cond.notify()

    def _stop(self):
        """At exit: the thread ends, the deletions under way finish (within _STOP_TIMEOUT_S in all), and what
        is still held is dropped here, with the reference cycles that still hold an iterator (an interrupted
        elastic attempt's)."""
        if os.getpid() != self._pid:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify()
            threads = [self._thread] + self._deleting if self._thread is not None else []
        deadline = time.monotonic() + self._STOP_TIMEOUT_S
        for thread in threads:
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
                self._delete(released)
            del released  # (the deleting thread's list, when it started one)
            with self._cond:
                if self._held and not self._stopping and not self._new:
                    self._cond.wait(poll_s)
                    poll_s = min(2 * poll_s, self._LAST_POLL_S)

    def _delete(self, released):
        """Drops `released`, the last references, on a thread of its own: one deletion that waits long (it
        joins the pipeline's autotuning thread, seen to sleep over 30 s) must not hold up the next ones."""
        with self._cond:
            self._deleting = [t for t in self._deleting if t.is_alive()]
            busy = len(self._deleting) >= self._MAX_DELETERS
        if not busy:
            deleter = threading.Thread(target=released.clear, name="bps_tf-iterator-delete", daemon=True)
            try:
                deleter.start()
            except RuntimeError:  # no thread to be had (a process limit): delete here
                busy = True
            else:
                with self._cond:
                    self._deleting.append(deleter)
        if busy:
            released.clear()


_releaser = _Releaser()


def release_off_this_thread(iterator):
    """`iterator`'s resources will be deleted off the calling thread once nothing else holds them."""
    _releaser.hold(resource_handles(iterator))
