"""Horner's rule for polynomials of degree -1 to 7: scans of length 0, 1, 3, 4 and 8 from one call."""

import jax
import jax.numpy as jnp
import scanrewrite.runtime


def horner(coefficients, x):
    """Evaluates sum(c[i] * x**(n-1-i)), highest power first."""

    def step(accumulator, coefficient):
        return accumulator * x + coefficient, None

    value, _ = scanrewrite.runtime.scan(step, jnp.zeros_like(x), coefficients, unroll=4)
    return value


@jax.jit
def evaluate(coefficients, xs):
    return {
        "values": jax.vmap(horner, in_axes=(None, 0))(coefficients, xs),
        "derivatives": jax.vmap(jax.grad(horner, argnums=1), in_axes=(None, 0))(coefficients, xs),
        "coefficient_grads": jax.grad(lambda c: jnp.sum(horner(c, xs)))(coefficients),
    }


def run():
    xs = jnp.linspace(-1.5, 1.5, 5)
    all_coefficients = jax.random.normal(jax.random.PRNGKey(11), (8,))
    return {f"degree_{degree}": evaluate(all_coefficients[: degree + 1], xs) for degree in (-1, 0, 2, 3, 7)}
