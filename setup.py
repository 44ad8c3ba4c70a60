"""The one C extension (protocol/_recordwalk.c: the record walk of protocol/record_check.py); the
rest of the package is declared in pyproject.toml. Optional: without a compiler the install still
succeeds and record_check walks records in Python."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("protocol._recordwalk", ["protocol/_recordwalk.c"], extra_compile_args=["-O2"], optional=True)
    ]
)
