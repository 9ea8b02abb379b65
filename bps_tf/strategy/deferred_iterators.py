"""Keras 3 makes an iterator of the distributed dataset at the end of every epoch, ready for the next one, and,
unless steps_per_epoch is given, another at the start of the next epoch (or nothing, at the end of fit): the
first is thrown away unused, one iterator made for nothing per epoch (so at least one per fit() call).
Making an iterator costs more than the rest of an epoch's fixed work under BytePSStrategy (TensorFlow
instantiates the input pipeline's functions and starts its threads, about 10 ms of CPU for an array
dataset). So under BytePSStrategy an epoch iterator's iterators are made when a step first takes one: the
same iterators, in the same order, minus the unused ones; their resources are deleted off the training
thread (bps_tf/strategy/iterator_release.py).
"""

from bps_tf import compat
from bps_tf.strategy import iterator_release


class _Deferred:
    """An iterator of `dataset`, made when first asked for, then the same one every time. It is an iterator
    itself (Python's iter() insists), whose next() is the made iterator's."""

    def __init__(self, dataset):
        self._dataset = dataset
        self._iterator = None

    def made(self):
        if self._iterator is None:
            self._iterator = iter(self._dataset)
            iterator_release.release_off_this_thread(self._iterator)
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
