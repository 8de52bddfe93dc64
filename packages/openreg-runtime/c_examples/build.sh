#!/bin/sh
# Builds one of these examples against the installed runtime, as any program
# or extension downstream builds against it:
#     sh build.sh vector_add.c vector_add && ./vector_add
# `python` is the interpreter whose environment holds openreg-runtime.
# tests/test_native.py runs this script; the guide quotes it.
set -e
# LITERALINCLUDE START: BUILD_AGAINST_THE_RUNTIME
INC=$(python -c "import openreg_runtime as r; print(r.get_include())")
LIB=$(python -c "import openreg_runtime as r; print(r.get_library_dir())")
cc -std=c11 "$1" -I"$INC" -L"$LIB" -lopenreg -Wl,-rpath,"$LIB" -o "$2"
# LITERALINCLUDE END: BUILD_AGAINST_THE_RUNTIME
