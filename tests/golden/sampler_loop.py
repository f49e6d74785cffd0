"""A sampler's inference loop, written as samplers write it: the scan bound with
`functools.partial` and jitted, then called on the state and the keys (blackjax's
`run_inference_algorithm`); a tempered log-density whose gradient runs through a partial
of the scan as well; and a partial called with every argument by position, `unroll` too."""

from functools import partial

import jax
import jax.numpy as jnp
import scanrewrite.runtime


def log_density(position):
    return -0.5 * jnp.sum((position - jnp.array([1.0, -2.0])) ** 2 / jnp.array([1.0, 0.25]))


def random_walk_step(state, key):
    position, log_p = state
    proposal_key, accept_key = jax.random.split(key)
    proposal = position + 0.5 * jax.random.normal(proposal_key, position.shape)
    proposal_log_p = log_density(proposal)
    accept = jnp.log(jax.random.uniform(accept_key)) < proposal_log_p - log_p
    new_state = (jnp.where(accept, proposal, position), jnp.where(accept, proposal_log_p, log_p))
    return new_state, new_state[0]


def run_inference_algorithm(initial_position, key, num_steps):
    keys = jax.random.split(key, num_steps)
    initial_state = (initial_position, log_density(initial_position))
    # jit the loop: an eager scan dispatches op by op
    final_state, positions = jax.jit(partial(scanrewrite.runtime.scan, random_walk_step, unroll=4))(initial_state, keys)
    return final_state, positions


def tempered_path_integral(position, temperatures):
    def step(total, beta):
        return total + beta * log_density(position * beta), total

    integrate = partial(scanrewrite.runtime.scan, step, unroll=4)
    return integrate(0.0, temperatures)


def annealed_log_densities(position, temperatures):
    def step(total, beta):
        return 0.5 * total + log_density(position * beta), total

    # Every argument by position, as lax.scan takes them (init, xs, length, reverse, unroll).
    return partial(scanrewrite.runtime.scan, step, unroll=4)(
        0.0, temperatures, None, False, 2
    )


def run():
    final_state, positions = run_inference_algorithm(jnp.zeros(2), jax.random.PRNGKey(3), 13)
    temperatures = jnp.linspace(0.1, 1.0, 7)
    value, grad = jax.value_and_grad(lambda p: tempered_path_integral(p, temperatures)[0])(positions[-1])
    annealed = annealed_log_densities(positions[-1], temperatures)
    annealed_jit = jax.jit(annealed_log_densities)(positions[-1], temperatures)
    return {
        "final_state": final_state,
        "positions": positions,
        "value": value,
        "grad": grad,
        "annealed": annealed,
        "annealed_jit": annealed_jit,
    }
