"""A Universal Transformer: one transformer block applied n times with a checkpointed `eqx.internal.scan`."""

import equinox as eqx
import jax
import jax.numpy as jnp
import scanrewrite.runtime


class TransformerBlock(eqx.Module):
    qkv: eqx.nn.Linear
    attention_out: eqx.nn.Linear
    mlp_in: eqx.nn.Linear
    mlp_out: eqx.nn.Linear
    norm1: eqx.nn.LayerNorm
    norm2: eqx.nn.LayerNorm
    num_heads: int = eqx.field(static=True)

    def __init__(self, dim, num_heads, *, key):
        qkv_key, attention_out_key, mlp_in_key, mlp_out_key = jax.random.split(key, 4)
        self.qkv = eqx.nn.Linear(dim, 3 * dim, key=qkv_key)
        self.attention_out = eqx.nn.Linear(dim, dim, key=attention_out_key)
        self.mlp_in = eqx.nn.Linear(dim, 2 * dim, key=mlp_in_key)
        self.mlp_out = eqx.nn.Linear(2 * dim, dim, key=mlp_out_key)
        self.norm1 = eqx.nn.LayerNorm(dim)
        self.norm2 = eqx.nn.LayerNorm(dim)
        self.num_heads = num_heads

    def attention(self, x):
        seq_len, dim = x.shape
        heads = jax.vmap(self.qkv)(x).reshape(seq_len, 3, self.num_heads, dim // self.num_heads)
        q, k, v = heads[:, 0], heads[:, 1], heads[:, 2]
        scores = jnp.einsum("qhd,khd->hqk", q, k) / jnp.sqrt(q.shape[-1])
        mixed = jnp.einsum("hqk,khd->qhd", jax.nn.softmax(scores, axis=-1), v)
        return jax.vmap(self.attention_out)(mixed.reshape(seq_len, dim))

    def __call__(self, x):
        x = x + self.attention(jax.vmap(self.norm1)(x))
        h = jax.vmap(self.mlp_in)(jax.vmap(self.norm2)(x))
        return x + jax.vmap(self.mlp_out)(jax.nn.gelu(h))


class UniversalTransformer(eqx.Module):
    embed: eqx.nn.Linear
    block: TransformerBlock
    readout: eqx.nn.Linear
    depth: int = eqx.field(static=True)

    def __init__(self, n_in, dim, n_out, num_heads, depth, *, key):
        embed_key, block_key, readout_key = jax.random.split(key, 3)
        self.embed = eqx.nn.Linear(n_in, dim, key=embed_key)
        self.block = TransformerBlock(dim, num_heads, key=block_key)
        self.readout = eqx.nn.Linear(dim, n_out, key=readout_key)
        self.depth = depth

    def __call__(self, tokens):
        x = jax.vmap(self.embed)(tokens)

        def apply_block(x, _):
            return self.block(x), None

        # The same block, `depth` times: a checkpointed scan keeps memory flat in depth.
        x, _ = scanrewrite.runtime.eqxi_scan(apply_block, x, None, length=self.depth, kind="checkpointed", unroll=4)
        return jax.vmap(self.readout)(x)


def loss_fn(model, tokens, targets):
    logits = model(tokens)
    log_probs = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(log_probs, targets[:, None], axis=-1)), logits


@eqx.filter_jit
def train_step(model, tokens, targets):
    return eqx.filter_value_and_grad(loss_fn, has_aux=True)(model, tokens, targets)


def run():
    model_key, data_key = jax.random.split(jax.random.PRNGKey(0))
    model = UniversalTransformer(n_in=4, dim=8, n_out=3, num_heads=2, depth=7, key=model_key)
    tokens_key, targets_key = jax.random.split(data_key)
    tokens = jax.random.normal(tokens_key, (5, 4))
    targets = jax.random.randint(targets_key, (5,), 0, 3)
    (loss, logits), grads = train_step(model, tokens, targets)
    return {"logits": logits, "loss": loss, "grads": grads}
