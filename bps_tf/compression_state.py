"""Checkpoints of gradient compression's state: each worker's momentum and error feedback, and the servers'
residuals (see docs/api.md, "Gradient compression"). Without them a resumed job would restart momentum from
zero and drop what error feedback still owed.

Worker 0 writes one file for the whole job and, on restore, hands every worker its own part back: a resumed
job needs the file on worker 0's machine only, as BytePSStrategy's BackupAndRestore does. Both calls are
collective: every worker calls them at the same point, between steps.
"""

import os
import struct

import numpy as np

import bps_tf.numpy as bps_numpy
from bps_tf.objects import padded_words
from bps_tf.process import rank, size

FILE_NAME = "bps_compression_state.npz"

# What worker 0 tells the others before a restore.
_NOTHING, _RESTORE, _UNREADABLE = 0, 1, 2


def _pack(blobs):
    """Byte strings as one: their count, then each one's length and bytes."""
    return struct.pack("<Q", len(blobs)) + b"".join(struct.pack("<Q", len(b)) + bytes(b) for b in blobs)


def _unpack(packed):
    (count,), at, blobs = struct.unpack_from("<Q", packed), 8, []
    for _ in range(count):
        (length,) = struct.unpack_from("<Q", packed, at)
        blobs.append(packed[at + 8:at + 8 + length])
        at += 8 + length
    return blobs


def _lengths(mine, tag):
    """Every worker's byte count: each fills in its own (worker 0 may fill in all of them)."""
    return bps_numpy.push_pull(np.asarray(mine, np.int64), f"compression_state.{tag}.lengths", average=False).tolist()


def _pair_name(tag, peer, length):
    # The length is part of the name: each size is its own tensor, so later checkpoints never disagree.
    return f"compression_state.{tag}.{peer}.{length}"


def _exchange_with_worker_zero(tag, payloads):
    """Moves byte strings between worker 0 and every other worker, all pairs at once, each through a sum
    over its two workers (one side's words plus the other side's zeros). `payloads`: on worker 0, by rank,
    what it sends (None: what it receives); elsewhere, this worker's string or None. Returns what arrived."""
    me, n = rank(), size()
    if me == 0:
        lengths = _lengths([len(p) if p is not None else 0 for p in payloads], tag)
        handles = {}
        for peer in range(1, n):
            words = padded_words(np.frombuffer(payloads[peer] or b"", np.uint8), lengths[peer])
            handles[peer] = bps_numpy.push_pull_async(words, _pair_name(tag, peer, lengths[peer]), average=False,
                                                      process_set=[0, peer])
        return {peer: bps_numpy.synchronize(h).view(np.uint8)[:lengths[peer]].tobytes() for peer, h in handles.items()}
    mine = np.zeros(n, np.int64)
    if payloads is not None:
        mine[me] = len(payloads)
    lengths = _lengths(mine, tag)
    words = padded_words(np.frombuffer(payloads or b"", np.uint8), lengths[me])
    received = bps_numpy.push_pull(words, _pair_name(tag, me, lengths[me]), process_set=[0, me], average=False)
    return received.view(np.uint8)[:lengths[me]].tobytes()


def save(directory):
    """Saves every worker's compression state to `directory`/bps_compression_state.npz (written by worker 0,
    atomically). Returns False, writing nothing, when nothing was compressed."""
    mine = bps_numpy.save_compression_states()
    # Compressed tensors are declared by every worker together: all have state, or none has.
    if not mine:
        return False
    packed = _pack(mine)
    if rank() != 0:
        _exchange_with_worker_zero("save", packed)
        return True
    received = _exchange_with_worker_zero("save", [None] * size())
    by_rank = [packed] + [received[peer] for peer in range(1, size())]
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, FILE_NAME)
    partial = path + ".partial.npz"
    np.savez(partial, workers=np.int64(size()), **{f"worker{r}": np.frombuffer(p, np.uint8) for r, p in enumerate(by_rank)})
    os.replace(partial, path)
    return True


def _read(path):
    """Worker 0: the packed state of each rank, or why it cannot be used."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            workers = int(saved["workers"])
            if workers != size():
                return None, (f"{path} holds the compression state of {workers} workers, this job has {size()}: "
                              "compression starts afresh (momentum and error feedback from zero)")
            return [saved[f"worker{r}"].tobytes() for r in range(workers)], None
    except Exception as error:  # (a damaged file fails in many ways: zip, header, missing array)
        raise ValueError(f"cannot read the compression state {path} ({error}); delete it to start afresh") from error


def load(directory):
    """Restores the state save() wrote to `directory`, each worker its own part; returns whether there was
    one. Call it before the compressed tensors' next push_pull."""
    verdict, payloads, problem = _NOTHING, None, None
    if rank() == 0:
        path = os.path.join(directory, FILE_NAME)
        if os.path.exists(path):
            try:
                payloads, note = _read(path)
                verdict = _RESTORE if payloads is not None else _NOTHING
                if note:
                    print(f"bps_tf: {note}", flush=True)
            except ValueError as error:
                verdict, problem = _UNREADABLE, error
    flags = np.zeros(1, np.int32)
    flags[0] = verdict if rank() == 0 else 0
    verdict = int(bps_numpy.push_pull(flags, "compression_state.load.verdict", average=False)[0])
    if verdict == _UNREADABLE:
        if problem is not None:
            raise problem
        raise ValueError("worker 0 cannot read the saved compression state (its error says why)")
    if verdict == _NOTHING:
        return False
    mine = payloads[0] if rank() == 0 else None
    received = _exchange_with_worker_zero("load", payloads if rank() == 0 else None)
    if rank() != 0:
        mine = received
    bps_numpy.load_compression_states(_unpack(mine))
    return True
