"""Per-example losses of a small MLP with `lax.map(..., batch_size=3)` over 7 examples (the last
batch is partial), differentiated for the weights; predictions with `map` from `jax.lax`."""

import jax
import jax.numpy as jnp
import scanrewrite.runtime


def predict(params, x):
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    return hidden @ params["w2"]


def per_example_loss(params, example):
    x, y = example
    return jnp.sum((predict(params, x) - y) ** 2)


def mean_loss(params, xs, ys):
    losses = scanrewrite.runtime.map(lambda example: per_example_loss(params, example), (xs, ys), batch_size=3, unroll=4)
    return jnp.mean(losses), losses


def run():
    keys = jax.random.split(jax.random.PRNGKey(3), 4)
    params = {
        "w1": jax.random.normal(keys[0], (3, 5)) / 2,
        "b1": jnp.zeros(5),
        "w2": jax.random.normal(keys[1], (5, 2)) / 2,
    }
    xs = jax.random.normal(keys[2], (7, 3))
    ys = jax.random.normal(keys[3], (7, 2))
    grads, losses = jax.jit(jax.grad(mean_loss, has_aux=True))(params, xs, ys)
    predictions = scanrewrite.runtime.map(lambda x: predict(params, x), xs, unroll=4)
    return {"grads": grads, "losses": losses, "predictions": predictions}
