"""`flax_gpt.py`'s GPT-style stack written the Flax way, rewritten, as a `scanrewrite-tune` target.

Each factory's function is the training step of the rewritten program, the site written as
`scanrewrite --unroll 4 --targets nnx.scan,linen.scan` writes it: NNX, `nnx.scan` over
`nnx.remat` blocks made with `nnx.vmap` (the step returns the loss, the gradients and the
blocks' state after it: each layer's dropout key and counter); Linen,
`nn.scan(nn.remat(Block))` with the parameters and the dropout stream split per layer. The
tuner's original at these sites is Flax's own scan over remat, so `--memory-budget 1x` is its
memory, and every candidate's loss, gradients (and NNX state) are compared with Flax's own:

    scanrewrite-tune benchmarks/tune_flax_gpt.py:nnx --ks 1,4 --memory-budget 1x --compile-threads 8 -v
    scanrewrite-tune benchmarks/tune_flax_gpt.py:linen --ks 1,4 --memory-budget 1x --compile-threads 8 -v
    scanrewrite-tune benchmarks/tune_flax_gpt.py:nnx_smoke --ks 1,4 --memory-budget 1x -v   # tiny, on the CPU

`nnx_no_dropout` and `linen_no_dropout` are the same stacks with a dropout rate of 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).parent))
from flax_gpt import DTYPE, linen_block, nnx_model, nnx_step  # noqa: E402

import scanrewrite.runtime  # noqa: E402

#: layers, batch, sequence, width, heads: flax_gpt.py's sizes, and tiny ones for the CPU.
FULL, SMALL, SMOKE = (16, 8, 1024, 1024, 16), (4, 8, 1024, 1024, 16), (4, 1, 8, 16, 2)


def _nnx(sizes, dropout=0.1, fp32_softmax=False):
    from flax import nnx

    graphdef, params, rest, x = nnx_model(*sizes, dropout=dropout, fp32_softmax=fp32_softmax)
    forward = scanrewrite.runtime.nnx_scan(nnx.remat(lambda h, block: block(h)), in_axes=(nnx.Carry, 0), out_axes=nnx.Carry, unroll=4)
    return nnx_step(forward, graphdef), (params, rest, x)


def _linen(sizes, dropout=0.1, fp32_softmax=False):
    from flax import linen as nn

    layers, batch, seq, width, heads = sizes
    Block = linen_block(batch, seq, width, heads, dropout, fp32_softmax)
    Stack = scanrewrite.runtime.linen_scan(nn.remat(Block), variable_axes={"params": 0}, split_rngs={"params": True, "dropout": True}, length=layers, unroll=4)
    x = jax.random.normal(jax.random.key(1), (batch, seq, width)).astype(DTYPE)
    keys = {"params": jax.random.key(0), "dropout": jax.random.key(2)}
    params = jax.jit(Stack().init)(keys, x, None)

    def loss(params, x):
        return jnp.mean(Stack().apply(params, x, None, rngs={"dropout": keys["dropout"]})[0].astype(jnp.float32) ** 2)

    return jax.value_and_grad(loss), (params, x)


def nnx():
    """16 layers, batch 8, sequence 1024, width 1024, 16 heads, bfloat16."""
    return _nnx(FULL)


def linen():
    """As `nnx`, written with Linen."""
    return _linen(FULL)


def nnx_no_dropout():
    """As `nnx`, without dropout (each block's dropout stream still there, never drawn from):
    the stack `benchmarks/tune_gpt.py` writes with `jax.lax.scan`."""
    return _nnx(FULL, dropout=0.0)


def linen_no_dropout():
    """As `linen`, without dropout."""
    return _linen(FULL, dropout=0.0)


def nnx_fp32_softmax():
    """As `nnx_no_dropout`, the softmax in float32 (`force_fp32_for_softmax`): what
    `benchmarks/tune_gpt.py` computes."""
    return _nnx(FULL, dropout=0.0, fp32_softmax=True)


def linen_fp32_softmax():
    """As `linen_no_dropout`, the softmax in float32."""
    return _linen(FULL, dropout=0.0, fp32_softmax=True)


def nnx_small():
    """4 layers, batch 8, sequence 1024, width 1024, 16 heads."""
    return _nnx(SMALL)


def linen_small():
    return _linen(SMALL)


def nnx_smoke():
    """4 layers of width 16: the same program in seconds on the CPU."""
    return _nnx(SMOKE)


def linen_smoke():
    return _linen(SMOKE)
