"""Loops already chunked and checkpointed by hand, which the rewrite leaves alone.

The first is the pattern of test-time-training code: an inner scan over `n` steps of SGD,
and an outer scan over groups of `n` whose body is `jax.remat` of that inner scan. The
second checkpoints a def that runs the inner scan. Both are what the runtime would build,
so neither scan of either loop is rewritten (a third level of recomputation would only
cost time); the plain scan that accumulates the losses is.
"""

from functools import partial

import jax
import jax.numpy as jnp
import scanrewrite.runtime
from jax import lax
from jax.tree_util import tree_map


def scan_remat_every_n_iterations_scan(f, n, carry, x):
    """Remat every n mini batches."""
    x_grouped = tree_map(lambda x: x.reshape((-1, n, *x.shape[1:])), x)
    carry, y_grouped = jax.lax.scan(
        jax.remat(partial(jax.lax.scan, f), prevent_cse=False), carry, x_grouped
    )
    y = tree_map(lambda x: x.reshape((-1, *x.shape[2:])), y_grouped)
    return carry, y


def sgd_step(w, batch):
    x, y = batch
    loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - 0.1 * grad, loss


def solve(step, w0, n_outer, n_inner):
    def outer_body(w, _):
        return lax.scan(step, w, None, length=n_inner)[0], None

    return lax.scan(jax.checkpoint(outer_body), w0, None, length=n_outer)[0]


def objective(w0, xs, ys):
    w, losses = scan_remat_every_n_iterations_scan(sgd_step, 4, w0, (xs, ys))

    def accumulate(total, loss):
        return total + loss, total

    total, running = scanrewrite.runtime.scan(
        accumulate, jnp.zeros(()), losses, unroll=4
    )
    decayed = solve(lambda w, _: (0.9 * w + 0.01, None), w, n_outer=3, n_inner=2)
    return total + jnp.sum(running) + jnp.sum(decayed**2)


def run():
    w_key, x_key, y_key = jax.random.split(jax.random.PRNGKey(4), 3)
    w0 = jax.random.normal(w_key, (3,))
    xs = jax.random.normal(x_key, (12, 2, 3))
    ys = jax.random.normal(y_key, (12, 2))
    value, grad = jax.jit(jax.value_and_grad(objective))(w0, xs, ys)
    return {"value": value, "grad": grad, "eager_value": objective(w0, xs, ys)}
