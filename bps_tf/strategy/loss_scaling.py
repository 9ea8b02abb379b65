"""Keras 3's LossScaleOptimizer under BytePSStrategy: the gradients are reduced before the finiteness check.

Keras checks each process's own gradients, then reduces them inside the branch that applies them. Under
BytePSStrategy that has two faults: one worker could skip a step (and its push_pulls) that the others take,
and the push_pulls, inside a conditional, cannot start before the whole backward pass is done (XLA keeps a
branch's work inside the branch), so mixed precision loses the overlap of communication with the backward
pass. Reduced first, in the replica function itself, the gradients travel as the backward pass produces
them, and every worker checks the same sums and takes the same decision. A model with gradients that Keras
writes into their variable instead of applying them (`overwrite_with_gradient`, float8 training) keeps
Keras's order, with the decision agreed by a push_pull of each worker's verdict.
"""

import collections
import threading

import tensorflow as tf

from bps_tf import compat
from bps_tf.strategy import gradient_names

# The optimizers (a LossScaleOptimizer and its inner one) inside an apply() whose gradients were reduced
# before it, with how many replicas are inside it: a process's replicas trace their steps in threads of their
# own, which meet in the inner optimizer's merge_call.
_reduced_first = collections.Counter()
_lock = threading.Lock()


def _bps_replica_context(is_bps_strategy):
    """The replica context of a BytePSStrategy step being traced, else None."""
    context = tf.distribute.get_replica_context()
    in_replica = context is not None and tf.distribute.has_strategy()
    return context if in_replica and is_bps_strategy(tf.distribute.get_strategy()) else None


def install(is_bps_strategy):
    original_apply = compat.target("strategy.LossScaleOptimizer.apply")
    original_reduce = compat.target("strategy.TFOptimizer._all_reduce_sum_gradients")
    local_check = compat.target("LossScaleOptimizer.check_finite")
    kept_local = compat.target("Optimizer._overwrite_variable_with_gradient")

    def apply(self, grads, trainable_variables=None):
        context = _bps_replica_context(is_bps_strategy)
        if context is None or trainable_variables is None:  # Keras fit passes the variables; without: the vote
            return original_apply(self, grads, trainable_variables)
        grads, variables = list(grads), list(trainable_variables)
        chosen = [i for i, (g, v) in enumerate(zip(grads, variables)) if g is not None and not kept_local(self, v)]
        if len(chosen) < sum(g is not None for g in grads):
            return original_apply(self, grads, variables)  # some stay local: decide by agreement
        if chosen:
            pairs = [(grads[i], variables[i]) for i in chosen]
            with gradient_names.named_for_backup_workers(self.inner_optimizer, pairs):
                sums = context.all_reduce(tf.distribute.ReduceOp.SUM, [grads[i] for i in chosen])
            for i, total in zip(chosen, sums):
                grads[i] = total
        optimizers = (id(self), id(self.inner_optimizer))
        with _lock:
            _reduced_first.update(optimizers)
        try:
            return original_apply(self, grads, variables)
        finally:
            with _lock:
                _reduced_first.subtract(optimizers)
                for optimizer in optimizers:
                    if _reduced_first[optimizer] <= 0:
                        del _reduced_first[optimizer]

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if _reduced_first[id(self)]:
            return list(grads_and_vars)
        return original_reduce(self, grads_and_vars)

    def check_finite(self, grads):
        finite = local_check(self, grads)
        context = _bps_replica_context(is_bps_strategy)
        if context is None or _reduced_first[id(self)]:
            return finite  # every process checks the same sums
        non_finite = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.cast(tf.logical_not(finite), tf.float32))
        return tf.equal(non_finite, 0.0)

    compat.replace("strategy.LossScaleOptimizer.apply", apply)
    compat.replace("strategy.TFOptimizer._all_reduce_sum_gradients", _all_reduce_sum_gradients)
    compat.replace("LossScaleOptimizer.check_finite", check_finite)
