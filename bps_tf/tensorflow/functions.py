"""Horovod's helper functions on variables and Python objects, with Horovod's signatures."""

import tensorflow as tf

from bps_tf import ops
from bps_tf.objects import allgather_object, broadcast_object
from bps_tf.process_sets import global_process_set


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Sets every variable to its value on `root_rank` (in graph mode, returns the op that does it).
    `inplace` is accepted: variables are always assigned in place."""
    del inplace
    return ops.broadcast_variables(variables, root_rank, process_set=process_set)


def broadcast_global_variables(root_rank):
    """TF1 graphs: the op that sets every global variable to its value on `root_rank`."""
    if tf.executing_eagerly():
        raise RuntimeError("broadcast_global_variables() works in TF1 graphs only (eager TensorFlow has no global "
                           "variable collection): call bps.broadcast_variables(model.variables, root_rank) instead")
    return ops.broadcast_variables(tf.compat.v1.global_variables(), root_rank, name="global_variables")


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function that broadcasts its argument from `root_rank` (`session` is accepted: no TF ops are used)."""
    del session

    def broadcast(obj):
        return broadcast_object(obj, root_rank, name=name, process_set=process_set)

    return broadcast


__all__ = ["broadcast_variables", "broadcast_global_variables", "broadcast_object", "broadcast_object_fn",
           "allgather_object"]
