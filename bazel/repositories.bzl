"""Repository rules that find third-party code already on the machine: no downloads.

The Python interpreter is the one named by PYTHON_BIN_PATH (the Makefile passes the
project's .venv); UCX comes from pkg-config; gtest from the system (Debian libgtest-dev).
"""

_PYTHON_ENV = ["PYTHON_BIN_PATH"]

def _python_bin(ctx):
    python = ctx.os.environ.get("PYTHON_BIN_PATH", "")
    if python and not python.startswith("/"):
        # Relative to the workspace, as the user typed it there (repository rules run elsewhere).
        python = str(ctx.path(Label("//:WORKSPACE")).dirname) + "/" + python
    if python:
        return python
    found = ctx.which("python3")
    if found == None:
        fail("No Python found: set PYTHON_BIN_PATH to the interpreter that has pybind11 (and TensorFlow).")
    return str(found)

def _query_python(ctx, parts):
    script = ctx.path(Label("//bazel:find_python_deps.py"))
    result = ctx.execute([_python_bin(ctx), str(script)] + parts)
    if result.return_code != 0:
        fail("Could not query Python for %s:\n%s" % (parts, result.stderr))
    return json.decode(result.stdout)

def _python_configure_impl(ctx):
    info = _query_python(ctx, ["python"])
    ctx.symlink(info["python_include"], "python_include")
    ctx.symlink(info["pybind11_include"], "pybind11_include")
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "python_headers",
    hdrs = glob(["python_include/**/*.h"]),
    includes = ["python_include"],
)

cc_library(
    name = "pybind11",
    hdrs = glob(["pybind11_include/**/*.h"]),
    includes = ["pybind11_include"],
    deps = [":python_headers"],
)
""")
    ctx.file("defs.bzl", "EXTENSION_SUFFIX = %r\n" % info["extension_suffix"])

python_configure = repository_rule(
    implementation = _python_configure_impl,
    environ = _PYTHON_ENV,
    local = True,
)

def _tf_configure_impl(ctx):
    info = _query_python(ctx, ["tensorflow"])
    ctx.symlink(info["tf_include"], "include")
    for lib in info["tf_libs"] + info["tf_xla_libs"]:
        ctx.symlink(info["tf_lib_dir"] + "/" + lib, "lib/" + lib)
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "tf_headers",
    hdrs = glob(["include/**/*"], exclude = ["include/external/**/*.py"]),
    includes = {includes},
)

cc_library(
    name = "tf_framework",
    srcs = {libs},
    deps = [":tf_headers"],
)

# XLA's builder, the tf2xla kernel registry and XLA's FFI registry (empty where TensorFlow lacks them).
cc_library(
    name = "tf_xla",
    srcs = {xla_libs},
    deps = [":tf_headers"],
)
""".format(
        libs = repr(["lib/" + lib for lib in info["tf_libs"]]),
        xla_libs = repr(["lib/" + lib for lib in info["tf_xla_libs"]]),
        includes = repr(["include"] + ["include/" + d for d in info["tf_xla_includes"]]),
    ))
    ctx.file("defs.bzl", "TF_COPTS = %r\nTF_VERSION = %r\nTF_HAS_XLA = %r\n" % (
        info["tf_copts"],
        info["tf_version"],
        info["tf_xla"],
    ))

tf_configure = repository_rule(
    implementation = _tf_configure_impl,
    environ = _PYTHON_ENV,
    local = True,
)

def _pkg_config(ctx, args):
    tool = ctx.which("pkg-config")
    if tool == None:
        fail("pkg-config not found: install it (apt-get install pkg-config).")
    result = ctx.execute([str(tool)] + args)
    if result.return_code != 0:
        fail("pkg-config %s failed: %s\nInstall UCX (apt-get install libucx-dev)." % (args, result.stderr))
    return result.stdout.strip()

def _ucx_configure_impl(ctx):
    include_dir = _pkg_config(ctx, ["--variable=includedir", "ucx"])
    lib_dir = _pkg_config(ctx, ["--variable=libdir", "ucx"])
    ctx.symlink(include_dir + "/ucp", "include/ucp")
    ctx.symlink(include_dir + "/ucs", "include/ucs")
    ctx.symlink(include_dir + "/uct", "include/uct")
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "ucx",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
    linkopts = ["-L{lib_dir}", "-Wl,-rpath,{lib_dir}", "-lucp", "-lucs"],
)
""".format(lib_dir = lib_dir))

ucx_configure = repository_rule(
    implementation = _ucx_configure_impl,
    environ = ["PKG_CONFIG_PATH"],
    local = True,
)

def _openssl_configure_impl(ctx):
    include_dir = _pkg_config(ctx, ["--variable=includedir", "libcrypto"])
    lib_dir = _pkg_config(ctx, ["--variable=libdir", "libcrypto"])
    if not ctx.path(lib_dir + "/libcrypto.a").exists:
        fail("libcrypto.a not found in %s: install libssl-dev." % lib_dir)
    ctx.symlink(include_dir + "/openssl", "include/openssl")
    ctx.symlink(lib_dir + "/libcrypto.a", "lib/libcrypto.a")
    # Linked statically with its symbols kept local: TensorFlow's framework library exports BoringSSL's
    # functions of the same names (HMAC, EVP_sha256, ...) into the process, and a dynamic libcrypto would
    # have its calls bound to those.
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "crypto",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
    srcs = ["lib/libcrypto.a"],
    linkopts = ["-Wl,--exclude-libs,libcrypto.a", "-pthread", "-ldl"],
)
""")

openssl_configure = repository_rule(
    implementation = _openssl_configure_impl,
    environ = ["PKG_CONFIG_PATH"],
    local = True,
)

def _system_gtest_impl(ctx):
    include_dir = "/usr/include"
    lib_dir = "/usr/lib/x86_64-linux-gnu"
    if not ctx.path(include_dir + "/gtest/gtest.h").exists:
        fail("gtest headers not found: install libgtest-dev.")
    ctx.symlink(include_dir + "/gtest", "include/gtest")
    ctx.symlink(include_dir + "/gmock", "include/gmock")
    for lib in ["libgtest.a", "libgtest_main.a", "libgmock.a"]:
        ctx.symlink(lib_dir + "/" + lib, "lib/" + lib)
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "gtest",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
    srcs = ["lib/libgmock.a", "lib/libgtest.a"],
    linkopts = ["-pthread"],
)

cc_library(
    name = "gtest_main",
    srcs = ["lib/libgtest_main.a"],
    deps = [":gtest"],
)
""")

system_gtest = repository_rule(
    implementation = _system_gtest_impl,
    local = True,
)

def _find_cuda_home(ctx):
    home = ctx.os.environ.get("CUDA_HOME", "")
    if home and ctx.path(home + "/bin/nvcc").exists:
        return home
    if ctx.path("/usr/local/cuda/bin/nvcc").exists:
        return "/usr/local/cuda"
    nvcc = ctx.which("nvcc")
    if nvcc != None:
        return str(nvcc.realpath.dirname.dirname)
    return None

def _find_nccl_home(ctx):
    home = ctx.os.environ.get("BYTEPS_NCCL_HOME", "")
    if home:
        return home
    result = ctx.execute([_python_bin(ctx), "-c", "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])"])
    if result.return_code == 0:
        return result.stdout.strip()
    return None

def _cuda_configure_impl(ctx):
    cuda_home = _find_cuda_home(ctx)
    nccl_home = _find_nccl_home(ctx) if cuda_home else None
    if cuda_home == None or nccl_home == None:
        # No CUDA here: the CUDA targets are not built (they are only under --config=cuda).
        why = "no nvcc found (set CUDA_HOME)" if cuda_home == None else \
            "no NCCL found (pip install nvidia-nccl-cu13, or set BYTEPS_NCCL_HOME)"
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

# Placeholders: CUDA targets are built only under --config=cuda, on a machine with CUDA.
exports_files(["nvcc"])

cc_library(name = "cuda", hdrs = glob(["cuda_include/*.h"]), includes = ["cuda_include"])

cc_library(name = "nccl")
""")
        ctx.file("nvcc", "#!/bin/sh\necho 'bps_tf: %s' >&2\nexit 1\n" % why, executable = True)
        # So that a --config=cuda build says why, instead of a missing header.
        for header in ["cuda_runtime.h", "nccl.h"]:
            ctx.file("cuda_include/" + header, "#error \"bps_tf: --config=cuda needs CUDA and NCCL: %s\"\n" % why)
        ctx.file("defs.bzl", "CUDA_FOUND = False\nCUDA_MISSING_REASON = %r\n" % why)
        return
    ctx.symlink(cuda_home + "/include", "cuda_include")
    # A wrapper, not a symlink: nvcc finds its own tools relative to the path it was started by.
    ctx.file("nvcc", "#!/bin/sh\nexec %s/bin/nvcc \"$@\"\n" % cuda_home, executable = True)
    ctx.symlink(cuda_home + "/lib64/libcudart_static.a", "lib/libcudart_static.a")
    ctx.symlink(nccl_home + "/include", "nccl_include")
    ctx.symlink(nccl_home + "/lib/libnccl.so.2", "lib/libnccl.so.2")
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

exports_files(["nvcc"])

filegroup(name = "cuda_headers_files", srcs = glob(["cuda_include/**"]))

# CUDA runtime, linked statically so binaries need only the driver on the GPU machine.
cc_library(
    name = "cuda",
    hdrs = glob(["cuda_include/**/*.h", "cuda_include/**/*.hpp"]),
    includes = ["cuda_include"],
    srcs = ["lib/libcudart_static.a"],
    linkopts = ["-ldl", "-lrt", "-lpthread"],
)

# NCCL from the machine (soname libnccl.so.2, found at run time through the loader's path).
cc_library(
    name = "nccl",
    hdrs = glob(["nccl_include/*.h"]),
    includes = ["nccl_include"],
    srcs = ["lib/libnccl.so.2"],
    deps = [":cuda"],
)
""")
    ctx.file("defs.bzl", "CUDA_FOUND = True\nCUDA_MISSING_REASON = ''\n")

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_HOME", "PATH", "BYTEPS_NCCL_HOME", "PYTHON_BIN_PATH"],
    local = True,
)

def bps_tf_dependencies():
    cuda_configure(name = "local_cuda")
    python_configure(name = "local_python")
    tf_configure(name = "local_tensorflow")
    ucx_configure(name = "local_ucx")
    openssl_configure(name = "local_openssl")
    system_gtest(name = "local_gtest")
