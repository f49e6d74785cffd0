"""Two signal filters with `s` (`from jax.lax import scan as s`); one already passes its own `unroll=2`."""

import jax
import jax.numpy as jnp
import scanrewrite.runtime


def leaky_integrator(leak, signal):
    def step(v, x):
        v = (1 - leak) * v + leak * x
        return v, v

    return scanrewrite.runtime.scan(
        step, jnp.zeros(signal.shape[1:]), signal, unroll=2
    )[1]


def discounted_returns(gamma, rewards):
    def step(future, reward):
        value = reward + gamma * future
        return value, value

    _, returns = scanrewrite.runtime.scan(
        step, jnp.zeros(()), rewards, reverse=True, unroll=4
    )
    return returns


def objective(leak, gamma, signal):
    smoothed = leaky_integrator(leak, signal)
    returns = discounted_returns(gamma, smoothed.sum(axis=1))
    return jnp.sum(returns), (smoothed, returns)


def run():
    signal = jax.random.normal(jax.random.PRNGKey(4), (9, 2))
    leak, gamma = jnp.array(0.3), jnp.array(0.95)
    (grad_leak, grad_gamma), (smoothed, returns) = jax.jit(
        jax.grad(objective, argnums=(0, 1), has_aux=True)
    )(leak, gamma, signal)
    return {"smoothed": smoothed, "returns": returns, "grad_leak": grad_leak, "grad_gamma": grad_gamma}
