"""This worker's communication figures as tf.summary scalars, for custom training loops (Keras's fit has
bps_tf.keras.callbacks.CommunicationMetrics)."""

import tensorflow as tf


def write_communication_summaries(meter, steps, step=None):
    """Writes `meter.read(steps)` (a bps_tf.communication_metrics.CommunicationMeter: the figures per step of
    the last `steps` steps) to the default summary writer at `step` (default: tf.summary's default step) and
    returns them:

        meter = bps.CommunicationMeter()
        with tf.summary.create_file_writer(logdir).as_default():
            for step in range(steps):
                train_step()
                if (step + 1) % 10 == 0:
                    bps.write_communication_summaries(meter, steps=10, step=step)
    """
    figures = meter.read(steps)
    for name, value in figures.items():
        tf.summary.scalar(name, value, step=step)
    return figures
