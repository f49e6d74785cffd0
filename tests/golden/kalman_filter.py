"""A jitted Kalman filter with a NamedTuple carry, and the gradient of its log-likelihood."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import scanrewrite.runtime

F = jnp.array([[1.0, 1.0], [0.0, 1.0]])
H = jnp.array([[1.0, 0.0]])


class Belief(NamedTuple):
    mean: jax.Array
    cov: jax.Array


@jax.jit
def kalman_filter(log_noise, observations):
    process_cov = jnp.exp(log_noise[0]) * jnp.eye(2)
    observation_var = jnp.exp(log_noise[1])

    def step(belief, y):
        mean = F @ belief.mean
        cov = F @ belief.cov @ F.T + process_cov
        innovation = y - H @ mean
        innovation_var = H @ cov @ H.T + observation_var
        gain = cov @ H.T / innovation_var
        mean = mean + gain @ innovation
        cov = (jnp.eye(2) - gain @ H) @ cov
        log_likelihood = -0.5 * (jnp.log(2 * jnp.pi * innovation_var) + innovation**2 / innovation_var)
        return Belief(mean, cov), (mean, jnp.sum(log_likelihood))

    prior = Belief(jnp.zeros(2), jnp.eye(2))
    return scanrewrite.runtime.scan(step, prior, observations, unroll=4)


def negative_log_likelihood(log_noise, observations):
    posterior, (means, log_likelihoods) = kalman_filter(log_noise, observations)
    return -jnp.sum(log_likelihoods), (posterior, means, log_likelihoods)


def run():
    velocity_key, noise_key = jax.random.split(jax.random.PRNGKey(10))
    velocities = 0.5 + 0.1 * jax.random.normal(velocity_key, (11,))
    observations = (jnp.cumsum(velocities) + 0.3 * jax.random.normal(noise_key, (11,)))[:, None]
    log_noise = jnp.array([-2.0, -1.0])
    grad_fn = jax.jit(jax.grad(negative_log_likelihood, has_aux=True))
    grad_log_noise, (posterior, means, log_likelihoods) = grad_fn(log_noise, observations)
    return {
        "posterior": posterior,
        "means": means,
        "log_likelihoods": log_likelihoods,
        "grad_log_noise": grad_log_noise,
    }
