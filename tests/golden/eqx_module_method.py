"""A linear recurrent layer, an `eqx.Module` whose `__call__` scans its `step` with `internal.scan`."""

import equinox as eqx
import jax
import jax.numpy as jnp
import scanrewrite.runtime


class LinearRecurrentLayer(eqx.Module):
    log_decay: jax.Array
    input_weight: jax.Array
    output_weight: jax.Array

    def __init__(self, n_in, hidden, n_out, *, key):
        decay_key, in_key, out_key = jax.random.split(key, 3)
        self.log_decay = jax.random.uniform(decay_key, (hidden,), minval=-1.0, maxval=-0.1)
        self.input_weight = jax.random.normal(in_key, (hidden, n_in)) / jnp.sqrt(n_in)
        self.output_weight = jax.random.normal(out_key, (n_out, hidden)) / jnp.sqrt(hidden)

    def step(self, h, x):
        h = jnp.exp(self.log_decay) * h + self.input_weight @ x
        return h, self.output_weight @ h

    def __call__(self, xs):
        h0 = jnp.zeros(self.log_decay.shape)
        _, ys = scanrewrite.runtime.eqxi_scan(
            lambda h, x: self.step(h, x), h0, xs, kind="lax", unroll=4
        )
        return ys


def run():
    model_key, xs_key = jax.random.split(jax.random.PRNGKey(6))
    layer = LinearRecurrentLayer(n_in=3, hidden=5, n_out=2, key=model_key)
    xs = jax.random.normal(xs_key, (9, 3))

    @eqx.filter_jit
    @eqx.filter_grad(has_aux=True)
    def grad_fn(layer):
        outputs = layer(xs)
        return jnp.mean(jnp.abs(outputs)), outputs

    grads, outputs = grad_fn(layer)
    return {"outputs": outputs, "grads": grads}
