"""What a training function carries across generations of an elastic job, framework-neutral (Horovod's
horovod.common.elastic State and ObjectState): commit, restore and sync, and the check for workers waiting to
join. The TensorFlow and Keras states build on these (tensorflow_state.py, keras_state.py)."""

import copy

import numpy as np

import bps_tf.numpy as bps_numpy
from bps_tf import process
from bps_tf.elastic.generations import HostsUpdatedInterrupt, internal_errors, workers_waiting
from bps_tf.objects import broadcast_object


class State:
    """What a training function carries across changes of the job's workers. `bcast_object` broadcasts a
    Python object from rank 0; `get_rank` returns this worker's rank."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions to call after every reset (workers added or removed), before the state is synchronised:
        to rescale the learning rate by the new size(), for instance."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state (model and optimizer variables copied to host memory, attributes copied) and checks
        whether workers wait to join, raising HostsUpdatedInterrupt on every worker at once if they do.
        Commits cost a copy of the state and a tiny collective: commit every few batches rather than every one
        if that shows (docs/elastic.md measures it)."""
        self.save()
        self.check_host_updates()

    @internal_errors
    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every worker, at the same step, when workers wait to join. Every
        worker calls it at the same point: the decision is the maximum over the workers of what they heard."""
        heard = np.array([workers_waiting()], np.int32)
        agreed = bps_numpy.push_pull(heard, "elastic.workers_waiting", average=False, op="max")
        if agreed[0] > 0:
            raise HostsUpdatedInterrupt(skip_sync=False)

    def save(self):
        """Saves the state to host memory."""
        raise NotImplementedError()

    def restore(self):
        """Restores the last committed state, undoing any uncommitted modifications."""
        raise NotImplementedError()

    def sync(self):
        """Gives every worker rank 0's state."""
        raise NotImplementedError()

    def reset(self):
        """Resets objects and variables after a reset event, before the state is synchronised."""


class ObjectState(State):
    """State of plain Python objects, given as keyword arguments and kept as attributes. `bcast_object`
    broadcasts the dictionary of them from rank 0."""

    def __init__(self, bcast_object=broadcast_object, get_rank=process.rank, **kwargs):
        self._bcast_object = bcast_object
        self._saved_state = copy.deepcopy(kwargs)
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {attr: copy.deepcopy(getattr(self, attr)) for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, copy.deepcopy(value))
