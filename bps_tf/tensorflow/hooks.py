"""TF1-style training: a SessionRunHook that starts every worker from worker root_rank's variables."""

import tensorflow as tf

from bps_tf.ops import broadcast_variables


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """Broadcasts all global variables from `root_rank` once the session is created."""

    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self._broadcast = None

    def begin(self):
        if self._broadcast is None or self._broadcast.graph != tf.compat.v1.get_default_graph():
            with tf.device(self.device):
                self._broadcast = broadcast_variables(tf.compat.v1.global_variables(), self.root_rank,
                                                      name="global_variables")

    def after_create_session(self, session, coord):
        session.run(self._broadcast)
