"""A forced spring-mass chain rolled out with `fori_loop` and fitted through the rollout.

Bounds known at trace time make `jax.lax.fori_loop` a scan that can be differentiated (`rollout`,
under `jax.grad`); a bound passed to a jitted function is traced (`energy_after`), which jax runs
as a `while_loop`, forward only. Spelled `jax.lax.fori_loop`, and `fori_loop` from `jax.lax`
with keywords and its own `unroll=2`.
"""

import jax
import jax.numpy as jnp
import scanrewrite.runtime

DT = 0.05


def spring_step(theta, t, state):
    position, velocity = state
    coupling = jnp.roll(position, 1) + jnp.roll(position, -1) - 2 * position
    forcing = theta["forcing"] * jnp.sin(3.0 * t) * jnp.arange(position.shape[0])
    acceleration = theta["stiffness"] * coupling - theta["damping"] * velocity + forcing
    velocity = velocity + DT * acceleration
    return position + DT * velocity, velocity


def rollout(theta, state, n_steps=13):
    def step(i, state):
        return spring_step(theta, i * DT, state)

    return scanrewrite.runtime.fori_loop(0, n_steps, step, state, unroll=4)


def settle(theta, state):
    """A few steps more from step 13 on, so that the index and the time go on where they were."""
    return scanrewrite.runtime.fori_loop(
        lower=13,
        upper=18,
        body_fun=lambda i, state: spring_step(theta, i * DT, state),
        init_val=state,
        unroll=2,
    )


def loss_fn(theta, state, target):
    position, velocity = settle(theta, rollout(theta, state))
    return jnp.sum((position - target) ** 2) + 0.1 * jnp.sum(velocity**2), position


@jax.jit
def energy_after(theta, state, n_steps):
    def step(i, state):
        return spring_step(theta, i * DT, state)

    position, velocity = scanrewrite.runtime.fori_loop(0, n_steps, step, state, unroll=4)
    return jnp.sum(velocity**2) + theta["stiffness"] * jnp.sum(position**2)


def run():
    theta = {"stiffness": jnp.array(4.0), "damping": jnp.array(0.2), "forcing": jnp.array(0.3)}
    state = (jnp.array([0.5, -0.25, 0.0, 0.125]), jnp.zeros(4))
    target = jnp.array([0.1, 0.0, -0.1, 0.2])
    (grad_theta, grad_state), position = jax.jit(jax.grad(loss_fn, argnums=(0, 1), has_aux=True))(
        theta, state, target
    )
    eager_loss, _ = loss_fn(theta, state, target)
    return {
        "position": position,
        "grad_theta": grad_theta,
        "grad_state": grad_state,
        "eager_loss": eager_loss,
        "energy": energy_after(theta, state, 7),
    }
