"""Thin wrappers so compile options for the project's C++ live in one place."""

BPS_COPTS = [
    "-fvisibility=default",
    "-Wno-sign-compare",
    # A dropped Status ([[nodiscard]]) is an error.
    "-Werror=unused-result",
]

def bps_cc_library(name, copts = [], **kwargs):
    native.cc_library(
        name = name,
        copts = BPS_COPTS + copts,
        linkstatic = True,
        alwayslink = True,
        **kwargs
    )

def bps_cc_test(name, deps = [], copts = [], size = "small", **kwargs):
    native.cc_test(
        name = name,
        copts = BPS_COPTS + copts,
        size = size,
        deps = deps + ["@local_gtest//:gtest_main"],
        **kwargs
    )
