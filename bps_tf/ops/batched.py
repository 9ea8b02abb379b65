"""push_pull of a batch of tensors inside a computation compiled by XLA (one BytepsPushPullGroup op): every
sum starts before any is waited for, so the batch travels together while the rest of the step runs. Outside
XLA the op has no kernel: there each tensor's own push_pull op already runs as soon as its input exists."""

import tensorflow as tf

from bps_tf import compat
from bps_tf.ops import naming
from bps_tf.ops.compression import Compression
from bps_tf.ops.library import ops
from bps_tf.ops.wire_dtypes import from_wire, to_wire
from bps_tf.process import backup_workers

_in_xla_context = compat.target("GraphOrParentsInXlaContext")


def compiling():
    """True while tracing a computation that XLA compiles."""
    return bool(_in_xla_context(tf.compat.v1.get_default_graph()))


def refuse_backups_under_xla():
    if backup_workers() > 0:
        raise ValueError("backup workers (BYTEPS_BACKUP_WORKERS) are not offered inside a step compiled by XLA: "
                         "compile the model with jit_compile=False (or unset BYTEPS_BACKUP_WORKERS)")


def push_pull_batch(tensors, names, priorities, compression=Compression.none):
    """Sums across every worker of `tensors` (under `names`, or names derived as push_pull derives them when
    None, from the tensors as given), higher `priorities` first. `compression` casts before the push and back
    after (Compression.fp16; the core's codecs encode one tensor at a time, outside a batch). Gradients:
    refused with backup workers, which XLA's calls do not carry."""
    refuse_backups_under_xla()
    full_names = [naming.tensor_name(t, n, "push_pull") for t, n in zip(tensors, names)]
    sent = [compression.compress(t) for t in tensors]
    wired = [to_wire(c, f"push_pull of '{n}'") for (c, _), n in zip(sent, full_names)]
    sums = ops.byteps_push_pull_group([w for w, _ in wired], tensor_names=full_names,
                                      priorities=[int(p) for p in priorities])
    return [compression.decompress(from_wire(s, original), context)
            for s, (_, original), (_, context) in zip(sums, wired, sent)]
