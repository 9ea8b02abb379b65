"""DistributedGradientTape in asynchronous training (BYTEPS_ENABLE_ASYNC, BYTEPS_STALENESS; docs/strategy.md,
"Training with stragglers"). The tape computes gradients but never sees the step that applies them, so it
cannot push that step's change as DistributedOptimizer does. Instead each gradient() pushes the change its
sources made since they last took the servers' weights (the previous step's, one step late) and assigns the
servers' weights again; the gradients it returns are applied to those. synchronize_weights() pushes the last
step's change.

Each source keeps the weights it last took from the servers (one more copy of the model) beside its flag
(async_weights.OnServers). A variable's tensor on the servers is named after it and after how many
variables of that name the process's tapes met before (every worker meets them in the same order).
"""

import collections

import tensorflow as tf

from bps_tf import compat, process
from bps_tf.ops import async_weights
from bps_tf.ops.variable_keys import held_variable, variable_key

_ResourceVariable = compat.target("ResourceVariable")


class _Source(async_weights.OnServers):
    """A tape's source on the servers, with the weights it last took from them."""

    def __init__(self, variable, name):
        super().__init__(variable, name)
        with tf.init_scope(), tf.device(variable.device):
            self.last_pulled = _ResourceVariable(tf.zeros(variable.shape, variable.dtype), trainable=False,
                                                 name="bps_last_pulled")

    def take(self, weights):
        self.last_pulled.assign(weights)
        return super().take(weights)

    def push_change(self, priority=0):
        return self.push(self.variable.read_value() - self.last_pulled.read_value(), priority)


class _PendingChanges:
    """Every source any tape of the process pushed, in the order met."""

    def __init__(self):
        self._sources = {}  # variable_key -> _Source
        self._labels = collections.Counter()
        async_weights.hold(self)

    def sources(self, variables):
        """The sources of `variables`, met now if new; refuses them before anything is made if they cannot
        be pushed."""
        variables = [held_variable(v) for v in variables]
        async_weights.refuse_gpu_variables_under_xla(variables, "DistributedGradientTape")
        for variable in variables:
            if variable_key(variable) not in self._sources:
                async_weights.claim(variable, "DistributedGradientTape")
                label = variable.name.split(":")[0]
                self._sources[variable_key(variable)] = _Source(variable, f"tape.weights.{label}.{self._labels[label]}")
                self._labels[label] += 1
        return [self._sources[variable_key(v)] for v in variables]

    def known(self, variable):
        return self._sources.get(variable_key(variable))

    def servers_forgot(self):
        for source in self._sources.values():
            source.pushed.assign(False)

    def push_pending(self):
        for source in self._sources.values():
            if bool(source.pushed.numpy()):
                source.push_change()

    def pull(self):
        self.push_pending()  # after push_pending() on every worker, the change is zero: this takes the weights


_pending = []  # the process's _PendingChanges, once a tape pushed


def push_changes(variables, after=()):
    """Each of `variables` pushes its change since it last took the servers' weights (its weights, the first
    time in a generation) once `after` (tensors) are computed, and takes the servers' weights."""
    if not _pending:
        _pending.append(_PendingChanges())
    sources = _pending[0].sources(variables)
    count = len(sources)
    with tf.control_dependencies(list(after)):
        for i, source in enumerate(sources):
            async_weights.as_flag_says(source.pushed, lambda s=source, p=count - i: s.push_change(p),
                                       lambda s=source, p=count - i: s.initialise(p))


def moved(variable, assign):
    """Runs `assign()`, which sets `variable` to weights from elsewhere (a broadcast): the change the variable
    pushes next stays the change its own steps made. Returns what `assign()` returned."""
    source = _pending[0].known(variable) if _pending and process.is_async() else None
    if source is None:
        return assign()
    # Eagerly the order is the program's; in a function, automatic control dependencies keep it (one variable).
    before = source.variable.read_value()
    result = assign()
    source.last_pulled.assign_add(source.variable.read_value() - before)
    return result
