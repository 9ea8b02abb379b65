"""Compiling CUDA sources with nvcc (Bazel 4 has no CUDA rules): sm_90 machine code plus PTX, so the code
runs on Hopper directly and on newer GPUs through the driver's PTX compiler."""

CUDA_ARCH_FLAGS = [
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

def _cuda_objects_impl(ctx):
    outputs = []
    include_dirs = depset(transitive = [h[CcInfo].compilation_context.includes for h in ctx.attr.deps])
    system_dirs = depset(transitive = [h[CcInfo].compilation_context.system_includes for h in ctx.attr.deps])
    headers = depset(ctx.files.hdrs, transitive = [h[CcInfo].compilation_context.headers for h in ctx.attr.deps])
    for src in ctx.files.srcs:
        out = ctx.actions.declare_file(ctx.label.name + "/" + src.basename.replace(".cu", ".pic.o"))
        args = ctx.actions.args()
        args.add_all(["-c", src.path, "-o", out.path, "-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-I", "."])
        args.add_all(CUDA_ARCH_FLAGS)
        args.add_all(include_dirs, before_each = "-I")
        args.add_all(system_dirs, before_each = "-I")
        ctx.actions.run(
            executable = ctx.executable._nvcc,
            arguments = [args],
            inputs = depset([src], transitive = [headers]),
            outputs = [out],
            mnemonic = "Nvcc",
            progress_message = "nvcc %s" % src.short_path,
            use_default_shell_env = True,
        )
        outputs.append(out)
    return [DefaultInfo(files = depset(outputs))]

cuda_objects = rule(
    implementation = _cuda_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        "deps": attr.label_list(providers = [CcInfo]),
        "_nvcc": attr.label(default = "@local_cuda//:nvcc", allow_single_file = True, executable = True,
                            cfg = "host"),
    },
)

def bps_cuda_library(name, cu_srcs = [], srcs = [], hdrs = [], deps = [], tags = [], **kwargs):
    """A cc_library whose .cu files are compiled by nvcc and whose .cc files by the C++ compiler.

    Tagged manual: CUDA targets are built only when named (Makefile's CUDA_TARGETS), never by //cc/...
    on a machine without CUDA."""
    objects = []
    tags = tags + ["manual"]
    if cu_srcs:
        cuda_objects(name = name + "_nvcc", srcs = cu_srcs, hdrs = hdrs, deps = deps + ["@local_cuda//:cuda"],
                     tags = tags, testonly = kwargs.get("testonly", False))
        objects = [":" + name + "_nvcc"]
    native.cc_library(
        name = name,
        srcs = srcs + objects,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cuda"],
        copts = ["-Werror=unused-result"],
        linkstatic = True,
        tags = tags,
        **kwargs
    )
