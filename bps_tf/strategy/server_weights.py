"""BytePSStrategy in asynchronous training (BYTEPS_ENABLE_ASYNC, BYTEPS_STALENESS; docs/strategy.md, "Training
with stragglers"): the servers hold the trainable variables. Gradients are not reduced across workers (each
worker's optimizer applies its own); every update of a trainable variable pushes the change it made and
assigns the servers' weights to the variable's local copies.

Each trainable variable is one tensor on the servers, named after the variable and how many of that name this
process created before (the same on every worker). Its creation, from worker 0's value, initialises the
servers' copy (the first worker's push of a name sets it), so that updates push changes only; a new
generation (init() after shutdown(), an elastic reset) initialises them again from this worker's values.
"""

import collections

import tensorflow as tf

from bps_tf import process
from bps_tf.elastic import generations
from bps_tf.ops.collectives import push_pull_weights


class ServerWeights:
    def __init__(self):
        self._names = {}  # id(variable) -> its tensor's name
        self._variables = []  # keeps them alive (and their ids unique), in creation order
        self._created = collections.Counter()
        process.on_generation_start(self._initialise_all)

    def created(self, variable):
        """A variable the strategy just created: a trainable one initialises the servers' copy."""
        if not getattr(variable, "trainable", False):
            return
        base = variable.name.split(":")[0]
        name = f"strategy.weights.{base}.{self._created[base]}"
        self._created[base] += 1
        self._names[id(variable)] = name
        self._variables.append(variable)
        with tf.init_scope():  # a variable made while a function is traced is initialised outside it
            self._pull(variable, tf.identity(variable.values[0]), name)

    def update(self, variable, apply, assignment=False):
        """Runs `apply()` (the optimizer's update of `variable`'s local copies), then pushes the change and
        assigns the servers' weights. Inside a tf.function the reads, the update and the assignments keep this
        order by TensorFlow's automatic control dependencies (they use one variable).

        An `assignment` (restoring a checkpoint, set_weights, a broadcast) is made by every worker alike:
        worker 0 pushes its change and takes the servers' weights, every other worker pushes no change (so
        that the workers' clocks of bounded staleness stay together) and keeps the value it assigned."""
        name = self._names.get(id(variable))
        if name is None:
            return apply()
        before = tf.identity(variable.values[0])
        result = apply()
        pushes = not assignment or self._pushes_assignments()
        if pushes and (not assignment or process.rank() == 0):
            self._pull(variable, tf.identity(variable.values[0]) - before, name)
        elif pushes:
            push_pull_weights(tf.zeros_like(before), name)
        return result

    @staticmethod
    def _pushes_assignments():
        """False in an elastic job whose workers changed (restoring the last commit: the next generation's
        start sends the weights) or that trains alone before its sync."""
        return not (process.is_elastic() and (generations.membership_changed() or generations.collectives_are_local()))

    def _initialise_all(self):
        for variable in self._variables:
            self._pull(variable, tf.identity(variable.values[0]), self._names[id(variable)])

    @staticmethod
    def _pull(variable, value, name):
        weights = push_pull_weights(value, name)
        for component in variable.values:
            with tf.device(component.device):
                component.assign(weights)
