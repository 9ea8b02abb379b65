"""Prints, as JSON, where the Python-side build dependencies live.

Run by the repository rules in bazel/repositories.bzl with the project's Python.
Only the parts asked for on the command line are imported, so a missing
TensorFlow does not stop the core from building.
"""
import json
import sys
import sysconfig


def python_info():
    import pybind11
    return {
        "python_include": sysconfig.get_paths()["include"],
        "pybind11_include": pybind11.get_include(),
        "extension_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
    }


# What the XLA lowering of the ops needs from an installed TensorFlow: the tf2xla kernel API, XLA's builder
# and its FFI (typed custom calls), the third-party headers they include, and the library that exports them.
XLA_HEADERS = ("tensorflow/compiler/tf2xla/xla_op_kernel.h", "xla/hlo/builder/xla_builder.h", "xla/ffi/api/ffi.h")
XLA_INCLUDE_DIRS = ("external/highwayhash", "external/farmhash_archive/src")
XLA_LIBRARY = "libtensorflow_cc.so.2"


def _xla_info(include, lib_dir):
    import os

    present = all(os.path.exists(os.path.join(include, p)) for p in XLA_HEADERS + XLA_INCLUDE_DIRS) and \
        os.path.exists(os.path.join(lib_dir, XLA_LIBRARY))
    return {
        "tf_xla": present,
        "tf_xla_includes": list(XLA_INCLUDE_DIRS) if present else [],
        "tf_xla_libs": [XLA_LIBRARY] if present else [],
    }


def tensorflow_info():
    import tensorflow as tf
    compile_flags = tf.sysconfig.get_compile_flags()
    link_flags = tf.sysconfig.get_link_flags()
    include = [f[2:] for f in compile_flags if f.startswith("-I")][0]
    lib_dir = [f[2:] for f in link_flags if f.startswith("-L")][0]
    libs = [f[3:] for f in link_flags if f.startswith("-l:")]
    return {
        "tf_include": include,
        "tf_lib_dir": lib_dir,
        "tf_libs": libs,
        "tf_copts": [f for f in compile_flags if not f.startswith("-I")],
        "tf_version": tf.__version__,
        **_xla_info(include, lib_dir),
    }


PARTS = {"python": python_info, "tensorflow": tensorflow_info}

if __name__ == "__main__":
    result = {}
    for part in sys.argv[1:]:
        result.update(PARTS[part]())
    print(json.dumps(result))
