"""Keras 3 makes an iterator of the distributed dataset at the end of every epoch, ready for the next one, and,
unless steps_per_epoch is given, another at the start of the next epoch (or nothing, at the end of fit): the
first is thrown away unused, one iterator made for nothing per epoch (so at least one per fit() call).
Making an iterator costs more than the rest of an epoch's fixed work under BytePSStrategy (TensorFlow
instantiates the input pipeline's functions and starts its threads, about 10 ms of CPU for an array
dataset). So under BytePSStrategy an epoch iterator's iterators are made when a step first takes one: the
same iterators, in the same order, minus the unused ones. Those of arrays and tf.data datasets have their
resources deleted off the training thread (bps_tf/strategy/iterator_release.py); those that read Python
objects (generators, PyDatasets) are deleted as Keras drops them, before the next one reads.
"""

from bps_tf import compat
from bps_tf.strategy import iterator_release


class _Deferred:
    """An iterator of `dataset`, made when first asked for, then the same one every time. It is an iterator
    itself (Python's iter() insists), whose next() is the made iterator's."""

    def __init__(self, dataset, release_off_thread):
        self._dataset = dataset
        self._release_off_thread = release_off_thread
        self._iterator = None

    def made(self):
        if self._iterator is None:
            iterator = iter(self._dataset)
            if self._release_off_thread:
                iterator_release.release_off_this_thread(iterator)
            self._iterator = iterator
        return self._iterator

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.made())


class _DeferredIterable:
    """What Keras calls iter() on in place of the distributed dataset: iter() gives a _Deferred."""

    def __init__(self, dataset, release_off_thread):
        self._dataset = dataset
        self._release_off_thread = release_off_thread

    def __iter__(self):
        return _Deferred(self._dataset, self._release_off_thread)


def install(is_bps_strategy):
    local_get_iterator = compat.target("TFEpochIterator._get_iterator")
    local_next = compat.target("TFEpochIterator.__next__")
    runs_no_python = (compat.target("ArrayDataAdapter"), compat.target("TFDatasetAdapter"))

    def _get_iterator(self):
        dataset = local_get_iterator(self)
        if is_bps_strategy(getattr(self, "_distribute_strategy", None)):
            return _DeferredIterable(dataset, isinstance(getattr(self, "data_adapter", None), runs_no_python))
        return dataset

    def __next__(self):
        begin_step, end_step, iterator = local_next(self)
        if isinstance(iterator, _Deferred):
            iterator = iterator.made()
        return begin_step, end_step, iterator

    compat.replace("TFEpochIterator._get_iterator", _get_iterator)
    compat.replace("TFEpochIterator.__next__", __next__)
