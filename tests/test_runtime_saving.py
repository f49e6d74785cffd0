"""Where checkpointing would save only negligible memory, `checkpoint=True` builds no checkpoint.

`_plan.unneeded` compares `_memory.saving` (what a loop that checkpoints nothing keeps, every
step's residuals, less what one step per chunk keeps) with the layout's `negligible_saving`
(`_chunks.NEGLIGIBLE_SAVING` on every backend): at or under it the rolled layout builds
`jax.lax.scan` of the step and the straight-line layout chunks of k not checkpointed; over it
the plan is the one built before. Checked at the boundary on both layouts, with what the user
asked for (a policy, a per-step checkpoint, levels, stored steps) honoured, the count of a
nested scan, and the gradients against `jax.lax.scan`'s in float64 on both sides.
"""

import contextlib

import jax
import jax.numpy as jnp
import pytest

from scanrewrite.runtime import _chunks, _memory, _trace, record_sites, scan
from scanrewrite.runtime._compat import enable_x64
from scanrewrite.runtime._plan import Program
from tests.test_runtime import LAYOUTS, TOL
from tests.test_runtime_levels import scan_lengths
from tests.test_runtime_memory import checkpointed_inside, jax_residual_bytes, loss_of, make_case, mlp_step
from tests.treecheck import assert_trees_close

# 13 steps of a step whose residuals (72 floats) dominate its carry (8): at k = 4 the memory
# rule builds one step per chunk, checkpointed.
N, K = 13, 4
STRAIGHT = _chunks.Layout(rolled_chunk=False, rolled_rest=False, fit_chunk=True)


@contextlib.contextmanager
def negligible(limit: int, layout: _chunks.Layout = LAYOUTS["fitted"]):
    """Build with `layout` and `negligible_saving=limit` (part of the staging key)."""
    saved, _chunks._FORCE_LAYOUT = _chunks._FORCE_LAYOUT, layout._replace(negligible_saving=limit)
    try:
        yield
    finally:
        _chunks._FORCE_LAYOUT = saved


def saving(argnums=None, dtype=jnp.float32):
    """What checkpointing saves by the runtime's count, differentiated with respect to `argnums`
    of `loss_of`'s `(params, h, xs)`, or traced as it is where None."""
    params, h, xs = make_case(mlp_step, N, dtype)
    count = lambda params, h, xs: _memory.saving(N, _memory.step_bytes(_trace.body(mlp_step(params), h, xs)))
    if argnums is None:
        return count(params, h, xs)
    seen = []
    jax.grad(lambda *args: seen.append(count(*args)) or jnp.sum(args[1]), argnums=argnums)(params, h, xs)
    return seen[0]


def built(make_step=mlp_step, **kwargs):
    """(the plan, scan lengths, whether the innermost scan checkpoints its step, whether any
    equation checkpoints) of `scan(make_step(params), h, xs, unroll=K, **kwargs)`."""
    params, h, xs = make_case(mlp_step, N)
    with record_sites() as sites:
        jaxpr = jax.make_jaxpr(lambda h, xs: scan(make_step(params), h, xs, unroll=K, **kwargs))(h, xs).jaxpr
    (plans,) = sites.plans.values()
    return plans[-1], scan_lengths(jaxpr), checkpointed_inside(jaxpr), _checkpoints(jaxpr)


def _checkpoints(jaxpr) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in _trace.CHECKPOINT_PRIMITIVES:
            return True
        inner = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr")
        if inner is not None and _checkpoints(getattr(inner, "jaxpr", inner)):
            return True
    return False


def test_the_backends_have_the_threshold():
    assert _chunks.NEGLIGIBLE_SAVING == 16 << 20
    assert _chunks.layout().negligible_saving == _chunks.NEGLIGIBLE_SAVING


def test_rolled_at_the_boundary_lax_scan_and_over_it_the_memory_rule():
    at = saving()
    assert at > 0
    with negligible(at):
        plan, lengths, inside, _ = built()
    assert plan.program is Program.LOOP and (lengths, inside) == ([N], False)
    assert f"not checkpointed: it would save {at} bytes" in plan.describe()
    with negligible(at - 1):
        plan, lengths, inside, _ = built()
    assert plan.program is Program.CHUNKS and (lengths, inside) == ([N], True)  # the memory rule's 1
    assert f"checkpointed: it saves {at} bytes (" in plan.describe()
    assert f"more than the negligible {at - 1}" in plan.describe()


def test_straight_line_at_the_boundary_chunks_of_k_not_checkpointed():
    at = saving()
    with negligible(at, STRAIGHT):
        plan, _, _, checkpoints = built()
    assert (plan.program, plan.chunk, plan.checkpoint, checkpoints) == (Program.CHUNKS, K, False, False)
    with negligible(at - 1, STRAIGHT):
        plan, _, _, checkpoints = built()
    assert plan.checkpoint is True and checkpoints


def test_a_written_checkpoint_true_is_the_default():
    """The rewrite writes no `checkpoint=`, and `True` cannot be told from it: both are weighed."""
    with negligible(saving()):
        assert built(checkpoint=True)[0].program is Program.LOOP


@pytest.mark.parametrize(
    "kwargs, make_step",
    [
        pytest.param({"checkpoint": jax.checkpoint_policies.nothing_saveable}, mlp_step, id="policy"),
        pytest.param({}, lambda params: jax.checkpoint(mlp_step(params)), id="per-step-checkpoint"),
        pytest.param({"levels": 2}, mlp_step, id="levels"),
        pytest.param({"store": 1}, mlp_step, id="store"),
    ],
)
def test_what_the_user_asked_for_is_checkpointed_whatever_it_saves(kwargs, make_step):
    with negligible(1 << 40):
        plan, _, _, checkpoints = built(make_step, **kwargs)
    assert plan.program is Program.CHUNKS and plan.checkpoint is not False and checkpoints
    assert "would save" not in plan.describe()


def test_vmap_multiplies_the_saving():
    at = saving()
    params, h, xs = make_case(mlp_step, N)
    batched = lambda h: scan(mlp_step(params), h, xs, unroll=K)
    with negligible(at), record_sites() as sites:
        jax.make_jaxpr(jax.vmap(batched))(jnp.stack([h, h]))
    (plans,) = sites.plans.values()
    assert plans[-1].program is Program.CHUNKS


def test_a_nested_scan_keeps_its_body_at_each_of_its_steps():
    """The inner loop keeps its carry (a factor of `c * x`) and `tanh`'s output at each of its m
    steps; the slice `x` is the outer loop's own. jax keeps at least that."""
    m, width = 5, 8

    def step(h, x):
        h, _ = jax.lax.scan(lambda c, _: (jnp.tanh(c * x), None), h, None, length=m)
        return h, None

    h, x = jnp.ones(width), jnp.ones(width)
    counted = _memory.step_bytes(_trace.body(step, h, jnp.stack([x, x]))).residuals
    assert counted == 2 * m * width * 4
    assert counted <= jax_residual_bytes(lambda params: step, {}, h, x, False)


@pytest.mark.parametrize("side", ["at", "over"])
def test_the_gradients_are_lax_scans(side):
    with enable_x64(True):
        args = make_case(mlp_step, N, jnp.float64)
        at = saving((0, 1, 2), jnp.float64)
        results = []
        with negligible(at if side == "at" else at - 1), record_sites() as sites:
            for loss in (loss_of(scan, mlp_step, unroll=K), loss_of(jax.lax.scan, mlp_step)):
                results.append(jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))(*args))
    (plans,) = sites.plans.values()
    assert plans[-1].program is (Program.LOOP if side == "at" else Program.CHUNKS)
    actual, expected = results
    assert assert_trees_close(actual, expected, **TOL["float64"]) == len(jax.tree_util.tree_leaves(expected)) == 5
