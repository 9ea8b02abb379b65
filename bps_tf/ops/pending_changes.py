"""DistributedGradientTape in asynchronous training (BYTEPS_ENABLE_ASYNC, BYTEPS_STALENESS; docs/strategy.md,
"Training with stragglers"). The tape computes gradients but never sees the step that applies them, so it
cannot push that step's change as DistributedOptimizer does. Instead each gradient() pushes the change its
sources made since they last took the servers' weights (the previous step's, one step late) and assigns the
servers' weights again; the gradients it returns are applied to those. synchronize_weights() pushes the last
step's change.

Each source keeps the weights it last took from the servers (one more copy of the model) and a flag: pushed
in this generation of the job. The first push of a generation sends the weights instead of a change (the
servers take the first worker's to arrive). The copies and flags are variables read when a step runs, so a
function traced in one generation still initialises the servers in the next. A variable's tensor on the
servers is named after it and after how many variables of that name the process's tapes met before (every
worker meets them in the same order).
"""

import collections

import tensorflow as tf

from bps_tf import compat, process
from bps_tf.ops import async_weights
from bps_tf.ops.collectives import push_pull_weights
from bps_tf.ops.variable_keys import held_variable, variable_key

_ResourceVariable = compat.target("ResourceVariable")


class _OnServers:
    """One source's name on the servers, the weights it last took from them, and its flag."""

    def __init__(self, variable, name):
        self.variable = held_variable(variable)
        self.name = name
        # Made directly (not through tf.Variable): a tape may meet its sources in a function's later trace.
        with tf.init_scope(), tf.device(self.variable.device):
            self.taken = _ResourceVariable(tf.zeros(self.variable.shape, self.variable.dtype), trainable=False,
                                           name="bps_taken_from_servers")
            self.pushed = _ResourceVariable(False, trainable=False, name="bps_pushed")

    def push(self, value, priority):
        """Pushes `value` and assigns the servers' weights to the variable and to `taken`."""
        weights = push_pull_weights(value, self.name, priority=priority, ordered=True)
        return [self.variable.assign(weights), self.taken.assign(weights)]

    def push_change(self, priority):
        return self.push(self.variable.read_value() - self.taken.read_value(), priority)

    def initialise(self, priority):
        # The flag is set once the push succeeded: after a failed one the next is still the initial push.
        with tf.control_dependencies(self.push(self.variable.read_value(), priority)):
            return self.pushed.assign(True)


class _PendingChanges:
    """Every source any tape of the process pushed, in the order met."""

    def __init__(self):
        self._sources = {}  # variable_key -> _OnServers
        self._labels = collections.Counter()
        async_weights.hold(self)

    def source(self, variable):
        key = variable_key(variable)
        if key not in self._sources:
            label = (getattr(variable, "path", None) or variable.name).split(":")[0]
            self._sources[key] = _OnServers(variable, f"tape.weights.{label}.{self._labels[label]}")
            self._labels[label] += 1
        return self._sources[key]

    def known(self, variable):
        return self._sources.get(variable_key(variable))

    def servers_forgot(self):
        for source in self._sources.values():
            source.pushed.assign(False)

    def push_pending(self):
        for source in self._pushed_sources():
            source.push_change(priority=0)

    def pull(self):
        self.push_pending()  # after push_pending() everywhere, the change is zero: this takes the weights

    def _pushed_sources(self):
        return [s for s in self._sources.values() if bool(s.pushed.numpy())]


_pending = None


def _the_pending_changes():
    global _pending
    if _pending is None:
        _pending = _PendingChanges()
    return _pending


def push_changes(variables, after=()):
    """Each of `variables` pushes its change since it last took the servers' weights (its weights, the first
    time in a generation) once `after` (tensors) are computed, and takes the servers' weights."""
    pending = _the_pending_changes()
    sources = [pending.source(v) for v in variables]
    async_weights.refuse_gpu_variables_under_xla([s.variable for s in sources], "DistributedGradientTape")
    count = len(sources)
    with tf.control_dependencies(list(after)):
        for i, source in enumerate(sources):
            async_weights.as_flag_says(source.pushed, lambda s=source, p=count - i: s.push_change(p),
                                       lambda s=source, p=count - i: s.initialise(p))


def moved(variable, assign):
    """Runs `assign()`, which sets `variable` to weights from elsewhere (a broadcast): the change the variable
    pushes next stays the change its own steps made. Returns what `assign()` returned."""
    source = _pending.known(variable) if _pending is not None and process.is_async() else None
    if source is None:
        return assign()
    # Eagerly the order is the program's; in a function, automatic control dependencies keep it (one variable).
    before = source.variable.read_value()
    result = assign()
    source.taken.assign_add(source.variable.read_value() - before)
    return result
