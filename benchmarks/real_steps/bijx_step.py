"""Training steps of bijx's own flows (Flax NNX), differentiated through its `ScanChain`
(`jax.lax.scan` over a stack of bijections split with `nnx.split`), forward and in reverse.

Copied into bijx's tree by `benchmarks/real_suites.py` as `scanrewrite_step_test.py`; bijx's
root conftest turns on float64."""

import bijx
import jax
import jax.numpy as jnp
import optax
from flax import nnx

from scanrewrite_step_record import record

STEPS = 5


def _train(name, model, loss):
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    @nnx.jit
    def step(model, optimizer, x):
        value, grads = nnx.value_and_grad(loss)(model, x)
        optimizer.update(model, grads)
        return value

    x = jax.random.normal(jax.random.key(1), (64, 4)) * 0.8 + 0.3
    losses = [step(model, optimizer, x) for _ in range(STEPS)]
    assert all(jnp.isfinite(v) for v in losses)
    record(name, losses, nnx.state(model, nnx.Param))


def _nll(model, x):
    """Negative log-likelihood of `x` under the flow from a standard normal (the reverse scan)."""
    z, log_density = model.reverse(x, jnp.zeros(x.shape[:-1]))
    return jnp.mean(0.5 * jnp.sum(z**2, -1) - log_density)


def _reverse_kl(model, _):
    """Reverse KL to a shifted normal from the flow's samples (the forward scan)."""
    z = jax.random.normal(jax.random.key(2), (64, 4))
    x, log_density = model.forward(z, -0.5 * jnp.sum(z**2, -1))
    return jnp.mean(log_density + 0.5 * jnp.sum((x - 1.0) ** 2, -1))


def test_stacked_cubic_nll():
    factory = bijx.init_for("cubic", architecture="stacked")
    model = bijx.stack_bijections(factory, transform=bijx.ScanChain, copies=8)(nnx.Rngs(0))
    _train("stacked cubic, 8 copies: nll", model, _nll)


def test_stacked_cubic_reverse_kl():
    factory = bijx.init_for("cubic", architecture="stacked")
    model = bijx.stack_bijections(factory, transform=bijx.ScanChain, copies=8)(nnx.Rngs(0))
    _train("stacked cubic, 8 copies: reverse kl", model, _reverse_kl)


def test_coupling_flow_nll():
    model = bijx.coupling_flow(
        4,
        lambda rngs: bijx.MonotoneRQSpline(8, (), rngs=rngs),
        n_coupling_layers=4,
        n_copies=4,
        width=32,
        bias_mode="zeros",
        rngs=nnx.Rngs(0),
    )
    _train("coupling flow, 4 layers of 4 splines: nll", model, _nll)
