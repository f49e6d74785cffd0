"""`store`: the last steps in loop order keep their residuals instead of recomputing them.

The numbers are `jax.lax.scan`'s (compared leaf by leaf, forward and gradient, `vmap`, `jvp`,
reversed, N not divisible by k, levels, eagerly and under `jit`, `eqxi_scan(kind="lax")`,
`fori_loop`, `map`), a variant that stores the wrong steps is rejected, the compiled memory
grows with `store`, and `store >= N` on the straight-line layout is the for-loop's program.
"""

import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import pytest

import scanrewrite.runtime
from scanrewrite.runtime import (
    _chunks,
    dots_with_no_batch_dims_and_reductions_saveable,
    eqxi_scan,
    override,
    record_sites,
    reductions_saveable,
    scan,
)
from scanrewrite.runtime._compat import enable_x64
from tests.test_runtime import LAYOUTS, POLICY, TOL, check_against_lax, make_inputs, make_step, pinned_layout
from tests.test_runtime_absorb import checkpoint_eqns
from tests.test_runtime_memory import loss_of, make_case, mlp_step
from tests.treecheck import assert_trees_close

# The accelerators' layout: straight-line chunks, fitted (to no more than per-step checkpointing).
LAYOUTS.setdefault("line", _chunks.Layout(rolled_chunk=False, rolled_rest=False, fit_chunk=True))
N = 7


@pytest.mark.parametrize("layout", ["unrolled", "fitted", "line"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize(
    "unroll, store, checkpoint, levels",
    [
        (3, 0, True, 1),
        (3, 1, True, 1),
        (3, 2, POLICY, 1),
        (2, 3, True, 2),
        (1, 4, POLICY, 1),
        (True, 3, POLICY, 1),
        (True, 3, False, 1),
        (4, N, True, 1),
        (True, N + 5, False, 1),
    ],
    ids=["none", "one", "two-policy", "some-levels", "per-step-policy", "policy-loop", "plain", "all", "more-than-n"],
)
def test_matches_lax_scan(unroll, store, checkpoint, levels, reverse, layout):
    with enable_x64(True), pinned_layout(layout):
        check_against_lax(
            scan, N, "tree", "tree", jnp.float64, reverse=reverse, unroll=unroll, checkpoint=checkpoint,
            levels=levels, store=store,
        )  # fmt: skip


def scan_storing_by_index(f, init, xs, length=None, reverse=False, unroll=1, store=0):
    """Deliberately wrong: stores the highest indices also with `reverse=True`, where those are
    the first steps in loop order, so they run after the steps that come after them."""
    n = jax.tree_util.tree_leaves(xs)[0].shape[0]
    head = jax.tree_util.tree_map(lambda a: a[: n - store], xs)
    tail = jax.tree_util.tree_map(lambda a: a[n - store :], xs)
    carry, ys = scan(f, init, head, reverse=reverse, unroll=unroll)
    carry, ys_tail = scan(f, carry, tail, reverse=reverse, unroll=unroll, checkpoint=False)
    return carry, jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), ys, ys_tail)


def test_checker_rejects_the_wrong_steps_stored():
    kwargs = dict(n=N, xs_kind="array", ys_kind="array", dtype=jnp.float32, unroll=3, store=2)
    # Forward, the wrong variant happens to be right, and the checker agrees ...
    assert check_against_lax(scan_storing_by_index, reverse=False, **kwargs) == 6
    # ... reversed, it is wrong, and the checker says so.
    with pytest.raises(AssertionError, match="values differ"):
        check_against_lax(scan_storing_by_index, reverse=True, **kwargs)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("store", [1, 4, N])
def test_vmap_and_jvp(store, jit):
    step = make_step("array", "array")
    init, xs = make_inputs(N, "array", jnp.float32)
    wrap = jax.jit if jit else (lambda fn: fn)
    run = lambda impl, **kw: lambda c, xs: impl(step, c, xs, reverse=True, **kw)  # noqa: E731
    batched = jax.tree_util.tree_map(lambda a: jnp.stack([a, 2 * a]), init)
    for transform in (
        lambda fn: jax.vmap(fn, in_axes=(0, None))(batched, xs),
        lambda fn: jax.jvp(fn, (init, xs), (init, xs)),
    ):
        actual = wrap(lambda: transform(run(scan, unroll=3, store=store)))()
        expected = transform(run(jax.lax.scan))
        assert assert_trees_close(actual, expected, **TOL["float32"]) == len(jax.tree_util.tree_leaves(expected))


def test_eqxi_lax_fori_loop_and_map():
    step = make_step("array", "array")
    init, xs = make_inputs(N, "array", jnp.float32)
    loss = lambda impl: lambda c: sum(jnp.sum(leaf) for leaf in jax.tree_util.tree_leaves(impl(c)))  # noqa: E731
    pairs = [
        (lambda c: eqxi_scan(step, c, xs, kind="lax", unroll=2, store=3), lambda c: eqxi.scan(step, c, xs, kind="lax")),
        (
            lambda c: scanrewrite.runtime.fori_loop(0, N, lambda i, h: jnp.sin(h * i), c["h"], unroll=2, store=2),
            lambda c: jax.lax.fori_loop(0, N, lambda i, h: jnp.sin(h * i), c["h"]),
        ),
        (
            lambda c: scanrewrite.runtime.map(lambda x: jnp.tanh(x * c["h"]), xs, batch_size=2, unroll=2, store=1),
            lambda c: jax.lax.map(lambda x: jnp.tanh(x * c["h"]), xs, batch_size=2),
        ),
    ]
    for actual, expected in pairs:
        got = jax.value_and_grad(loss(actual))(init), actual(init)
        want = jax.value_and_grad(loss(expected))(init), expected(init)
        assert assert_trees_close(got, want, **TOL["float32"]) >= 4


def test_override_sets_store_and_is_in_the_staging_key():
    step = make_step("array", "array")
    init, xs = make_inputs(N, "array", jnp.float32)
    grad = jax.jit(jax.grad(lambda c: scan(step, c, xs, unroll=2)[0]["h"].sum()))
    expected = jax.grad(lambda c: jax.lax.scan(step, c, xs)[0]["h"].sum())(init)
    with pinned_layout("unrolled"), record_sites() as sites:
        plain = grad(init)
        with override(store=3):
            stored = grad(init)
    assert [plan.store for plans in sites.plans.values() for plan in plans] == [0, 3]
    for actual in (plain, stored):
        assert assert_trees_close(actual, expected, **TOL["float32"]) == 2


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True, None])
def test_bad_store_is_a_value_error_naming_store(bad):
    init, xs = make_inputs(N, "array", jnp.float32)
    step = make_step("array", "array")
    for call in (
        lambda: scan(step, init, xs, store=bad),
        lambda: scanrewrite.runtime.fori_loop(0, 3, lambda i, h: h, 1.0, store=bad),
        lambda: eqxi_scan(step, init, xs, kind="lax", store=bad),
        lambda: override(store=bad).__enter__(),
    ):
        with pytest.raises(ValueError, match="`store` must be a non-negative int"):
            call()
    with pytest.raises(ValueError, match="`store` applies to kind='lax' only"):
        eqxi_scan(step, init, xs, kind="checkpointed", store=2)


def test_a_concrete_array_store_is_an_int_under_grad():
    # An array from the user's config (`store=jnp.array(2)`) ran forward, and under `jax.grad`
    # reached the plan's `min(store, n)` as an array and raised TracerBoolConversionError.
    step = make_step("array", "array")
    for store in (jnp.array(2), jnp.int32(2)):
        assert check_against_lax(lambda *a, **kw: scan(*a, store=store, **kw), N, "array", "array", jnp.float32)
        with record_sites() as sites:
            jax.grad(lambda i, xs: scan(step, i, xs, unroll=2, store=store)[0]["h"].sum())(*make_inputs(N, "array", jnp.float32))
        assert [type(plan.store) for plans in sites.plans.values() for plan in plans] == [int]
        assert [plan.store for plans in sites.plans.values() for plan in plans] == [2]


def test_a_traced_store_is_a_value_error_saying_it_must_be_static():
    init, xs = make_inputs(N, "array", jnp.float32)
    step = make_step("array", "array")
    with pytest.raises(ValueError, match="`store` must be known at trace time.*static argument"):
        jax.jit(lambda i, xs, s: scan(step, i, xs, store=s))(init, xs, 2)


def test_unroll_as_an_array_is_an_int_and_traced_a_value_error():
    """`unroll` is read as `store` is: a concrete array of one int is that int (in the plan's
    key and arithmetic), a traced one an error saying it must be known at trace time."""
    init, xs = make_inputs(N, "array", jnp.float32)
    step = make_step("array", "array")
    k = jnp.array(2)
    assert check_against_lax(lambda *a, **kw: scan(*a, **{**kw, "unroll": k}), N, "array", "array", jnp.float32)
    with record_sites() as sites:
        jax.jit(jax.grad(lambda i, xs: scan(step, i, xs, unroll=k, checkpoint=POLICY)[0]["h"].sum()))(init, xs)
    assert [(type(plan.requested), plan.requested) for plans in sites.plans.values() for plan in plans] == [(int, 2)]
    with pytest.raises(ValueError, match="`unroll` must be known at trace time"):
        jax.jit(lambda i, xs, u: scan(step, i, xs, unroll=u))(init, xs, 2)


def primitive_names(jaxpr) -> list:
    names = []
    for eqn in jaxpr.eqns:
        names.append(eqn.primitive.name)
        for param in eqn.params.values():
            inner = getattr(param, "jaxpr", param)
            if hasattr(inner, "eqns"):
                names.extend(primitive_names(inner))
    return names


@pytest.mark.parametrize("store", [N, N + 1])
def test_storing_every_step_on_the_straight_line_layout_is_the_for_loop(store):
    """Every step straight-line, nothing checkpointed: no loop and no checkpoint in the program,
    forward or under `grad`; the numbers are the Python loop's."""
    step = make_step("array", "array")
    init, xs = make_inputs(N, "array", jnp.float32)
    run = lambda c, xs: scan(step, c, xs, unroll=True, checkpoint=False, store=store)  # noqa: E731
    loss = lambda c, xs: run(c, xs)[0]["h"].sum()  # noqa: E731
    with pinned_layout("line"), record_sites() as sites:
        for fn in (run, jax.grad(loss, argnums=(0, 1))):
            names = primitive_names(jax.make_jaxpr(fn)(init, xs).jaxpr)
            assert not {"scan", "while", "checkpoint", "remat", "remat2"} & set(names), names
    (plans,) = sites.plans.values()
    assert {(plan.store, plan.chunk) for plan in plans} == {(N, 0)}
    carry, ys = init, []
    for i in range(N):
        carry, y = step(carry, xs[i])
        ys.append(y)
    assert assert_trees_close(run(init, xs), (carry, jnp.stack(ys)), **TOL["float32"]) == 3


@pytest.mark.parametrize("unroll, store", [(True, 0), (True, 2), (3, 0)], ids=["loop", "loop-store", "chunks"])
def test_a_policy_on_the_straight_line_layout_checkpoints_each_step_alone(unroll, store):
    """With a policy, the accelerators' layout checkpoints each step of a chunk with it, as the
    for-loop's `jax.checkpoint(f, policy=...)` does, and nothing around the chunks: the program
    of `unroll=True` is that for-loop's, with `store` its last steps not checkpointed; the
    numbers are `jax.lax.scan`'s."""
    step = make_step("array", "array")
    init, xs = make_inputs(N, "array", jnp.float32)
    run = lambda c, xs: scan(step, c, xs, unroll=unroll, checkpoint=POLICY, store=store)  # noqa: E731
    with pinned_layout("line"), record_sites() as sites:
        found = checkpoint_eqns(jax.make_jaxpr(run)(init, xs).jaxpr)
        (plan,) = next(iter(sites.plans.values()))
    # A loop's body is traced once: chunks of 3 over 7 steps are one chunk's 3 and 1 left over.
    assert len(found) == (N - store if unroll is True else 3 + N % 3), found
    assert all(eqn.params["policy"] is POLICY and eqn.params["prevent_cse"] for eqn in found)
    assert (plan.checkpoint_steps, plan.checkpoint_chunks) == (True, False)
    assert "each step checkpointed alone" in plan.describe()
    with pinned_layout("line"):
        assert check_against_lax(scan, N, "array", "array", jnp.float32, unroll=unroll, checkpoint=POLICY, store=store) >= 3


def test_one_step_per_chunk_is_the_checkpointed_scan_as_written():
    """`unroll=1` builds `jax.lax.scan(jax.checkpoint(f))` exactly as a user writes it, with
    jax's default `prevent_cse=True` (`prevent_cse=False` kept 29 MiB more of the GPT-style
    stack on a TPU v5e): the same jaxpr under `grad`, on both layouts; with a policy that keeps
    dots, `prevent_cse=False`, and with `reductions_saveable`, which keeps none, `True` (on the
    TPU's origin block 18.7 ms in 372 MiB against 23.6 ms in 403)."""
    args = make_case(mlp_step, 5)
    grad = lambda loss: str(jax.make_jaxpr(jax.grad(loss, argnums=(1, 2)))(*args))  # noqa: E731
    written = grad(loss_of(lambda f, h, xs: jax.lax.scan(jax.checkpoint(f), h, xs), mlp_step))
    for layout in ("line", "fitted"):
        with pinned_layout(layout):
            assert grad(loss_of(scan, mlp_step, unroll=1)) == written, layout
    unfit = grad(loss_of(lambda f, h, xs: jax.lax.scan(jax.checkpoint(f, prevent_cse=False), h, xs), mlp_step))
    assert unfit != written  # the comparison can tell
    # With a policy, `prevent_cse=False` (145 MiB less and 4% faster there).
    with pinned_layout("line"):
        (eqn,) = checkpoint_eqns(jax.make_jaxpr(lambda h, xs: scan(mlp_step(args[0]), h, xs, unroll=1, checkpoint=POLICY))(*args[1:]).jaxpr)
    assert eqn.params["prevent_cse"] is False and eqn.params["policy"] is POLICY
    for policy, prevent_cse in ((reductions_saveable, True), (dots_with_no_batch_dims_and_reductions_saveable, False)):
        with pinned_layout("line"):
            run = lambda h, xs, policy=policy: scan(mlp_step(args[0]), h, xs, unroll=1, checkpoint=policy)  # noqa: E731
            (eqn,) = checkpoint_eqns(jax.make_jaxpr(run)(*args[1:]).jaxpr)
        assert eqn.params["prevent_cse"] is prevent_cse, policy.__name__


def temp_bytes(loss, args) -> int:
    grad = jax.grad(loss, argnums=(1, 2))
    return jax.jit(grad).lower(*args).compile().memory_analysis().temp_size_in_bytes


@pytest.mark.main_only(
    "XLA:CPU schedules straight-line code (a layout only accelerators build) so that memory grows"
    " with every stored step on newer releases only (jax 0.4.31: 5280, 5056, 4912 bytes at 2, 8, 12);"
    " the fitted case runs on each release",
    ids=["line"],
)
@pytest.mark.parametrize("layout", ["line", "fitted"])
def test_memory_grows_with_store(layout):
    """XLA's compiled temp memory for the gradient: no more than per-step checkpointing at store=0, then more
    for every step stored. On the straight-line layout storing all 16 steps keeps no more than
    not checkpointing (`jax.lax.scan`). On the CPU's rolled layout store=N is `jax.lax.scan` of
    the step itself, while fewer stored steps split the loop in two, whose slices of `xs` and
    concatenated outputs XLA keeps besides (as it does for leftover steps)."""
    n = 16
    args = make_case(mlp_step, n)
    per_step = temp_bytes(loss_of(lambda f, h, xs: jax.lax.scan(jax.checkpoint(f), h, xs), mlp_step), args)
    plain = temp_bytes(loss_of(jax.lax.scan, mlp_step), args)
    with pinned_layout(layout):
        temp = {s: temp_bytes(loss_of(scan, mlp_step, unroll=1, store=s), args) for s in (0, 2, 8, 12, n)}
    # No more than `jax.lax.scan(jax.checkpoint(f))` (equal on jax 0.10.2; 64 bytes less on 0.12.1).
    assert temp[0] <= per_step, (temp, per_step)
    # Storing keeps more than recomputing, and more stored steps never less (by how much, and
    # whether 8 and 12 differ at all, is XLA's schedule: jax 0.12.1 keeps 9984 bytes for both).
    assert temp[0] < temp[2] <= temp[8] <= temp[12], temp
    if layout == "line":
        assert temp[12] <= temp[n] <= plain, (temp, plain)
    else:
        assert temp[n] == plain, (temp, plain)


def test_the_stored_steps_are_not_recomputed():
    """With every step stored, the backward pass runs the step's forward equations once: the
    gradient's program holds as many `tanh` as `jax.lax.scan`'s, where checkpointed it has more."""
    args = make_case(mlp_step, 6)
    count = lambda loss: primitive_names(jax.make_jaxpr(jax.grad(loss, argnums=(1, 2)))(*args).jaxpr).count("tanh")  # noqa: E731
    with pinned_layout("unrolled"):  # one chunk of 6 straight-line steps, as asked
        stored = count(loss_of(scan, mlp_step, unroll=True, store=6))
        checkpointed = count(loss_of(scan, mlp_step, unroll=True, store=0))
    assert stored == 6 * count(loss_of(jax.lax.scan, mlp_step)) < checkpointed
