"""The op library's file name. The Makefile, scripts/build_ops.sh and setup-time tools ask for it through
`python -c 'from bps_tf import compat; print(compat.op_library_name())'`, without TensorFlow loaded."""

from bps_tf.compat import keras_flavour, versions


def op_library_name():
    """The file name of the op library built for the installed TensorFlow line: each line has its own, as
    an op library works only with the TensorFlow it was compiled against."""
    return f"_bps_ops_tf{versions.major_minor(keras_flavour.installed_version('tensorflow'))}.so"
