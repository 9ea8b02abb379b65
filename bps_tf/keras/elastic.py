"""Horovod's elastic Keras API (horovod.tensorflow.keras.elastic) as `hvd.elastic` of `import bps_tf.keras as
hvd`: the names of bps_tf.elastic (bps_tf/elastic/) and the Keras state with its callbacks."""

from bps_tf.elastic import (HorovodInternalError, HostsUpdatedInterrupt, ObjectState, State,  # noqa: F401
                            run)
from bps_tf.elastic.keras_state import (CommitStateCallback, KerasState, UpdateBatchStateCallback,  # noqa: F401
                                        UpdateEpochStateCallback)
from bps_tf.elastic.tensorflow_state import TensorFlowKerasState, TensorFlowState  # noqa: F401

__all__ = ["run", "State", "ObjectState", "KerasState", "TensorFlowKerasState", "TensorFlowState",
           "CommitStateCallback", "UpdateBatchStateCallback", "UpdateEpochStateCallback", "HorovodInternalError",
           "HostsUpdatedInterrupt"]
