"""How a process moves from one generation of the job's workers to the next, framework-neutral (the state
machine of Horovod's horovod.common.elastic): run_fn, reset, the two exceptions, and what this process knows
of the elastic job.

In an elastic job (bpslaunch --min-workers/--max-workers, docs/elastic.md) a lost worker breaks the current
generation: every survivor's collectives fail at once, which surfaces as HorovodInternalError; run_fn then
restores the last commit, starts the next generation (shutdown(), init(): renumbered ranks, the new size),
runs the reset callbacks, synchronises the state from rank 0 (the longest-serving worker) and calls the
training function again. A worker that registers meanwhile waits; commit() finds it (a collective, so every
worker decides alike at the same step) and raises HostsUpdatedInterrupt everywhere, and the next generation
takes it in. What a training function carries across generations is a State (bps_tf/elastic/state.py).
"""

import functools
import sys
import time
import weakref

from bps_tf import process, process_sets
from bps_tf._native import load_core
from bps_tf.elastic.collection import DeferredCollection

_core = load_core()


class HorovodInternalError(RuntimeError):
    """A collective failed because the job's workers changed (a worker was lost, or this one was removed).
    In an elastic run it restores the last commit and carries on with the workers that are left."""


class HostsUpdatedInterrupt(RuntimeError):
    """The job's workers are about to change (workers wait to join): raised by commit() on every worker at
    the same step. The run carries on from the current state (no restore); `skip_sync` when no worker is new."""

    def __init__(self, skip_sync):
        super().__init__("the job's workers change: workers wait to join")
        self.skip_sync = skip_sync


def _report(message):
    print(f"bps_tf.elastic: {message}", file=sys.stderr, flush=True)


def membership_changed():
    """Whether this process's last failure was a change of the job's workers (recoverable), not an error."""
    return bool(_core.elastic_state()["membership_changed"])


def is_elastic():
    """Whether this process belongs to an elastic job (known once init() joined it)."""
    return bool(_core.elastic_state()["elastic"])


def workers_waiting():
    """How many workers (or servers, taking a lost one's place) wait to join at the next generation, as this
    worker last heard."""
    return int(_core.elastic_state()["workers_waiting"])


def servers():
    """How many servers this generation has (an elastic job goes on with fewer when one is lost)."""
    return int(_core.elastic_state()["servers"])


def collectives_are_local():
    """Whether this worker's collectives complete with its own value now (see reset)."""
    return bool(_core.elastic_state()["local_collectives"])


def internal_errors(fn):
    """`fn` with its failures caused by a change of workers raised as HorovodInternalError."""
    @functools.wraps(fn)
    def calling(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (HorovodInternalError, HostsUpdatedInterrupt):
            raise
        except Exception as error:
            if membership_changed():
                raise HorovodInternalError(str(error)) from error
            raise
    return calling


_reset_hooks = []  # weak references to methods that follow the job after a reset
_runs = 0  # elastic runs this process is inside of
_meeting_points = 0  # see meeting_points


def in_run():
    """Whether this process is inside an elastic run (run_fn) of an elastic job: there the State's sync gives
    every worker rank 0's values, so variables created meanwhile keep their own initial values. A worker
    that joined creates lazily (at its first step) what the others created generations before; fetching
    the value from rank 0, as outside a run, would wait for a publication that never comes."""
    return _runs > 0 and is_elastic()


def meeting_points():
    """Changes wherever every worker of the job stands at the same point of the training code: entering and
    leaving an elastic run, and each reset. What the workers count alike (variables created by name, say)
    counts from there, so that a worker that joined counts as the others do."""
    return _meeting_points


def on_reset(method):
    """`method` (a bound method, held weakly) runs after every reset, once the next generation formed: a
    strategy follows the job's new size and this worker's new rank."""
    _reset_hooks.append(weakref.WeakMethod(method))


def reset():
    """The next generation: ends this one, joins the next (init() waits until it forms) and forgets what
    belonged to the old one (process sets name old ranks). Until the state is synchronised, collectives are
    local: whatever a worker runs before its sync (a training step that creates the optimizer's variables,
    as Horovod's examples do) never waits for workers that are elsewhere."""
    removed = None
    try:
        process.shutdown()
    except Exception as error:
        if not membership_changed():
            raise
        # This worker was removed from the job (the process was stopped longer than BYTEPS_TIMEOUT): its
        # generation cannot end cleanly, and init() joins the job again as a new worker would.
        removed = error
    try:
        process.init()
    except Exception as error:
        if removed is None:
            raise
        raise RuntimeError(f"this worker was removed from the elastic job ({removed}) and cannot join it again: "
                           f"{error}") from error
    process_sets.forget_registered()
    _core.set_local_collectives(True)
    for hook in list(_reset_hooks):
        method = hook()
        if method is None:
            _reset_hooks.remove(hook)
        else:
            method()


def run_fn(func, reset_fn=reset):
    """`func(state, ...)` run elastically: on a change of the job's workers it restores the last commit (a
    lost worker), starts the next generation (`reset_fn`), runs the reset callbacks, synchronises the state
    from rank 0 and calls `func` again. No collective may run between init() and the call, except in code
    that every worker, old and new, runs alike."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        global _runs, _meeting_points
        _runs += 1
        _meeting_points += 1
        try:
            return run(state, *args, **kwargs)
        finally:
            _runs -= 1
            _meeting_points += 1

    def run(state, *args, **kwargs):
        collection = DeferredCollection()  # an interrupted attempt's garbage (collection.py)
        try:
            return attempts(state, collection, *args, **kwargs)
        finally:
            collection.collect_aside()

    def attempts(state, collection, *args, **kwargs):
        global _meeting_points
        skip_sync = False
        changed_at = None
        while True:
            try:
                if collectives_are_local():  # from here on the collectives are the job's again
                    _core.set_local_collectives(False)
                    process.pushes_were_local()
                if not skip_sync:
                    internal_errors(state.sync)()
                collection.collect_aside()
                if changed_at is not None:
                    _report(f"the job's workers changed: generation {_core.elastic_state()['generation']} has "
                            f"{process.size()} workers; this worker is rank {process.rank()} (restored, reset "
                            f"and synchronised in {time.monotonic() - changed_at:.2f} s)")
                return internal_errors(func)(state, *args, **kwargs)
            except HorovodInternalError:
                changed_at = time.monotonic()
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as interrupt:
                changed_at = time.monotonic()
                skip_sync = interrupt.skip_sync
            collection.pause()
            reset_fn()
            _meeting_points += 1
            state.on_reset()

    return wrapper


def run(func):
    """Decorator that runs `func(state, ...)` elastically (Horovod's hvd.elastic.run): when the job's workers
    change it restores the last commit (a worker was lost), starts the next generation, runs the state's reset
    callbacks, synchronises the state from rank 0 and calls `func` again."""
    return run_fn(func, reset)
