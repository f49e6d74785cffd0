"""A GRU over a sequence whose carry is a dict (hidden state, step count, running max norm)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import scanrewrite.runtime


class GRUParams(NamedTuple):
    w_z: jax.Array
    u_z: jax.Array
    w_r: jax.Array
    u_r: jax.Array
    w_h: jax.Array
    u_h: jax.Array
    w_out: jax.Array


def init_params(key, n_in, n_hidden, n_out):
    keys = jax.random.split(key, 7)
    shapes = [(n_in, n_hidden), (n_hidden, n_hidden)] * 3 + [(n_hidden, n_out)]
    return GRUParams(*[jax.random.normal(k, s) / jnp.sqrt(s[0]) for k, s in zip(keys, shapes)])


def gru_step(params, carry, x):
    h = carry["h"]
    z = jax.nn.sigmoid(x @ params.w_z + h @ params.u_z)
    r = jax.nn.sigmoid(x @ params.w_r + h @ params.u_r)
    h_candidate = jnp.tanh(x @ params.w_h + (r * h) @ params.u_h)
    h = (1 - z) * h + z * h_candidate
    carry = {
        "h": h,
        "steps": carry["steps"] + 1,
        "max_norm": jnp.maximum(carry["max_norm"], jnp.linalg.norm(h)),
    }
    return carry, h @ params.w_out


def predict(params, xs):
    init = {
        "h": jnp.zeros(params.u_z.shape[0]),
        "steps": jnp.array(0, dtype=jnp.int32),
        "max_norm": jnp.array(0.0),
    }
    return scanrewrite.runtime.scan(
        lambda carry, x: gru_step(params, carry, x), init, xs, unroll=4
    )


def loss_fn(params, xs, targets):
    final_carry, predictions = predict(params, xs)
    return jnp.mean((predictions - targets) ** 2), (final_carry, predictions)


train_step = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))


def run():
    param_key, xs_key, targets_key = jax.random.split(jax.random.PRNGKey(1), 3)
    params = init_params(param_key, n_in=3, n_hidden=6, n_out=2)
    xs = jax.random.normal(xs_key, (13, 3))
    targets = jax.random.normal(targets_key, (13, 2))
    (loss, (final_carry, predictions)), grads = train_step(params, xs, targets)
    return {"final_carry": final_carry, "predictions": predictions, "loss": loss, "grads": grads}
