"""An RNN that writes each hidden state to a history buffer: checkpointed `eqxi.scan` with `buffers`."""

import jax
import jax.numpy as jnp
import scanrewrite.runtime


def encode(weights, xs):
    n_steps, hidden = xs.shape[0], weights["recurrent"].shape[0]

    def step(carry, x):
        h, history, index = carry
        h = jnp.tanh(weights["recurrent"] @ h + weights["input"] @ x)
        history = history.at[index].set(h)
        return (h, history, index + 1), None

    init = (jnp.zeros(hidden), jnp.zeros((n_steps, hidden)), jnp.array(0))
    (h, history, _), _ = scanrewrite.runtime.eqxi_scan(
        step,
        init,
        xs,
        kind="checkpointed",
        buffers=lambda carry: carry[1],
        checkpoints=3,
        unroll=4,
    )
    return h, history


def loss_fn(weights, xs):
    h, history = encode(weights, xs)
    return jnp.sum(h**2) + jnp.mean(history**2), (h, history)


def run():
    recurrent_key, input_key, xs_key = jax.random.split(jax.random.PRNGKey(5), 3)
    weights = {
        "recurrent": 0.5 * jax.random.normal(recurrent_key, (4, 4)),
        "input": jax.random.normal(input_key, (4, 2)),
    }
    xs = jax.random.normal(xs_key, (11, 2))
    grads, (h, history) = jax.jit(jax.grad(loss_fn, has_aux=True))(weights, xs)
    return {"final_state": h, "history": history, "grads": grads}
