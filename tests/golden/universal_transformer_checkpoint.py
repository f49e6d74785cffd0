"""A Universal Transformer whose shared block is checkpointed per step, in each spelling users write.

One block applied `depth` times with `jax.lax.scan`. Each forward pass wraps the step for memory
differently: `jax.checkpoint(layer)` in the call, `jax.remat` with a policy bound to a name a line
above, a `functools.partial(jax.checkpoint, prevent_cse=False)` decorator, `eqx.filter_checkpoint`,
and `jax.checkpoint(layer) if remat else layer`. The runtime takes each wrapper over: it
checkpoints chunks of steps instead of every step.
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import scanrewrite.runtime

DEPTH = 5
HEADS = 2


def init_params(key, dim):
    qkv_key, out_key, mlp_in_key, mlp_out_key, readout_key = jax.random.split(key, 5)
    scale = 1.0 / jnp.sqrt(dim)
    return {
        "qkv": scale * jax.random.normal(qkv_key, (dim, 3 * dim)),
        "out": scale * jax.random.normal(out_key, (dim, dim)),
        "mlp_in": scale * jax.random.normal(mlp_in_key, (dim, 2 * dim)),
        "mlp_out": scale * jax.random.normal(mlp_out_key, (2 * dim, dim)) / 2,
        "readout": scale * jax.random.normal(readout_key, (dim, 1)),
    }


def layer_norm(x):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(jnp.var(x, axis=-1, keepdims=True) + 1e-5)


def block(params, x):
    seq_len, dim = x.shape
    q, k, v = jnp.split(layer_norm(x) @ params["qkv"], 3, axis=-1)
    q, k, v = (a.reshape(seq_len, HEADS, dim // HEADS) for a in (q, k, v))
    scores = jnp.einsum("qhd,khd->hqk", q, k) / jnp.sqrt(dim // HEADS)
    mixed = jnp.einsum("hqk,khd->qhd", jax.nn.softmax(scores, axis=-1), v)
    x = x + mixed.reshape(seq_len, dim) @ params["out"]
    return x + jax.nn.gelu(layer_norm(x) @ params["mlp_in"]) @ params["mlp_out"]


def forward_in_the_call(params, x):
    def layer(h, _):
        return block(params, h), None

    h, _ = scanrewrite.runtime.scan(
        jax.checkpoint(layer), x, None, length=DEPTH, unroll=4
    )
    return h


def forward_bound_with_a_policy(params, x):
    def layer(h, _):
        return block(params, h), None

    step = jax.remat(layer, policy=jax.checkpoint_policies.dots_saveable)
    h, _ = scanrewrite.runtime.scan(step, x, None, length=DEPTH, unroll=4)
    return h


def forward_decorated(params, x):
    @functools.partial(jax.checkpoint, prevent_cse=False)
    def layer(h, _):
        return block(params, h), None

    h, _ = scanrewrite.runtime.scan(layer, x, None, length=DEPTH, unroll=4)
    return h


def forward_equinox(params, x):
    layer = eqx.filter_checkpoint(lambda h, _: (block(params, h), None))
    h, _ = scanrewrite.runtime.scan(layer, x, None, length=DEPTH, unroll=4)
    return h


def forward_under_a_flag(params, x, remat=True):
    def layer(h, _):
        return block(params, h), None

    h, _ = scanrewrite.runtime.scan(
        jax.checkpoint(layer) if remat else layer, x, None, length=DEPTH, unroll=4
    )
    return h


FORWARDS = {
    "in_the_call": forward_in_the_call,
    "bound_with_a_policy": forward_bound_with_a_policy,
    "decorated": forward_decorated,
    "equinox": forward_equinox,
    "under_a_flag": forward_under_a_flag,
}


def loss(forward, params, x, targets):
    predictions = layer_norm(forward(params, x)) @ params["readout"]
    return jnp.mean((predictions[:, 0] - targets) ** 2)


def total_loss(params, x, targets):
    losses = {
        name: loss(forward, params, x, targets) for name, forward in FORWARDS.items()
    }
    return sum(losses.values()), losses


def run():
    params_key, x_key, targets_key = jax.random.split(jax.random.PRNGKey(3), 3)
    params = init_params(params_key, dim=4)
    x = jax.random.normal(x_key, (3, 4))
    targets = jax.random.normal(targets_key, (3,))
    (total, losses), grads = jax.jit(jax.value_and_grad(total_loss, has_aux=True))(
        params, x, targets
    )
    # Outside jit too, for one of them.
    eager_loss = loss(forward_in_the_call, params, x, targets)
    return {"losses": losses, "grads": grads, "eager_loss": eager_loss}
