"""Per-example gradients of an autoregressive model: `scan` under `jax.jit(jax.vmap(jax.grad(...)))`."""

import jax
import jax.numpy as jnp
import scanrewrite.runtime


def one_step_predictions(params, series):
    def step(state, x):
        prediction = params["a"] * state + params["b"] * jnp.tanh(state) + params["c"]
        new_state = 0.9 * state + 0.1 * x
        return new_state, prediction

    _, predictions = scanrewrite.runtime.scan(step, series[0], series[1:], unroll=4)
    return predictions


def loss_fn(params, series):
    predictions = one_step_predictions(params, series)
    return jnp.mean((predictions - series[1:]) ** 2)


per_example_grads = jax.jit(jax.vmap(jax.grad(loss_fn), in_axes=(None, 0)))


@jax.jit
def batch_loss_and_grad(params, batch):
    return jax.value_and_grad(lambda p: jnp.mean(jax.vmap(loss_fn, in_axes=(None, 0))(p, batch)))(params)


batch_predictions = jax.jit(jax.vmap(one_step_predictions, in_axes=(None, 0)))


def run():
    params = {"a": jnp.array(0.8), "b": jnp.array(0.1), "c": jnp.array(0.0)}
    batch = jax.random.normal(jax.random.PRNGKey(3), (3, 14)).cumsum(axis=1) * 0.1
    loss, grads = batch_loss_and_grad(params, batch)
    return {
        "per_example_grads": per_example_grads(params, batch),
        "loss": loss,
        "grads": grads,
        "predictions": batch_predictions(params, batch),
    }
