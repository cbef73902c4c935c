"""Starts JAX on the CPU for the JAX twins, with the benchmark's thread count."""
import os
import sys

from peer_protocol import fail


def start_jax(threads):
    """Imports JAX on the CPU platform. PJRT_NPROC must be set before JAX starts: jaxlib 0.4.35's
    CPU client sizes its thread pool by it (XLA_FLAGS' intra_op_parallelism_threads is not read).
    Exit 77 when JAX is not installed."""
    if threads:
        os.environ["PJRT_NPROC"] = str(threads)
    try:
        import jax
    except ImportError:
        fail(f"JAX is not installed in {sys.executable} (bash bench/peers/setup.sh)", 77)
    jax.config.update("jax_platforms", "cpu")
    return jax
