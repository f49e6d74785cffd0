"""A Linen model that scans a rematerialised block over its layers: `nn.scan(nn.remat(Block))`
with parameters stacked per layer and params and dropout streams split per layer."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import scanrewrite.runtime
from flax.core import unfreeze

DIM, DEPTH = 8, 6


class Block(nn.Module):
    dim: int

    @nn.compact
    def __call__(self, x, _):
        h = nn.gelu(nn.Dense(2 * self.dim)(nn.LayerNorm()(x)))
        h = nn.Dropout(0.1, deterministic=False)(h)
        return x + nn.Dense(self.dim)(h), None


class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        stack = scanrewrite.runtime.linen_scan(
            nn.remat(Block),
            variable_axes={"params": 0},
            split_rngs={"params": True, "dropout": True},
            in_axes=nn.broadcast,
            length=DEPTH,
            unroll=4,
        )
        x, _ = stack(DIM)(x, None)
        return nn.Dense(1)(x)


def run():
    model = Model()
    x = jnp.linspace(-1.0, 1.0, 4 * DIM).reshape(4, DIM)
    variables = model.init({"params": jax.random.key(0), "dropout": jax.random.key(1)}, x)

    def loss(params, key):
        return jnp.mean(model.apply({"params": params}, x, rngs={"dropout": key}) ** 2)

    value, grads = jax.jit(jax.value_and_grad(loss))(variables["params"], jax.random.key(2))
    eager = jax.grad(loss)(variables["params"], jax.random.key(3))
    return {"params": unfreeze(variables["params"]), "loss": value, "grads": unfreeze(grads), "eager": unfreeze(eager)}
