"""A leapfrog particle simulation whose checkpointed `scan` asks for a larger unroll with a pragma."""

import jax
import jax.numpy as jnp
import scanrewrite.runtime


def pairwise(positions):
    displacement = positions[:, None, :] - positions[None, :, :]
    inverse_distance_sq = 1.0 / (jnp.sum(displacement**2, axis=-1) + 1.0)
    return displacement, inverse_distance_sq


def energy(positions, strength):
    _, inverse_distance_sq = pairwise(positions)
    return 0.5 * jnp.sum(positions**2) + 0.5 * strength * jnp.sum(inverse_distance_sq)


def force(positions, strength):
    """Minus the gradient of `energy`, written out so that each step stays cheap."""
    displacement, inverse_distance_sq = pairwise(positions)
    repulsion = 2 * strength * jnp.sum(displacement * inverse_distance_sq[..., None] ** 2, axis=1)
    return -positions + repulsion


def simulate(x0, v0, strength, dt=0.05, n_steps=19):
    def leapfrog(state, _):
        x, v = state
        v = v + dt / 2 * force(x, strength)
        x = x + dt * v
        v = v + dt / 2 * force(x, strength)
        return (x, v), energy(x, strength)

    return scanrewrite.runtime.eqxi_scan(leapfrog, (x0, v0), None, length=n_steps, kind="checkpointed", unroll=8)  # scanrewrite: unroll=8


def run():
    positions = jax.random.normal(jax.random.PRNGKey(7), (3, 2))
    velocities = jnp.zeros((3, 2))
    strength = jnp.array(0.2)

    def final_energy(strength):
        (x, v), energies = simulate(positions, velocities, strength)
        return energies[-1], (x, v, energies)

    grad_strength, (x, v, energies) = jax.jit(jax.grad(final_energy, has_aux=True))(strength)
    return {"positions": x, "velocities": v, "energies": energies, "grad_strength": grad_strength}
