"""A per-step checkpoint around the scanned function, taken over by the runtime (issue 16).

The rewrite leaves `jax.checkpoint(layer)` in the source; the runtime takes it over when it
traces the call, so that the chunks are checkpointed with the wrapper's policy and the steps
inside them are not checkpointed again. Measured, not assumed: the checkpoint equations of
the rewritten program are those of the program written for the runtime by hand without the
wrapper, and so is its compiled temp memory; the count is shown to reject a program
checkpointed twice. Values and gradients equal `jax.lax.scan`'s of the wrapped function.
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import scanrewrite.runtime
from scanrewrite.runtime._compat import enable_x64
from tests.test_runtime import always_checkpointed, pinned_layout
from tests.treecheck import assert_trees_close

#: The names of the checkpoint primitive across the supported jax versions.
CHECKPOINT_PRIMITIVES = {"checkpoint", "remat", "remat2"}
LENGTH, UNROLL = 5, 2


def layer(h, w):
    return jnp.tanh(h @ w), jnp.sum(h)


def wrapped_forms():
    dots = jax.checkpoint_policies.dots_saveable
    return {
        "jax.checkpoint": (jax.checkpoint(layer), True),
        "jax.remat with a policy": (jax.remat(layer, policy=dots), dots),
        "partial(jax.checkpoint)": (functools.partial(jax.checkpoint, prevent_cse=False)(layer), True),
        "eqx.filter_checkpoint": (eqx.filter_checkpoint(layer), True),
    }


def checkpoint_eqns(jaxpr) -> list:
    """The checkpoint equations in `jaxpr`, and in every jaxpr inside its equations, outermost first."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in CHECKPOINT_PRIMITIVES:
            found.append(eqn)
        for param in eqn.params.values():
            for inner in param if isinstance(param, (tuple, list)) else (param,):
                # A closed jaxpr (jaxpr and consts) or a jaxpr, read by their fields: their
                # classes moved between the supported jax versions.
                inner = getattr(inner, "jaxpr", inner) if hasattr(inner, "consts") else inner
                if hasattr(inner, "eqns"):
                    found += checkpoint_eqns(inner)
    return found


def checkpoints_in(jaxpr) -> int:
    """How many checkpoint equations `jaxpr` holds (`checkpoint_eqns`)."""
    return len(checkpoint_eqns(jaxpr))


def loss(step, checkpoint, h, ws):
    h, ys = scanrewrite.runtime.scan(step, h, ws, unroll=UNROLL, checkpoint=checkpoint)
    return jnp.sum(h) + jnp.sum(ys)


def measure(step, checkpoint, h, ws) -> tuple[int, int]:
    """(checkpoint equations in the gradient's jaxpr, the compiled gradient's temp bytes)."""
    grad = jax.grad(functools.partial(loss, step, checkpoint), argnums=(0, 1))
    count = checkpoints_in(jax.make_jaxpr(grad)(h, ws).jaxpr)
    temp = jax.jit(grad).lower(h, ws).compile().memory_analysis().temp_size_in_bytes
    return count, temp


def inputs():
    h = jnp.linspace(-1.0, 1.0, 4)
    ws = 0.5 * jax.random.normal(jax.random.PRNGKey(0), (LENGTH, 4, 4))
    return h, ws


@pytest.mark.parametrize("layout", ["rolled", "unrolled"])
@pytest.mark.parametrize("spelling", list(wrapped_forms()))
def test_the_runtime_takes_a_per_step_checkpoint_over(spelling, layout):
    step, checkpoint = wrapped_forms()[spelling]
    h, ws = inputs()
    with pinned_layout(layout):
        by_hand = measure(layer, checkpoint, h, ws)
        assert measure(step, True, h, ws) == by_hand


def test_the_count_rejects_a_checkpoint_inside_a_checkpoint():
    h, ws = inputs()
    grad = jax.grad(functools.partial(loss, layer, True), argnums=(0, 1))
    twice = jax.grad(functools.partial(loss, jax.checkpoint(jax.checkpoint(layer)), True), argnums=(0, 1))
    with always_checkpointed():  # the program by hand checkpoints, whatever it saves
        by_hand, doubled = (checkpoints_in(jax.make_jaxpr(g)(h, ws).jaxpr) for g in (grad, twice))
    assert by_hand > 0
    assert doubled > by_hand


def with_an_extra_step(h, w):
    h, y = jax.checkpoint(layer)(h, w)
    return h * 2.0, y


@pytest.mark.parametrize("spelling", list(wrapped_forms()))
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_values_and_gradients_equal_the_wrapped_scan(spelling, jit):
    with enable_x64(True):
        step, _ = wrapped_forms()[spelling]
        h = jax.random.normal(jax.random.PRNGKey(1), (4,), jnp.float64)
        ws = jax.random.normal(jax.random.PRNGKey(2), (LENGTH, 4, 4), jnp.float64)

        def run(scan):
            def total(h, ws):
                h, ys = scan(step, h, ws)
                return jnp.sum(jnp.sin(h)) + jnp.sum(ys**2)

            value_and_grad = jax.value_and_grad(total, argnums=(0, 1))
            return (jax.jit(value_and_grad) if jit else value_and_grad)(h, ws)

        expected = run(jax.lax.scan)
        actual = run(lambda f, h, ws: scanrewrite.runtime.scan(f, h, ws, unroll=UNROLL))
        assert assert_trees_close(actual, expected, rtol=1e-12, atol=1e-12) == 3
        wrong = jax.tree_util.tree_map(lambda a: a * (1 + 1e-6), actual)
        with pytest.raises(AssertionError):
            assert_trees_close(wrong, expected, rtol=1e-12, atol=1e-12)


def test_a_policy_the_call_names_wins_over_the_wrappers():
    h, ws = inputs()
    dots = jax.checkpoint_policies.dots_saveable
    nothing = jax.checkpoint_policies.nothing_saveable
    assert measure(jax.remat(layer, policy=dots), nothing, h, ws) == measure(layer, nothing, h, ws)


def test_without_chunk_checkpoints_the_per_step_checkpoint_stays():
    h, ws = inputs()
    count, _ = measure(jax.checkpoint(layer), False, h, ws)

    def original(h, ws):
        h, ys = jax.lax.scan(jax.checkpoint(layer), h, ws)
        return jnp.sum(h) + jnp.sum(ys)

    assert count == checkpoints_in(jax.make_jaxpr(jax.grad(original, argnums=(0, 1)))(h, ws).jaxpr) > 0


def test_a_step_that_is_more_than_a_checkpoint_keeps_it():
    h, ws = inputs()
    kept, _ = measure(with_an_extra_step, True, h, ws)
    by_hand, _ = measure(layer, True, h, ws)
    assert kept > by_hand
