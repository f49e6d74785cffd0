"""The plan each call builds: the straight-line layout's fit, and `record_sites`' report of it.

On accelerators a chunk is straight-line code, and chunks of k big steps keep k steps'
residuals: the runtime builds the largest size up to k that keeps no more than one step per
chunk (`jax.lax.scan(jax.checkpoint(f))`) by its count of the step's carry and residuals. The
straight-line layout is pinned here on the CPU (`_chunks._FORCE_LAYOUT`); XLA's compiled temp
memory is read for the gradient.
"""

import jax
import jax.numpy as jnp
import pytest

from scanrewrite.runtime import _chunks, _memory, _plan, _trace, record_sites, scan
from scanrewrite.runtime._compat import enable_x64
from tests.test_runtime import LAYOUTS, pinned_layout
from tests.test_runtime_levels import scan_lengths
from tests.test_runtime_memory import TOL, loss_of, make_case, mlp_step, wide_step
from tests.treecheck import assert_trees_close

LAYOUTS.setdefault("line", _chunks.Layout(rolled_chunk=False, rolled_rest=False, fit_chunk=True))


def temp_bytes(loss, args) -> int:
    grad = jax.grad(loss, argnums=(1, 2))
    return jax.jit(grad).lower(*args).compile().memory_analysis().temp_size_in_bytes


def per_step(f, h, xs):
    return jax.lax.scan(jax.checkpoint(f), h, xs)


def test_the_accelerators_layout_is_fitted():
    """What `layout()` picks on a backend that is not the CPU: straight-line, fitted."""
    assert _chunks.Layout(rolled_chunk=False, rolled_rest=False, fit_chunk=True) == LAYOUTS["line"]


@pytest.mark.main_only(
    "XLA:CPU's schedule of straight-line code (a layout only accelerators build) keeps chunks of 4"
    " over 64 steps within per-step checkpointing's memory on newer releases (jax 0.6.2: 3328 bytes"
    " against 3136); the fit's choice and reason on every release by the mlp-16 and wide cases",
    ids=["mlp-64-4-keeps-4", "mlp-64-8-builds-4"],
)
@pytest.mark.parametrize(
    "make_step, n, k, built",
    [
        # Residuals (72 floats) dominate the carry (8): chunks of 4 keep more than per-step.
        pytest.param(mlp_step, 16, 4, 1, id="mlp-16-4-builds-1"),
        # Over 64 steps, 64 carries outweigh 4 steps' residuals: 4 as asked.
        pytest.param(mlp_step, 64, 4, 4, id="mlp-64-4-keeps-4"),
        # Over 64 steps, 8 steps' residuals are too many; 7 would be few enough, but leaves a
        # step over, which copies the cotangents of xs and ys: 4, the largest divisor that fits.
        pytest.param(mlp_step, 64, 8, 4, id="mlp-64-8-builds-4"),
        # The carry (256 floats) dominates: k as asked ...
        pytest.param(wide_step, 12, 4, 4, id="wide-12-4-keeps-4"),
        # ... but where k leaves a step over, the copies of the cotangents of xs and ys cost
        # more than the carries saved (XLA keeps 1.6x per-step checkpointing's memory).
        pytest.param(wide_step, 13, 4, 1, id="wide-13-4-builds-1"),
    ],
)
def test_the_straight_line_fit_builds_no_more_than_per_step_checkpointing(make_step, n, k, built):
    args = make_case(make_step, n)
    params, h, xs = args
    sizes = _memory.step_bytes(_trace.body(make_step(params), h, xs))
    slices = _memory.slice_bytes(_trace.body(make_step(params), h, xs))
    assert _memory.line_chunk_size(n, k, 1, sizes, slices) == _memory.Fit(built)
    assert _memory.kept_line(n, built, sizes, slices) <= _memory.kept_line(n, 1, sizes)
    with pinned_layout("line"), record_sites() as sites:
        jaxpr = jax.make_jaxpr(jax.grad(loss_of(scan, make_step, unroll=k), argnums=(1, 2)))(*args)
        fitted = temp_bytes(loss_of(scan, make_step, unroll=k), args)
    with pinned_layout("unrolled"):  # k as asked
        asked = temp_bytes(loss_of(scan, make_step, unroll=k), args)
    assert scan_lengths(jaxpr.jaxpr)[0] == n // built
    ((plan,),) = sites.plans.values()
    assert (plan.requested, plan.chunk) == (k, built)
    reason = f"fitted to {built}: chunks of {k} keep more than per-step checkpointing" if built != k else "as asked"
    assert any(reason in why for why in plan.reasons), plan.reasons
    checkpointed = temp_bytes(loss_of(per_step, make_step), args)
    assert fitted <= checkpointed, (fitted, checkpointed)
    if built != k:
        assert checkpointed < asked, (checkpointed, asked)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_the_fitted_straight_line_chunks_compute_what_lax_scan_computes(jit):
    with enable_x64(True), pinned_layout("line"):
        args = make_case(mlp_step, 13, jnp.float64)
        results = []
        for loss in (loss_of(scan, mlp_step, unroll=4), loss_of(jax.lax.scan, mlp_step)):
            value_and_grad = jax.value_and_grad(loss, argnums=(0, 1, 2))
            results.append((jax.jit(value_and_grad) if jit else value_and_grad)(*args))
    assert assert_trees_close(*results, **TOL["float64"]) == 5


def test_record_sites_reports_the_plan_and_why():
    """Per site: the program, chunk size, layout, checkpoint, stored steps, levels, staging and
    reasons, for a call traced eagerly and for one found cached."""
    args = make_case(mlp_step, 16)
    grad = jax.grad(loss_of(scan, mlp_step, unroll=4, store=2), argnums=(1, 2))
    with pinned_layout("fitted"):
        grad(*args)  # staged and cached before the recording
        with record_sites() as sites:
            grad(*args)
            grad(*args)
    ((site, plans),) = sites.plans.items()
    (plan,) = plans
    assert plan.program is _plan.Program.CHUNKS
    assert (plan.steps, plan.requested, plan.chunk, plan.store, plan.levels, plan.checkpoint) == (16, 4, 1, 2, 1, True)
    assert plan.layout.rolled_chunk
    report = sites.report()
    assert report.startswith(f"{site}: scan: checkpointed chunks of 1 rolled steps (asked 4)")
    assert "store=2 of 16" in report and "fitted to 1" in report and "the last 2 steps" in report


def test_a_per_step_checkpoint_taken_over_is_reported():
    params, h, xs = make_case(mlp_step, 8)
    step = jax.checkpoint(mlp_step(params), policy=jax.checkpoint_policies.dots_saveable)
    with pinned_layout("unrolled"), record_sites() as sites:
        jax.grad(lambda h: scan(step, h, xs, unroll=2)[0].sum())(h)
    ((plan,),) = sites.plans.values()
    assert plan.checkpoint is jax.checkpoint_policies.dots_saveable
    assert any("per-step checkpoint around f is taken over" in why for why in plan.reasons)


def test_a_flax_remat_taken_over_inside_its_step_is_reported():
    nnx = pytest.importorskip("flax.nnx", reason="flax is not installed (the `flax` extra)")
    from scanrewrite.runtime import nnx_scan

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.lin = nnx.Linear(4, 4, rngs=rngs)

        def __call__(self, x):
            return jnp.tanh(self.lin(x))

    blocks = nnx.vmap(lambda key: Block(nnx.Rngs(key)))(jax.random.split(jax.random.key(0), 5))
    fwd = nnx_scan(nnx.remat(lambda x, b: b(x)), in_axes=(nnx.Carry, 0), out_axes=nnx.Carry, unroll=2)
    with record_sites() as sites:
        nnx.grad(lambda blocks, x: jnp.sum(fwd(x, blocks)))(blocks, jnp.ones((2, 4)))
    ((plan,),) = sites.plans.values()
    assert any("remat inside Flax's step" in why and "taken over by the chunks" in why for why in plan.reasons)


def test_the_staging_path_taken_is_reported():
    """A closure made anew on every call: the first call stages a program cached on it, the
    next finds its program by the structure of its step, and the report says which."""
    h, xs = jnp.ones(3), jnp.linspace(0.0, 1.0, 6)

    def loss(h, c):
        def step(h, x):
            h = jnp.tanh(h * x + c)
            return h, h.sum()

        return scan(step, h, xs, unroll=2)[0].sum()

    with pinned_layout("fitted"), record_sites() as sites:
        for c in (0.1, 0.2):
            jax.grad(loss)(h, c)
    ((site, plans),) = sites.plans.items()
    assert [why for plan in plans for why in plan.reasons if why.startswith("staged")] == [
        "staged cached on f; the rule: " + _plan._WHY_STAGED[_plan.Staging.ONCE_BY_STEP],
        "staged by the structure of its step (f made anew); the rule: " + _plan._WHY_STAGED[_plan.Staging.ONCE_BY_STEP],
    ]
