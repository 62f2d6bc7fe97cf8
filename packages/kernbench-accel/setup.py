"""The compiled part of kernbench-accel: one C extension, built without fused multiply-add so that every floating
point operation rounds as CPython's own float arithmetic does (the hop step must give bit-identical times)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("kernbench.accel._calendar", ["src/kernbench/accel/_calendar.c"],
                             extra_compile_args=["-O2", "-ffp-contract=off", "-fno-fast-math"])])
