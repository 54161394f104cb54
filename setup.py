# The project is described in pyproject.toml; this file only hands the cffi
# build of the C core to setuptools (cffi_modules has no pyproject.toml form).
from setuptools import setup

setup(cffi_modules=["build_core.py:ffi"])
