"""Broadcasting variables and Python objects from one worker to all."""

import pickle

import numpy as np
import tensorflow as tf

from bps_tf.ops.collectives import broadcast
from bps_tf.process import rank


def _variable_name(variable, index):
    return f"{index}.{getattr(variable, 'path', None) or variable.name}"


def broadcast_variables(variables, root_rank, name="variables"):
    """Sets every variable to its value on `root_rank`. In graph mode (TF1), returns the op that does it."""
    variables = list(variables)
    assigns = [
        v.assign(broadcast(v, root_rank, name=f"{name}/{_variable_name(v, i)}")) for i, v in enumerate(variables)
    ]
    if not tf.executing_eagerly():
        return tf.group(*assigns)
    return None


def broadcast_object(obj, root_rank=0, name="object"):
    """Returns `obj` as it is on `root_rank` (pickled there, unpickled everywhere)."""
    if rank() == root_rank:
        payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    else:
        payload = np.zeros(0, np.uint8)
    length = int(broadcast(tf.constant(payload.size, tf.int64), root_rank, name=f"{name}.length").numpy())
    # Bytes travel as int32 words: the servers sum 32-bit integers, not bytes.
    words = np.zeros((length + 3) // 4, np.int32)
    if rank() == root_rank:
        padded = np.zeros(words.size * 4, np.uint8)
        padded[:length] = payload
        words = padded.view(np.int32)
    # The length is part of the name: each size is its own tensor, so successive calls never disagree.
    received = broadcast(tf.constant(words), root_rank, name=f"{name}.data.{length}").numpy()
    return pickle.loads(received.view(np.uint8)[:length].tobytes())
