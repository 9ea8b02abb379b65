"""Process sets: subsets of the job's workers that reduce among themselves (Horovod's ProcessSet).

A set is only a list of ranks: every collective names its set's ranks, the servers sum the contributions
of those workers only, and the others are free meanwhile. Registering a set (add_process_set) is
collective, as in Horovod: every worker calls it with the same ranks in the same order, which is checked.
"""

import numpy as np

import bps_tf.numpy as bps_numpy
from bps_tf.process import rank, size


class ProcessSet:
    """A set of worker ranks. Usable in collectives once registered: add_process_set(), or init(process_sets=...)."""

    def __init__(self, ranks):
        ranks = list(ranks)
        if not ranks or not all(isinstance(r, (int, np.integer)) and r >= 0 for r in ranks):
            raise ValueError(f"a ProcessSet needs a non-empty list of worker ranks (integers >= 0), got {ranks!r}")
        self.ranks = sorted({int(r) for r in ranks})
        self.process_set_id = None  # set when registered

    def size(self):
        """The number of workers in the set (None while it is not registered)."""
        return None if self.process_set_id is None else len(self.ranks)

    def rank(self):
        """This worker's position in the set, or None if it is not a member (or the set is not registered)."""
        if self.process_set_id is None or rank() not in self.ranks:
            return None
        return self.ranks.index(rank())

    def included(self):
        """Whether this worker belongs to the set (None while it is not registered)."""
        return None if self.process_set_id is None else rank() in self.ranks

    def __eq__(self, other):
        return isinstance(other, ProcessSet) and self.ranks == other.ranks and \
            self.process_set_id == other.process_set_id

    def __hash__(self):
        return hash((tuple(self.ranks), self.process_set_id))

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


class _GlobalProcessSet(ProcessSet):
    """Every worker of the job (id 0); its ranks are known once the job is joined."""

    def __init__(self):
        self.process_set_id = 0

    @property
    def ranks(self):
        return list(range(size()))

    def included(self):
        return True

    def rank(self):
        return rank()

    def size(self):
        return size()


global_process_set = _GlobalProcessSet()
_registered = {0: global_process_set}


def _check_agreement(process_set, what):
    """Every worker must register the same sets in the same order: one sum of every worker's view proves it."""
    mask = np.zeros(size() + 1, np.int32)
    mask[process_set.ranks] = 1
    mask[size()] = len(_registered)  # the id it will get
    total = bps_numpy.push_pull(mask, f"process_sets.{what}.{len(_registered)}", average=False)
    if not np.array_equal(total, mask * size()):
        raise ValueError(
            f"{what}_process_set({process_set.ranks}): the workers disagree on this call (another set, or "
            "another order of calls). Every worker must make the same add_process_set/remove_process_set calls "
            "in the same order.")


def add_process_set(process_set):
    """Registers a set (a ProcessSet or a list of ranks) and returns it. Collective: every worker calls it."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError(f"{process_set} is registered already")
    if process_set.ranks[-1] >= size():
        raise ValueError(f"process set {process_set.ranks}: the job has ranks 0..{size() - 1} only")
    for known in _registered.values():
        if known.ranks == process_set.ranks:
            raise ValueError(f"a process set with ranks {process_set.ranks} is registered already ({known})")
    _check_agreement(process_set, "add")
    process_set.process_set_id = max(_registered) + 1
    _registered[process_set.process_set_id] = process_set
    return process_set


def remove_process_set(process_set):
    """Unregisters a set. Collective: every worker calls it. Returns whether it was registered."""
    if process_set.process_set_id in (None, 0) or _registered.get(process_set.process_set_id) is not process_set:
        return False
    _check_agreement(process_set, "remove")
    del _registered[process_set.process_set_id]
    process_set.process_set_id = None
    return True


def forget_registered():
    """Unregisters every set but the global one, without a collective: a new generation of an elastic job
    renumbers the workers, so the sets of the old one name ranks that mean other workers now."""
    for process_set_id in [i for i in _registered if i != 0]:
        _registered.pop(process_set_id).process_set_id = None


def registered_set(process_set_id):
    """The registered set with this id (0: every worker)."""
    if process_set_id not in _registered:
        raise ValueError(f"no process set has id {process_set_id}; register it with add_process_set() first")
    return _registered[process_set_id]


def members(process_set, what):
    """The ranks a collective over `process_set` names (empty: every worker), after checking that the set is
    registered and that this worker belongs to it."""
    if process_set is None or process_set is global_process_set:
        return []
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"{what}: process_set must be a ProcessSet, got {type(process_set).__name__}")
    if _registered.get(process_set.process_set_id) is not process_set:
        raise ValueError(f"{what}: {process_set} is not registered; call add_process_set() on every worker first")
    if rank() not in process_set.ranks:
        raise ValueError(f"{what}: worker {rank()} is not in {process_set}; only its members may call it")
    return list(process_set.ranks)


def set_size(process_set):
    return size() if process_set is None or process_set is global_process_set else len(process_set.ranks)


def position(process_set):
    """This worker's place among the set's members (its rank for the global set)."""
    return rank() if process_set is None or process_set is global_process_set else process_set.ranks.index(rank())
