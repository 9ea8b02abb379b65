"""Horovod's basic functions: init with process sets, the job's shape (also as ops read when a graph runs),
what was built in, barrier, join and the timeline."""

import os

import tensorflow as tf

import bps_tf.numpy as bps_numpy
from bps_tf import process
from bps_tf.ops import build_info, worker_info
from bps_tf.process import local_rank, local_size, rank, size
from bps_tf.process_sets import add_process_set, global_process_set, members, registered_set


def init(comm=None, process_sets=None):
    """Joins the job (started by bpslaunch) and registers `process_sets` (a list of ProcessSet or rank lists;
    "dynamic" is accepted: sets can always be added later with add_process_set)."""
    if comm is not None:
        raise ValueError("bps_tf does not use MPI communicators: processes join the job that bpslaunch describes "
                         "(DMLC_* variables). Call init() without comm.")
    process.init()
    if process_sets is None or process_sets == "dynamic":
        return
    for process_set in process_sets:
        add_process_set(process_set)


def cross_rank():
    """This worker's machine (DMLC_WORKER_ID)."""
    return rank() // local_size()


def cross_size():
    """The number of worker machines."""
    return size() // local_size()


def is_homogeneous():
    """True: every worker machine runs the same number of worker processes (bpslaunch starts them so)."""
    return True


def rank_op(name=None):
    return worker_info("rank", name)


def size_op(process_set_id=0, name=None):
    if process_set_id == 0:
        return worker_info("size", name)
    return tf.constant(len(registered_set(process_set_id).ranks), tf.int32, name=name)


def local_rank_op(name=None):
    return worker_info("local_rank", name)


def local_size_op(name=None):
    return worker_info("local_size", name)


def process_set_included_op(process_set_id=0, name=None):
    included = process_set_id == 0 or rank() in registered_set(process_set_id).ranks
    return tf.constant(int(included), tf.int32, name=name)


def cuda_built():
    return "cuda" in build_info()


def nccl_built():
    return "nccl" in build_info()


def _not_built():
    return False


mpi_built = mpi_enabled = mpi_threads_supported = gloo_built = gloo_enabled = _not_built
ddl_built = ccl_built = rocm_built = _not_built


def barrier(process_set=global_process_set):
    """Returns once every worker (of `process_set`) has called barrier()."""
    bps_numpy.barrier(members(process_set, "barrier"))


def join():
    """Ends this worker's part without ending the others': until every worker has called join(), their
    collectives complete without this one (zeros in sums). Returns the last rank to join, as a tensor."""
    return tf.constant(process.join(), tf.int32)


def start_timeline(file_path, mark_cycles=False):
    """Starts writing a Chrome trace of this worker's tensors: worker 0 to `file_path`, worker r to the same
    name with `.rank<r>` before the extension. (`mark_cycles` is accepted; bps_tf has no cycles to mark.)"""
    del mark_cycles
    path = file_path
    if rank() != 0:
        stem, extension = os.path.splitext(file_path)
        path = f"{stem}.rank{rank()}{extension}"
    bps_numpy.start_timeline(path)


def stop_timeline():
    bps_numpy.stop_timeline()


__all__ = ["init", "cross_rank", "cross_size", "is_homogeneous", "rank_op", "size_op", "local_rank_op",
           "local_size_op", "process_set_included_op", "cuda_built", "nccl_built", "mpi_built", "mpi_enabled",
           "mpi_threads_supported", "gloo_built", "gloo_enabled", "ddl_built", "ccl_built", "rocm_built", "barrier",
           "join", "start_timeline", "stop_timeline", "local_rank", "local_size", "rank", "size"]
