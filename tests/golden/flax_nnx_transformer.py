"""A transformer stack in Flax NNX: blocks built with `nnx.vmap`, applied with `nnx.scan` over
`nnx.remat`, with LayerNorm and Dropout (a dropout stream split per layer)."""

import jax
import jax.numpy as jnp
import scanrewrite.runtime
from flax import nnx

DIM, HEADS, DEPTH, SEQ = 8, 2, 6, 4


class Block(nnx.Module):
    def __init__(self, rngs):
        self.norm1 = nnx.LayerNorm(DIM, rngs=rngs)
        self.qkv = nnx.Linear(DIM, 3 * DIM, rngs=rngs)
        self.out = nnx.Linear(DIM, DIM, rngs=rngs)
        self.norm2 = nnx.LayerNorm(DIM, rngs=rngs)
        self.mlp_in = nnx.Linear(DIM, 2 * DIM, rngs=rngs)
        self.mlp_out = nnx.Linear(2 * DIM, DIM, rngs=rngs)
        self.dropout = nnx.Dropout(0.1, rngs=rngs)

    def attention(self, x):
        q, k, v = jnp.split(self.qkv(x).reshape(SEQ, 3 * HEADS, DIM // HEADS), 3, axis=1)
        scores = jnp.einsum("qhd,khd->hqk", q, k) / jnp.sqrt(q.shape[-1])
        mixed = jnp.einsum("hqk,khd->qhd", jax.nn.softmax(scores, axis=-1), v)
        return self.out(mixed.reshape(SEQ, DIM))

    def __call__(self, x):
        x = x + self.dropout(self.attention(self.norm1(x)))
        return x + self.dropout(self.mlp_out(jax.nn.gelu(self.mlp_in(self.norm2(x)))))


class Stack(nnx.Module):
    def __init__(self, seed):
        @nnx.vmap(in_axes=0, out_axes=0)
        def make(key):
            return Block(nnx.Rngs(params=key, dropout=jax.random.fold_in(key, 1)))

        self.blocks = make(jax.random.split(jax.random.key(seed), DEPTH))

    def __call__(self, x):
        @scanrewrite.runtime.nnx_scan(
            in_axes=(nnx.Carry, 0), out_axes=nnx.Carry, unroll=4
        )
        @nnx.remat
        def forward(x, block):
            return block(x)

        return forward(x, self.blocks)


def _pure(state):
    return nnx.to_pure_dict(state) if hasattr(nnx, "to_pure_dict") else state.to_pure_dict()


def run():
    model = Stack(0)
    x = jnp.linspace(-1.0, 1.0, SEQ * DIM).reshape(SEQ, DIM)

    def loss(model, x):
        return jnp.mean(model(x) ** 2)

    value, grads = nnx.jit(nnx.value_and_grad(loss))(model, x)
    eager_grads = nnx.grad(loss)(model, x)  # the dropout streams moved on: other masks
    return {"loss": value, "grads": _pure(grads), "eager_grads": _pure(eager_grads), "output": model(x)}
