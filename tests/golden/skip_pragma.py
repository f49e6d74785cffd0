"""A fixed-point solve kept as a plain scan with `# scanrewrite: skip`, next to a rewritten rollout."""

import jax
import jax.numpy as jnp
import scanrewrite.runtime
from jax import lax


def equilibrium(weights, bias, n_iterations=6):
    def iterate(z, _):
        return jnp.tanh(weights @ z + bias), None

    z0 = jnp.zeros(bias.shape)
    z, _ = lax.scan(iterate, z0, None, length=n_iterations)  # scanrewrite: skip
    return z


def rollout(weights, z, inputs):
    def step(z, x):
        z = jnp.tanh(weights @ z + x)
        return z, jnp.sum(z)

    return scanrewrite.runtime.scan(step, z, inputs, unroll=4)


def loss_fn(weights, bias, inputs):
    z, outputs = rollout(weights, equilibrium(weights, bias), inputs)
    return jnp.sum(outputs**2), (z, outputs)


def run():
    weights_key, bias_key, inputs_key = jax.random.split(jax.random.PRNGKey(9), 3)
    weights = 0.3 * jax.random.normal(weights_key, (4, 4))
    bias = jax.random.normal(bias_key, (4,))
    inputs = jax.random.normal(inputs_key, (7, 4))
    grad_fn = jax.jit(jax.grad(loss_fn, argnums=(0, 1), has_aux=True))
    (grad_weights, grad_bias), (z, outputs) = grad_fn(weights, bias, inputs)
    return {"final": z, "outputs": outputs, "grad_weights": grad_weights, "grad_bias": grad_bias}
