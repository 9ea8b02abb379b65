"""Horovod's elastic TensorFlow API (horovod.tensorflow.elastic) as `hvd.elastic` of `import
bps_tf.tensorflow as hvd`: the names of bps_tf.elastic (bps_tf/elastic/)."""

from bps_tf.elastic import (HorovodInternalError, HostsUpdatedInterrupt, ObjectState, State,  # noqa: F401
                            run)
from bps_tf.elastic.tensorflow_state import TensorFlowKerasState, TensorFlowState  # noqa: F401

__all__ = ["run", "State", "ObjectState", "TensorFlowKerasState", "TensorFlowState", "HorovodInternalError",
           "HostsUpdatedInterrupt"]
