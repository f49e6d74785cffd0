"""Meta-learning a learning rate through 13 SGD steps: `jax.lax.scan` with `xs=None` and `length`."""

import jax
import jax.numpy as jnp
import scanrewrite.runtime


def regression_loss(w, features, targets):
    return jnp.mean((features @ w - targets) ** 2)


def train(log_lr, w0, features, targets, n_steps=13):
    lr = jnp.exp(log_lr)

    def sgd_step(w, _):
        loss, grad = jax.value_and_grad(regression_loss)(w, features, targets)
        return w - lr * grad, loss

    return scanrewrite.runtime.scan(sgd_step, w0, None, length=n_steps, unroll=4)


def meta_loss(log_lr, w0, data):
    train_features, train_targets, val_features, val_targets = data
    w, losses = train(log_lr, w0, train_features, train_targets)
    return regression_loss(w, val_features, val_targets), (w, losses)


def run():
    keys = jax.random.split(jax.random.PRNGKey(8), 3)
    true_w = jax.random.normal(keys[0], (3,))
    features = jax.random.normal(keys[1], (16, 3))
    targets = features @ true_w + 0.1 * jax.random.normal(keys[2], (16,))
    data = (features[:10], targets[:10], features[10:], targets[10:])
    log_lr, w0 = jnp.log(0.05), jnp.zeros(3)
    meta_grad = jax.jit(jax.grad(meta_loss, argnums=(0, 1), has_aux=True))
    (grad_log_lr, grad_w0), (w, losses) = meta_grad(log_lr, w0, data)
    return {"w": w, "losses": losses, "grad_log_lr": grad_log_lr, "grad_w0": grad_w0}
