#!/usr/bin/env python3
"""Prints the versions of the peers' frameworks in the interpreter that runs it, one line:
"Python 3.11.7, torch 2.5.1+cu124, jax 0.4.35, jaxlib 0.4.35, numpy 2.4.6" (a missing one is left
out). scripts/bench-report.sh prints it under the performance tables for each interpreter.

  build/peers-venv/bin/python bench/peers/versions.py
"""
import importlib
import platform

parts = [f"Python {platform.python_version()}"]
for name in ("torch", "jax", "jaxlib", "numpy"):
    try:
        parts.append(f"{name} {importlib.import_module(name).__version__}")
    except Exception:  # not installed, or broken: not this interpreter's peer
        pass
print(", ".join(parts))
