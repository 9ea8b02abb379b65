"""Elastic training (docs/elastic.md): a job whose workers may come and go, with Horovod's elastic API,
offered as `bps.elastic` (`import bps_tf as bps`), `bps_tf.tensorflow.elastic` and `bps_tf.keras.elastic`.

Framework-neutral, as Horovod's horovod.common.elastic:
  generations     run_fn and `run`, the next generation's reset, the two exceptions, what this process knows
                  of the elastic job
  state           State and ObjectState: commit, restore, sync
  collection      when an interrupted attempt's garbage is collected
Each framework's states:
  tensorflow_state  TensorFlowKerasState, TensorFlowState
  keras_state       KerasState and the callbacks that commit it during fit
What bpslaunch does for elastic jobs (restarting workers, telling the job's end) is in bps_tf/launcher, which
imports no TensorFlow. The TensorFlow states are loaded on first use, so that a job without TensorFlow (NumPy
arrays through bps_tf.numpy) runs elastically too.
"""

from bps_tf.elastic.generations import HorovodInternalError, HostsUpdatedInterrupt, run
from bps_tf.elastic.state import ObjectState, State

_TENSORFLOW_NAMES = ("TensorFlowKerasState", "TensorFlowState")


def __getattr__(name):
    if name in _TENSORFLOW_NAMES:
        from bps_tf.elastic import tensorflow_state

        return getattr(tensorflow_state, name)
    raise AttributeError(f"module 'bps_tf.elastic' has no attribute '{name}'")


def __dir__():
    return sorted(list(globals()) + list(_TENSORFLOW_NAMES))


__all__ = ["run", "State", "ObjectState", "TensorFlowKerasState", "TensorFlowState", "HorovodInternalError",
           "HostsUpdatedInterrupt"]
