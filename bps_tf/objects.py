"""Python objects between workers: broadcast_object and allgather_object (pickled, as int32 words through
the servers' sums: the root's words plus every other worker's zeros). NumPy only, so they work in eager
and in TF1 graph mode alike, and before any TensorFlow op is built."""

import pickle

import numpy as np

import bps_tf.numpy as bps_numpy
from bps_tf import process_sets
from bps_tf.process import rank


def padded_words(payload, length):
    """`payload` bytes as `length` zero-padded bytes viewed as int32 words."""
    padded = np.zeros((length + 3) // 4 * 4, np.uint8)
    padded[:payload.size] = payload
    return padded.view(np.int32)


def _pickled(obj):
    return np.frombuffer(pickle.dumps(obj), dtype=np.uint8)


def _scoped(name, ranks):
    """The name of an object exchange: each process set exchanges under its own names."""
    return (name or "object") + "".join(f".{r}" for r in ranks)


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """Returns `obj` as it is on `root_rank` (pickled there, unpickled everywhere)."""
    ranks = process_sets.members(process_set, f"broadcast_object '{name or 'object'}'")
    name = _scoped(name, ranks)
    if ranks and root_rank not in ranks:
        raise ValueError(f"broadcast_object '{name}': root_rank {root_rank} is not in {process_set}")
    is_root = rank() == root_rank
    payload = _pickled(obj) if is_root else np.zeros(0, np.uint8)
    length = np.array([payload.size if is_root else 0], np.int64)
    length = int(bps_numpy.push_pull(length, f"broadcast_object.{name}.length", process_set=ranks, average=False)[0])
    # The length is part of the name: each size is its own tensor, so successive calls never disagree.
    words = bps_numpy.push_pull(padded_words(payload, length), f"broadcast_object.{name}.data.{length}", average=False,
                                process_set=ranks)
    return pickle.loads(words.view(np.uint8)[:length].tobytes())


def allgather_object(obj, name=None, process_set=None):
    """Every worker's `obj` (of `process_set`'s members), as a list in rank order."""
    ranks = process_sets.members(process_set, f"allgather_object '{name or 'object'}'")
    name = _scoped(name, ranks)
    count, me = process_sets.set_size(process_set), process_sets.position(process_set)
    payload = _pickled(obj)
    lengths = np.zeros(count, np.int64)
    lengths[me] = payload.size
    lengths = bps_numpy.push_pull(lengths, f"allgather_object.{name}.lengths", process_set=ranks, average=False)
    word_counts = (lengths + 3) // 4
    starts = np.concatenate([[0], np.cumsum(word_counts)])
    words = np.zeros(int(starts[-1]), np.int32)
    words[starts[me]:starts[me + 1]] = padded_words(payload, payload.size)
    words = bps_numpy.push_pull(words, f"allgather_object.{name}.data.{starts[-1]}", process_set=ranks, average=False)
    return [pickle.loads(words[starts[i]:starts[i + 1]].view(np.uint8)[:lengths[i]].tobytes()) for i in range(count)]
