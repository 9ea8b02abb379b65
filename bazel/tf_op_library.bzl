"""The macro for TensorFlow op libraries: TF's own compile flags (read from the installed TensorFlow by
the tf_configure repository rule), linked against TF's framework library and the bps_tf core library."""

load("@local_tensorflow//:defs.bzl", "TF_COPTS")

def bps_tf_op_library(name, srcs, deps = [], copts = []):
    native.cc_binary(
        name = name,
        srcs = srcs,
        copts = TF_COPTS + copts + ["-Wno-sign-compare", "-Werror=unused-result"],
        linkshared = True,
        linkopts = ["-Wl,-rpath,$$ORIGIN"],
        deps = deps + [
            "//cc:core",
            "@local_tensorflow//:tf_framework",
            "@local_tensorflow//:tf_headers",
        ],
    )
