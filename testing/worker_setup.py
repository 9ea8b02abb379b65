"""Set-up shared by the test workers that give their process several logical CPU devices."""

import os
import sys

import tensorflow as tf


def split_cpu(devices):
    """Makes this process's CPU `devices` logical devices; must run before TensorFlow runs anything. Once
    done, asking for the same number again is fine (several checks run in one process: run_checks.py)."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    configured = tf.config.get_logical_device_configuration(cpu)
    if configured is not None and len(configured) == devices:
        return
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)


def devices_from_argv_and_keras():
    """Splits the CPU into argv[1] logical devices (default 2). Returns (devices, the Keras the test runs
    under: tf.keras, which is Keras 3, or Keras 2 with TF_USE_LEGACY_KERAS=1 or on TensorFlow 2.15)."""
    devices = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    split_cpu(devices)
    return devices, tf.keras


def tolerance():
    """(rtol, atol) for comparing trained weights with a single-device reference: tight on CPUs, looser where
    the run is on GPUs (EQUIVALENCE_TOLERANCE="RTOL,ATOL"), whose kernels sum in other orders."""
    rtol, atol = os.environ.get("EQUIVALENCE_TOLERANCE", "1e-5,1e-6").split(",")
    return float(rtol), float(atol)
