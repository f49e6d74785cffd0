"""Where the memory at stake is negligible, the CPU builds one step per chunk, whatever k.

`_memory.negligible` compares what one step per chunk keeps for the backward pass (N carries
and one step's residuals, by `_memory.kept`, times the batch of a `jax.vmap` around the call)
with `Layout.negligible_bytes` (`_chunks.NEGLIGIBLE_BYTES` on the CPU); above it the memory rule
(`_memory.fit`) decides as before. Checked here on both sides of the threshold: the program
built, XLA:CPU's compiled temp memory (exactly `jax.lax.scan(jax.checkpoint(f))`'s below it,
exactly the memory rule's program above it), and the numbers against `jax.lax.scan`, values and
gradients, under `jit` and eagerly.
"""

import contextlib

import jax
import jax.numpy as jnp
import pytest

from scanrewrite.runtime import _chunks, _memory, _trace, scan
from scanrewrite.runtime._compat import enable_x64
from tests.test_runtime import LAYOUTS, TOL
from tests.test_runtime_levels import scan_lengths
from tests.test_runtime_memory import checkpointed_inside, loss_of, make_case, mlp_step, wide_step
from tests.treecheck import assert_trees_close

# (step, N, k, what the memory rule builds there: scan lengths, checkpointed inside)
RULE = [
    pytest.param(wide_step, 13, 4, ([3, 4], False), id="wide-13-4-keeps-4"),  # the carry dominates
    pytest.param(mlp_step, 64, 4, ([32, 2], False), id="mlp-64-4-builds-2"),
    pytest.param(wide_step, 12, 5, ([3, 4], False), id="wide-12-5-builds-4"),
]


def at_stake(make_step, n, argnums=None, dtype=jnp.float32):
    """What one step per chunk keeps by the runtime's count: differentiated with respect to
    `argnums` of `loss_of`'s `(params, h, xs)`, or traced as it is where None."""
    params, h, xs = make_case(make_step, n, dtype)
    if argnums is None:
        return _memory.kept(n, 1, _memory.step_bytes(_trace.body(make_step(params), h, xs)))
    seen = []

    def loss(params, h, xs):
        seen.append(_memory.kept(n, 1, _memory.step_bytes(_trace.body(make_step(params), h, xs))))
        return jnp.sum(h)

    jax.grad(loss, argnums=argnums)(params, h, xs)
    return seen[0]


@contextlib.contextmanager
def threshold(limit: int):
    """The CPU's layout with `negligible_bytes=limit` (part of the staging key)."""
    saved, _chunks._FORCE_LAYOUT = _chunks._FORCE_LAYOUT, LAYOUTS["fitted"]._replace(negligible_bytes=limit)
    try:
        yield
    finally:
        _chunks._FORCE_LAYOUT = saved


def built(make_step, n, k):
    """(scan lengths, whether the innermost scan checkpoints its step) of the program."""
    params, h, xs = make_case(make_step, n)
    jaxpr = jax.make_jaxpr(lambda h, xs: scan(make_step(params), h, xs, unroll=k))(h, xs).jaxpr
    return scan_lengths(jaxpr), checkpointed_inside(jaxpr)


def test_the_cpu_layout_has_the_threshold():
    assert _chunks.NEGLIGIBLE_BYTES == 1 << 20
    if jax.default_backend() == "cpu":
        expected = LAYOUTS["fitted"]._replace(negligible_bytes=_chunks.NEGLIGIBLE_BYTES)
        assert _chunks.layout() == expected._replace(negligible_saving=_chunks.NEGLIGIBLE_SAVING)


@pytest.mark.parametrize("make_step, n, k, rule", RULE)
def test_at_the_threshold_one_step_per_chunk_and_above_it_the_memory_rule(make_step, n, k, rule):
    at = at_stake(make_step, n)
    with threshold(at - 1):
        assert built(make_step, n, k) == rule
    with threshold(0):  # no threshold: the memory rule alone
        assert built(make_step, n, k) == rule
    for k_at in (k, 2, n, 2 * n):  # every k, one chunk of all steps too
        with threshold(at):
            assert built(make_step, n, k_at) == ([n], True)  # `jax.lax.scan(jax.checkpoint(f))`


def test_levels_that_nest_keep_the_memory_rule():
    at = at_stake(wide_step, 13)
    params, h, xs = make_case(wide_step, 13)
    with threshold(at):
        jaxpr = jax.make_jaxpr(lambda h, xs: scan(wide_step(params), h, xs, unroll=4, levels=2))(h, xs)
    assert scan_lengths(jaxpr.jaxpr)[0] != 13


def test_the_cpu_threshold_on_both_sides():
    """With the CPU's own threshold: a step whose carry is a 256 x 256 array keeps more than
    1 MiB in one step per chunk over 8 steps, and is fitted (chunks of 4); at 8 x 8 it is not."""
    step = lambda h, x: (h.at[:8].set(jnp.tanh(h[:8] * x[:8])), jnp.sum(h))

    def program(width):
        h, xs = jnp.ones((width, width)), jnp.ones((8, width, width))
        jaxpr = jax.make_jaxpr(lambda h, xs: scan(step, h, xs, unroll=4))(h, xs).jaxpr
        stake = _memory.kept(8, 1, _memory.step_bytes(_trace.body(step, h, xs)))
        return stake, scan_lengths(jaxpr), checkpointed_inside(jaxpr)

    with threshold(_chunks.NEGLIGIBLE_BYTES):
        stake, *large = program(256)
        assert stake > _chunks.NEGLIGIBLE_BYTES
        assert large == [[2, 4], False]
        stake, *small = program(8)
        assert stake <= _chunks.NEGLIGIBLE_BYTES
        assert small == [[8], True]


def test_vmap_multiplies_what_is_at_stake():
    """Under `jax.vmap`, every example keeps its own carries and residuals: a step at the
    threshold for one example is over it for two."""
    at = at_stake(wide_step, 13, (0, 1, 2))
    params, h, xs = make_case(wide_step, 13)
    grad = jax.grad(loss_of(scan, wide_step, unroll=4), argnums=(0, 1, 2))
    batched = jax.vmap(grad, in_axes=(None, 0, None))
    # 13 steps, or 3 chunks of 4; a new function each time, as jax caches the trace of one.
    outer = lambda fn, *args: scan_lengths(jax.make_jaxpr(lambda *a: fn(*a))(*args).jaxpr)[0]
    with threshold(at):
        assert outer(grad, params, h, xs) == 13
        assert outer(batched, params, jnp.stack([h, h]), xs) == 3
    with threshold(2 * at):
        assert outer(batched, params, jnp.stack([h, h]), xs) == 13


def batch_size_under(transform, tree):
    seen = []

    def probe(tree):
        seen.append(_memory.batch_size(tree))
        return sum(jnp.sum(leaf) for leaf in jax.tree_util.tree_leaves(tree))

    transform(probe)(tree)
    return seen[0]


def test_batch_size():
    a = jnp.ones((3, 5, 2))
    assert _memory.batch_size(a) == 1
    assert batch_size_under(jax.vmap, a) == 3
    assert batch_size_under(lambda f: jax.vmap(jax.vmap(f)), a) == 15
    assert batch_size_under(lambda f: jax.vmap(jax.grad(f)), a) == 3
    assert batch_size_under(lambda f: jax.grad(lambda t: jax.vmap(f)(t).sum()), a) == 3
    assert batch_size_under(lambda f: jax.jit(jax.vmap(f)), a) == 3
    assert batch_size_under(lambda f: jax.vmap(f, in_axes=((0, None),)), (a, a)) == 3  # the largest leaf
    assert batch_size_under(jax.jit, a) == 1


# With its parameters differentiated, mlp_step's memory rule builds one step per chunk too.
@pytest.mark.parametrize("argnums", [(0, 1, 2), (1, 2)], ids=["params-too", "carry-and-xs"])
@pytest.mark.parametrize("make_step, n, k, rule", [RULE[0], RULE[2]])
def test_the_compiled_memory_on_both_sides(make_step, n, k, rule, argnums):
    """XLA:CPU's temp memory of the jitted gradient, exactly: at the threshold that of
    `jax.lax.scan(jax.checkpoint(f))`, one byte under it that of the memory rule's program,
    and the two differ (the test can tell)."""
    args = make_case(make_step, n)
    at = at_stake(make_step, n, argnums)
    checkpointed = lambda f, h, xs: jax.lax.scan(jax.checkpoint(f), h, xs)

    def temp(scan_impl, **kwargs):
        grad = jax.grad(loss_of(scan_impl, make_step, **kwargs), argnums=argnums)  # new to jit's cache
        return jax.jit(grad).lower(*args).compile().memory_analysis().temp_size_in_bytes

    with threshold(at):
        below = temp(scan, unroll=k)
    with threshold(at - 1):
        above = temp(scan, unroll=k)
    with threshold(0):
        rule = temp(scan, unroll=k)
    assert below == temp(checkpointed)
    assert above == rule
    assert above != below


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("side", ["below", "above"])
@pytest.mark.parametrize("make_step, n, k, rule", RULE[:2])
def test_the_numbers_are_lax_scans(make_step, n, k, rule, side, jit):
    with enable_x64(True):
        args = make_case(make_step, n, jnp.float64)
        at = at_stake(make_step, n, (0, 1, 2), jnp.float64)
        results = []
        for loss in (loss_of(scan, make_step, unroll=k), loss_of(jax.lax.scan, make_step)):
            value_and_grad = jax.value_and_grad(loss, argnums=(0, 1, 2))
            with threshold(at if side == "below" else at - 1):
                results.append((jax.jit(value_and_grad) if jit else value_and_grad)(*args))
    actual, expected = results
    assert assert_trees_close(actual, expected, **TOL["float64"]) == len(jax.tree_util.tree_leaves(expected)) == 5
