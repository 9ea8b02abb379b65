"""Local gradient accumulation for backward_passes_per_step > 1: every call adds the gradients to local
sums; every Nth call passes their sum (or mean) on (to be reduced across workers and applied) and resets
them."""

import tensorflow as tf


class LocalAccumulator:
    def __init__(self, steps, average=False):
        self.steps = steps
        self._divisor = steps if average else 1
        self._sums = None
        self._counter = None

    def variables(self):
        return [] if self._sums is None else [v for v in self._sums if v is not None] + [self._counter]

    def _create(self, grads):
        # Created outside any tf.function or branch, once.
        with tf.init_scope():
            self._counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="bps_accumulation_counter")
            self._sums = [
                None if g is None else tf.Variable(tf.zeros(g.shape, g.dtype), trainable=False,
                                                   name="bps_accumulated_gradient")
                for g in grads
            ]

    def run(self, grads, apply, prepare):
        """apply(mean_grads) on every `steps`-th call; prepare() creates what apply would create lazily."""
        if self.steps == 1:
            return apply(grads)
        grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
        if self._sums is None:
            self._create(grads)
            prepare()
        added = [s.assign_add(g) for s, g in zip(self._sums, grads) if g is not None]
        with tf.control_dependencies(added):
            count = self._counter.assign_add(1)

        def flush():
            totals = [None if s is None else s.read_value() / self._divisor for s in self._sums]
            applied = apply(totals)
            # (tf-keras returns its iteration variable: nothing to depend on, tf.function orders it anyway)
            after = [applied] if isinstance(applied, (tf.Tensor, tf.Operation)) else []
            with tf.control_dependencies(after):
                resets = [s.assign(tf.zeros_like(s)) for s in self._sums if s is not None]
            with tf.control_dependencies(resets):
                return tf.constant(True)

        return tf.cond(tf.equal(count % self.steps, 0), flush, lambda: tf.constant(False))
