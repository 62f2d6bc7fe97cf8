"""The compiled part of kernbench-accel: two C extensions (the event calendar, the route search), built without
fused multiply-add so that every floating point operation rounds as CPython's own float arithmetic does (the hop
and the search must give bit-identical times and distances)."""

from setuptools import Extension, setup

FLAGS = ["-O2", "-ffp-contract=off", "-fno-fast-math"]

setup(ext_modules=[Extension(f"kernbench.accel.{name}", [f"src/kernbench/accel/{name}.c"], extra_compile_args=FLAGS)
                   for name in ("_calendar", "_routes")])
