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
    }


PARTS = {"python": python_info, "tensorflow": tensorflow_info}

if __name__ == "__main__":
    result = {}
    for part in sys.argv[1:]:
        result.update(PARTS[part]())
    print(json.dumps(result))
