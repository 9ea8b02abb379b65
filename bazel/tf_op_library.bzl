"""The macro for TensorFlow op libraries: TF's own compile flags (read from the installed TensorFlow by
the tf_configure repository rule), linked against TF's framework library and the bps_tf core library.
`xla_srcs` (the ops' XLA lowering) are compiled where the installed TensorFlow exports XLA's builder and FFI,
with BPS_TF_XLA defined."""

load("@local_tensorflow//:defs.bzl", "TF_COPTS", "TF_HAS_XLA")

def bps_tf_op_library(name, srcs, xla_srcs = [], deps = [], copts = []):
    native.cc_binary(
        name = name,
        srcs = srcs + (xla_srcs if TF_HAS_XLA else []),
        copts = TF_COPTS + copts + ["-Wno-sign-compare", "-Werror=unused-result"] +
                (["-DBPS_TF_XLA=1"] if TF_HAS_XLA else []),
        linkshared = True,
        linkopts = ["-Wl,-rpath,$$ORIGIN"],
        deps = deps + [
            "//cc:core",
            "@local_tensorflow//:tf_framework",
            "@local_tensorflow//:tf_headers",
        ] + (["@local_tensorflow//:tf_xla"] if TF_HAS_XLA else []),
    )
