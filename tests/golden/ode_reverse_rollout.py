"""An ODE integrated backward in time from a terminal condition with an RK4 `L.scan(..., reverse=True)`."""

import jax
import jax.numpy as jnp
import scanrewrite.runtime


def vector_field(theta, t, y):
    position, velocity = y
    acceleration = -theta["stiffness"] * position - theta["damping"] * velocity
    forcing = theta["forcing"] * jnp.sin(2.0 * t)
    return jnp.stack([velocity, acceleration + forcing])


def rk4_step(theta, t, y, dt):
    k1 = vector_field(theta, t, y)
    k2 = vector_field(theta, t + dt / 2, y + dt / 2 * k1)
    k3 = vector_field(theta, t + dt / 2, y + dt / 2 * k2)
    k4 = vector_field(theta, t + dt, y + dt * k3)
    return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def solve_backward(theta, y_final, ts):
    """Integrates from ts[-1] down to ts[0]; the trajectory comes back in time order."""
    dt = ts[1] - ts[0]

    def step(y, t):
        y_earlier = rk4_step(theta, t + dt, y, -dt)
        return y_earlier, y_earlier

    return scanrewrite.runtime.scan(step, y_final, ts, reverse=True, unroll=4)


def loss_fn(theta, y_final, ts):
    y_initial, trajectory = solve_backward(theta, y_final, ts)
    return jnp.sum(y_initial**2) + jnp.mean(trajectory[:, 0] ** 2), (y_initial, trajectory)


fit_step = jax.jit(jax.grad(loss_fn, argnums=(0, 1), has_aux=True))


def run():
    theta = {"stiffness": jnp.array(2.0), "damping": jnp.array(0.3), "forcing": jnp.array(0.5)}
    y_final = jnp.array([1.0, -0.5])
    ts = jnp.linspace(0.0, 1.0, 11)[:-1]
    (grad_theta, grad_y_final), (y_initial, trajectory) = fit_step(theta, y_final, ts)
    return {
        "y_initial": y_initial,
        "trajectory": trajectory,
        "grad_theta": grad_theta,
        "grad_y_final": grad_y_final,
    }
