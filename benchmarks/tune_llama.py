"""A second bfloat16 stack for `scanrewrite-tune`: RMSNorm, rotary causal attention and a SwiGLU
MLP (LLaMA-style), each layer with its own parameters scanned over as `xs`.

Written as `tune_gpt.py`'s stack is, `jax.lax.scan(jax.checkpoint(block), h, params)` rewritten
by `scanrewrite --unroll 4`, so the tuner's reference is the checkpointed scan:

    scanrewrite-tune benchmarks/tune_llama.py:medium --ks 1,4 --memory-budget 4GiB   # an accelerator
    scanrewrite-tune benchmarks/tune_llama.py:smoke --ks 1 --memory-budget 2x        # tiny, on the CPU

Unlike the GPT-style block: no mean is subtracted (RMSNorm), the attention's queries and keys
are rotated by position, the MLP is gated (`silu(x @ gate) * (x @ up) @ down`, hidden 8/3 of
the width rounded up to 256) and has three matrices, not two.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).parent))
from memory_curve import Shape  # noqa: E402

import scanrewrite.runtime  # noqa: E402

DTYPE = jnp.bfloat16


def _rms_norm(h, scale):
    h32 = h.astype(jnp.float32)
    return (h32 * jax.lax.rsqrt((h32**2).mean(-1, keepdims=True) + 1e-6)).astype(h.dtype) * scale


def _rotate(t, cos, sin):
    """Rotary position embedding of (batch, seq, heads, head_dim) by halves."""
    first, second = jnp.split(t.astype(jnp.float32), 2, axis=-1)
    return jnp.concatenate([first * cos - second * sin, second * cos + first * sin], -1).astype(t.dtype)


def llama_shape(layers: int, batch: int, seq: int, width: int, heads: int) -> Shape:
    hidden = -(-8 * width // 3 // 256) * 256 if width >= 256 else 8 * width // 3
    head_dim = width // heads

    def make(key):
        keys = jax.random.split(key, 6)
        dense = lambda k, i, o: (jax.random.normal(k, (layers, i, o)) / math.sqrt(i)).astype(DTYPE)
        params = {
            "qkv": dense(keys[0], width, 3 * width),
            "o": dense(keys[1], width, width),
            "gate": dense(keys[2], width, hidden),
            "up": dense(keys[3], width, hidden),
            "down": dense(keys[4], hidden, width),
            "norm1": jnp.ones((layers, width), DTYPE),
            "norm2": jnp.ones((layers, width), DTYPE),
        }
        return params, jax.random.normal(keys[5], (batch, seq, width)).astype(DTYPE), None

    mask = jnp.tril(jnp.ones((seq, seq), bool))
    angles = jnp.arange(seq)[:, None] * 10000.0 ** (-jnp.arange(head_dim // 2) / (head_dim // 2))
    cos, sin = jnp.cos(angles)[None, :, None, :], jnp.sin(angles)[None, :, None, :]

    def step(_params):
        def block(h, p):
            x = _rms_norm(h, p["norm1"])
            q, k, v = jnp.split(x @ p["qkv"], 3, axis=-1)
            split = lambda t: t.reshape(batch, seq, heads, head_dim)
            q, k, v = _rotate(split(q), cos, sin), _rotate(split(k), cos, sin), split(v)
            scores = jnp.einsum("bshd,bthd->bhst", q, k) / math.sqrt(head_dim)
            scores = jnp.where(mask, scores.astype(jnp.float32), -1e30)
            attn = jax.nn.softmax(scores, axis=-1).astype(DTYPE)
            h = h + jnp.einsum("bhst,bthd->bshd", attn, v).reshape(batch, seq, width) @ p["o"]
            x = _rms_norm(h, p["norm2"])
            return h + (jax.nn.silu(x @ p["gate"]) * (x @ p["up"])) @ p["down"], None

        return block

    title = f"LLaMA-style stack: {layers} layers, batch {batch}, seq {seq}, width {width}, {heads} heads, bfloat16"
    return Shape("llama", title, layers, (2, 4), make, step, 1, (max(layers // 2, 1),), rtol=5e-2, params_as_xs=True)


def _program(shape):
    # tune_gpt.py's, written again: the tuner names a site by its file and line and writes its
    # pick there, so the call must stand in this file.
    params, h0, _ = shape.arrays()

    def loss(params, h0):
        h, _ = scanrewrite.runtime.scan(jax.checkpoint(shape.step(params)), h0, params, unroll=4)
        return jnp.mean(h.astype(jnp.float32) ** 2)

    return jax.value_and_grad(loss, argnums=(0, 1)), (params, h0)


def factory():
    """16 layers, batch 8, sequence 1024, width 1024, 16 heads, bfloat16."""
    return _program(llama_shape(16, 8, 1024, 1024, 16))


def medium():
    """6 layers, batch 8, sequence 1024, width 1024, 16 heads: six tuner runs (two stacks, three budgets) in one device command of 10 minutes."""
    return _program(llama_shape(6, 8, 1024, 1024, 16))


def small():
    """4 layers, batch 8, sequence 1024, width 1024, 16 heads: what fitted the device time left."""
    return _program(llama_shape(4, 8, 1024, 1024, 16))


def smoke():
    """4 layers of width 8: the same program in a second on the CPU."""
    return _program(llama_shape(4, 1, 4, 8, 2))
