"""A linear controller tuned over several episodes: a scan over episodes around a scan over time steps."""

import jax
import jax.numpy as jnp
import scanrewrite.runtime

A = jnp.array([[1.0, 0.1], [0.0, 1.0]])
B = jnp.array([[0.0], [0.1]])


def episode_cost(gain, x0, noise):
    def time_step(x, w):
        u = -gain @ x
        x_next = A @ x + B @ u + w
        cost = x @ x + 0.1 * u @ u
        return x_next, cost

    _, costs = scanrewrite.runtime.scan(time_step, x0, noise, unroll=4)
    return jnp.sum(costs)


def total_cost(gain, x0s, noises):
    def episode(total, episode_inputs):
        x0, noise = episode_inputs
        cost = episode_cost(gain, x0, noise)
        return total + cost, cost

    total, per_episode = scanrewrite.runtime.scan(
        episode, jnp.array(0.0), (x0s, noises), unroll=4
    )
    return total, (total, per_episode)


def run():
    x0_key, noise_key = jax.random.split(jax.random.PRNGKey(2))
    x0s = jax.random.normal(x0_key, (5, 2))
    noises = 0.05 * jax.random.normal(noise_key, (5, 7, 2))
    gain = jnp.array([[0.5, 1.0]])
    grad_gain, (total, per_episode) = jax.jit(jax.grad(total_cost, has_aux=True))(gain, x0s, noises)
    return {"total": total, "per_episode": per_episode, "grad_gain": grad_gain}
