"""Training of flowjax's own flows (equinox) with its own loops, differentiated through its
`Scan` (`jax.lax.scan` over stacked flow layers) and, for a masked autoregressive flow's
inverse, through the `jax.lax.scan` over dimensions inside each layer.

Copied into flowjax's tree by `benchmarks/real_suites.py` as `scanrewrite_step_test.py`."""

import jax.numpy as jnp
import jax.random as jr
from flowjax.bijections import RationalQuadraticSpline
from flowjax.distributions import Normal
from flowjax.flows import coupling_flow, masked_autoregressive_flow
from flowjax.train import fit_to_data, fit_to_key_based_loss
from flowjax.train.losses import ElboLoss

from scanrewrite_step_record import record

DIM = 3


def _data():
    x = jr.normal(jr.key(1), (400, DIM))
    return jnp.stack([x[:, 0], x[:, 1] + 0.5 * x[:, 0] ** 2, jnp.sin(x[:, 2]) + x[:, 1]], axis=1)


def test_maf_maximum_likelihood():
    """Density estimation, not inverted: the log probability runs each layer's inverse, a scan
    over dimensions."""
    flow = masked_autoregressive_flow(jr.key(0), base_dist=Normal(jnp.zeros(DIM)), flow_layers=8, invert=False)
    flow, losses = fit_to_data(jr.key(2), flow, _data(), max_epochs=4, batch_size=50, show_progress=False)
    record("masked autoregressive flow, 8 layers: fit_to_data", losses["train"] + losses["val"], flow)


def test_spline_coupling_maximum_likelihood():
    flow = coupling_flow(
        jr.key(0), base_dist=Normal(jnp.zeros(DIM)), transformer=RationalQuadraticSpline(knots=6, interval=4), flow_layers=8
    )
    flow, losses = fit_to_data(jr.key(2), flow, _data(), max_epochs=4, batch_size=50, show_progress=False)
    record("spline coupling flow, 8 layers: fit_to_data", losses["train"] + losses["val"], flow)


def test_inverse_maf_elbo():
    """Variational inference, inverted (the default): samples run each layer's inverse."""
    flow = masked_autoregressive_flow(jr.key(0), base_dist=Normal(jnp.zeros(DIM)), flow_layers=8)
    target = Normal(jnp.ones(DIM), 2 * jnp.ones(DIM))
    flow, losses = fit_to_key_based_loss(
        jr.key(3), flow, loss_fn=ElboLoss(target.log_prob, num_samples=16), steps=20, show_progress=False
    )
    record("masked autoregressive flow sampled, 8 layers: ELBO", losses, flow)
