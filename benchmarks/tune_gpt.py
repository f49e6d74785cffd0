"""The GPT-style stack of `memory_curve.py` as a user's program for `scanrewrite-tune`.

Its scan is written as `jax.lax.scan(jax.checkpoint(block), h, params)` (`lax.scan` of the
stack does not fit a 16 GiB device) and rewritten by `scanrewrite --unroll 4`; the tuner, given
a memory budget, picks the fastest program that fits:

    scanrewrite-tune benchmarks/tune_gpt.py:factory --ks 1,4 --memory-budget 6.5GiB   # an accelerator
    scanrewrite-tune benchmarks/tune_gpt.py:smoke --ks 1 --memory-budget 2x          # tiny, on the CPU
    python benchmarks/tune_budgets.py tune_gpt.py:medium tune_llama.py:medium         # issue 52's three budgets
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).parent))
from memory_curve import gpt_shape  # noqa: E402

import scanrewrite.runtime  # noqa: E402


def _program(shape):
    params, h0, _ = shape.arrays()

    def loss(params, h0):
        h, _ = scanrewrite.runtime.scan(jax.checkpoint(shape.step(params)), h0, params, unroll=4)
        return jnp.mean(h.astype(jnp.float32) ** 2)

    return jax.value_and_grad(loss, argnums=(0, 1)), (params, h0)


def factory():
    """16 layers, batch 8, sequence 1024, width 1024, 16 heads, bfloat16."""
    return _program(gpt_shape(16, 8, 1024, 1024, 16, repeats=1))


def medium():
    """6 layers, batch 8, sequence 1024, width 1024, 16 heads: six tuner runs (two stacks, three budgets) in one device command of 10 minutes."""
    return _program(gpt_shape(6, 8, 1024, 1024, 16, repeats=1))


def small():
    """4 layers, batch 8, sequence 1024, width 1024, 16 heads: what fitted the device time left."""
    return _program(gpt_shape(4, 8, 1024, 1024, 16, repeats=1))


def smoke():
    """4 layers of width 8: the same program in a second on the CPU."""
    return _program(gpt_shape(4, 1, 4, 8, 2, repeats=1))
