"""`scan(levels=...)`: nested checkpointing computes what `jax.lax.scan` computes, at less memory.

The level plan itself (`scanrewrite.runtime._levels`) is checked exhaustively with a Python
loop standing in for `jax.lax.scan`; the runtime is compared with `jax.lax.scan` on a fixed
set of lengths (primes, perfect squares) and chunk sizes chosen so that levels are really
built, with leftover chunks and leftover steps; and the compiled memory is checked against
the number of carries `_levels.saved_carries` predicts.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrewrite.runtime import _levels, scan
from scanrewrite.runtime._compat import enable_x64
from tests.test_runtime import POLICY, TOL, check_against_lax, make_inputs, make_step, pinned_layout
from tests.treecheck import assert_trees_close

# The plan: pure Python, every count of units and every level count.


def python_loop(reverse):
    """`jax.lax.scan` semantics as a Python loop: `(unit, carry, xs, count) -> (carry, ys)`."""

    def loop(unit, carry, xs, count):
        ys = [None] * count
        for i in reversed(range(count)) if reverse else range(count):
            carry, ys[i] = unit(carry, xs[i])
        return carry, np.stack(ys)

    return loop


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("levels", [1, 2, 3, 4, 7, "auto"])
def test_plan_runs_every_unit_once_in_order(levels, reverse):
    """For 1 to 64 units: unit i runs i-th (reversed: last-but-i), blocks are wrapped."""
    for count in range(1, 65):
        resolved = _levels.resolve(levels, count)
        wrapped = []

        def wrap_block(block):
            wrapped.append(block)
            return block

        unit = lambda step, x: (step + 1, np.array([step, x]))
        xs = np.arange(count)
        steps, ys = _levels.nested(python_loop(reverse), unit, 0, xs, count, resolved, reverse, wrap_block)
        order = np.arange(count)[::-1] if reverse else np.arange(count)
        assert steps == count
        np.testing.assert_array_equal(np.asarray(ys), np.stack([order, xs], axis=1), err_msg=f"{count=}")
        assert bool(wrapped) == (_levels.built_levels(count, resolved) > 1)


@pytest.mark.parametrize(
    "count, levels, carries, built",
    [
        pytest.param(1024, 1, 1024, 1, id="flat"),
        pytest.param(1024, 2, 32 + 32, 2, id="sqrt"),
        pytest.param(1024, 3, 10 + 10 + 10, 3, id="cube-root"),
        pytest.param(10, 2, 3 + 3, 2, id="leftover-chunk"),
        pytest.param(3, 2, 3, 1, id="too-short-for-two-blocks"),
        pytest.param(8, 20, 2 + 2 + 2, 3, id="too-many-levels"),
        pytest.param(0, 2, 0, 1, id="empty"),
    ],
)
def test_saved_carries(count, levels, carries, built):
    assert _levels.saved_carries(count, levels) == carries
    assert _levels.built_levels(count, levels) == built


@pytest.mark.parametrize(
    "count, levels",
    [(1, 1), (64, 1), (65, 2), (1024, 2), (4096, 3), (2500, 3), (10**6, 6)],
)
def test_auto_is_the_fewest_levels_within_the_bound(count, levels):
    assert _levels.resolve("auto", count) == levels
    assert _levels.saved_carries(count, levels) <= _levels.AUTO_MAX_CARRIES
    assert levels == 1 or _levels.saved_carries(count, levels - 1) > _levels.AUTO_MAX_CARRIES


# The runtime against jax.lax.scan (float64): (N, k, levels) with what each case exercises.

CASES = [
    pytest.param(0, 3, 2, id="N0-empty"),
    pytest.param(1, 1, 2, id="N1-single"),
    pytest.param(4, 1, 2, id="N4-square-2x2"),
    pytest.param(5, 1, 3, id="N5-prime-L3-acts-as-2-leftover-chunk"),
    pytest.param(7, 2, 2, id="N7-prime-too-short-for-blocks"),
    pytest.param(9, 1, 2, id="N9-square-3x3"),
    pytest.param(11, 2, 2, id="N11-prime-leftover-chunk-and-step"),
    pytest.param(13, 3, 2, id="N13-prime-leftover-step"),
    pytest.param(16, 1, 4, id="N16-square-L4-acts-as-3"),
    pytest.param(17, 4, 2, id="N17-prime-k4"),
    pytest.param(19, 2, 3, id="N19-prime-L3-leftovers"),
    pytest.param(23, 5, 2, id="N23-prime-k5"),
    pytest.param(25, 5, 2, id="N25-square-k5-leftover-chunk"),
    pytest.param(29, 3, 2, id="N29-prime-3x3-leftover-steps"),
    pytest.param(31, 4, 2, id="N31-prime-2x3-leftovers"),
    pytest.param(36, 1, 3, id="N36-square-L3"),
    pytest.param(37, 2, 9, id="N37-prime-L9-acts-as-4"),
    pytest.param(43, 4, 2, id="N43-prime-3x3-leftover-chunk-and-steps"),
    pytest.param(40, 3, "auto", id="N40-auto-is-1"),
    pytest.param(130, 1, "auto", id="N130-auto-is-2"),
]
KINDS = [("array", "array"), ("tree", "tree"), ("none", "tree"), ("array", "none")]
LAYOUT_OF_CASE = lambda i: ["backend", "unrolled"][i // 2 % 2]
CHECKPOINTS = [True, True, False, POLICY]


@pytest.mark.parametrize("n, unroll, levels", CASES)
@pytest.mark.main_only(
    "the same layout, leftovers and settings in N4-square-2x2, N13-prime-leftover-step,"
    " N29-prime-3x3-leftover-steps, N11-prime-leftover-chunk-and-step and N16-square-L4-acts-as-3",
    ids=["N9-square-3x3", "N23-prime-k5", "N17-prime-k4", "N31-prime-2x3-leftovers", "N37-prime-L9-acts-as-4"],
)
def test_matches_lax_scan(n, unroll, levels, request):
    # Vary the rest deterministically across cases, so each is one compile, not a product.
    i = request.node.callspec.indices["n"]
    xs_kind, ys_kind = KINDS[i % 4]
    # The backend's layout of a chunk's steps (rolled on CPU), and the straight-line one.
    with enable_x64(True), pinned_layout(LAYOUT_OF_CASE(i)):
        check_against_lax(
            scan, n, xs_kind, ys_kind, jnp.float64, seed=i, weak_s=i % 3 == 0,
            reverse=i % 2 == 0, unroll=unroll, levels=levels, checkpoint=CHECKPOINTS[i % 4],
        )  # fmt: skip


def test_cases_build_levels_and_leftovers():
    """The cases above really nest, with leftover chunks and steps, together and reversed."""
    built = leftover_chunks = leftover_steps = both = both_reversed = 0
    both_by_layout = {"backend": 0, "unrolled": 0}
    for i, (n, k, levels) in enumerate(case.values for case in CASES):
        chunks = n // k
        s = _levels.split(chunks, _levels.resolve(levels, chunks)) if chunks else None
        built += s is not None
        leftover_chunks += bool(s and s.rest)
        leftover_steps += bool(s and n % k)
        both += bool(s and s.rest and n % k)
        both_reversed += bool(s and s.rest and n % k and i % 2 == 0)
        both_by_layout[LAYOUT_OF_CASE(i)] += bool(s and s.rest and n % k)
    assert (built, leftover_chunks, leftover_steps, both, both_reversed) >= (15, 6, 6, 3, 2)
    assert min(both_by_layout.values()) >= 1


def scan_with_block_leftover_forward(f, init, xs, length=None, reverse=False, unroll=1, levels=2):
    """Deliberately wrong: the leftover chunks and steps always run after the blocks' steps."""
    n = jax.tree_util.tree_leaves(xs)[0].shape[0]
    s = _levels.split(n // unroll, levels)
    full = s.blocks * s.size * unroll
    head, tail = jax.tree_util.tree_map(lambda a: a[:full], xs), jax.tree_util.tree_map(lambda a: a[full:], xs)
    carry, ys = scan(f, init, head, reverse=reverse, unroll=unroll, levels=levels)
    carry, ys_tail = scan(f, carry, tail, reverse=reverse, unroll=unroll)
    return carry, jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), ys, ys_tail)


def test_checker_rejects_block_leftover_in_the_wrong_order():
    kwargs = dict(n=23, xs_kind="array", ys_kind="array", dtype=jnp.float32, unroll=2)  # 3x3 + 2 chunks + 1
    assert check_against_lax(scan_with_block_leftover_forward, reverse=False, **kwargs) == 6
    with pytest.raises(AssertionError, match="values differ"):
        check_against_lax(scan_with_block_leftover_forward, reverse=True, **kwargs)


# Transformations, on N = 23, k = 2: 11 chunks, as 3 blocks of 3, 2 leftover chunks, 1 step.

N, K = 23, 2


@pytest.mark.parametrize("layout", ["backend", "unrolled"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_vmap_and_jvp_eagerly(reverse, layout):
    step = make_step("array", "array")
    inits, xss = zip(*(make_inputs(N, "array", jnp.float32, seed) for seed in range(2)))
    inits = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *inits)
    xss = jnp.stack(xss, axis=1)

    def batched(scan_impl, **kw):
        return jax.vmap(lambda i, x: scan_impl(step, i, x, reverse=reverse, **kw), in_axes=(0, 1))(inits, xss)

    expected = batched(jax.lax.scan)
    with pinned_layout(layout):
        assert assert_trees_close(batched(scan, unroll=K, levels=2), expected, **TOL["float32"]) == 3
    init, xs = make_inputs(N, "array", jnp.float32)
    tangents = jax.tree_util.tree_map(jnp.ones_like, (init, xs))

    def pushed(scan_impl, **kw):
        return jax.jvp(lambda i, x: scan_impl(step, i, x, reverse=reverse, **kw), (init, xs), tangents)

    expected = pushed(jax.lax.scan)
    with pinned_layout(layout):
        assert assert_trees_close(pushed(scan, unroll=K, levels=2), expected, **TOL["float32"]) == 6


def test_hessian():
    # N = 11, k = 2: 2 blocks of 2 chunks, 1 leftover chunk, 1 leftover step.
    step = make_step("array", "array")

    def hessian(scan_impl, **kw):
        def loss(h):
            carry, ys = scan_impl(step, {"h": h, "s": init["s"]}, xs, reverse=True, **kw)
            return jnp.sum(ys**2) + carry["s"]

        return jax.jit(jax.hessian(loss))(init["h"])

    with enable_x64(True):
        init, xs = make_inputs(11, "array", jnp.float64)
        actual = hessian(scan, unroll=2, levels=2)
        assert assert_trees_close(actual, hessian(jax.lax.scan), **TOL["float64"]) == 1


# Structure: what each level count builds.


def jaxpr_of(n, **kw):
    """The program for the requested k (the rolled layout, without fitting k to the step)."""
    step = lambda c, x: (jnp.sin(c) * x, c)
    with pinned_layout("rolled"):
        return jax.make_jaxpr(lambda c, x: scan(step, c, x, **kw))(jnp.float32(1), jnp.ones(n))


def scan_lengths(jaxpr):
    """The lengths of the nested scans, outermost first, following the first scan at each depth
    (and into a staged call that is not inlined, as eagerly)."""
    lengths = []
    while scans := [eqn for eqn in jaxpr.eqns if eqn.primitive.name in ("scan", "remat2", "jit", "pjit")]:
        eqn = scans[0]
        if eqn.primitive.name == "scan":
            lengths.append(eqn.params["length"])
        jaxpr = eqn.params["jaxpr"]
        jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    return lengths


@pytest.mark.parametrize(
    "n, kw, lengths",
    [
        pytest.param(1024, dict(unroll=4), [256], id="default-is-one-level"),
        pytest.param(1024, dict(unroll=4, levels=2), [16, 16], id="two-levels"),
        pytest.param(1024, dict(unroll=4, levels="auto"), [16, 16], id="auto"),
        pytest.param(1024, dict(unroll=1, levels=3), [10, 10, 10], id="three-levels"),
        pytest.param(23, dict(unroll=2, levels=2), [3, 3], id="leftovers"),
    ],
)
def test_levels_nest_scans(n, kw, lengths):
    # A prefix: where a chunk's steps are a rolled loop of their own, one more scan follows.
    assert scan_lengths(jaxpr_of(n, **kw).jaxpr)[: len(lengths)] == lengths


@pytest.mark.parametrize(
    "n, kw, same_as",
    [
        pytest.param(40, dict(unroll=4, levels=1), dict(unroll=4), id="levels-1-is-today"),
        pytest.param(13, dict(unroll=4, levels=5), dict(unroll=4), id="too-short-is-one-level"),
        pytest.param(20, dict(unroll=4, levels=9), dict(unroll=4, levels=2), id="too-many-is-the-most-it-supports"),
        pytest.param(40, dict(unroll=True, levels=3), dict(unroll=True), id="one-chunk"),
    ],
)
def test_levels_noop_and_degrade(n, kw, same_as):
    assert str(jaxpr_of(n, **kw)) == str(jaxpr_of(n, **same_as))


def test_blocks_are_checkpointed_without_the_chunk_policy():
    jaxpr = jaxpr_of(23, unroll=2, levels=2, checkpoint=POLICY).jaxpr
    outer = next(eqn for eqn in jaxpr.eqns if eqn.primitive.name == "scan")  # the blocks' loop
    (block,) = [eqn for eqn in outer.params["jaxpr"].jaxpr.eqns if eqn.primitive.name == "remat2"]
    assert block.params["policy"] is None and block.params["prevent_cse"] is False


@pytest.mark.parametrize("init", [1.0, jnp.float32(1.0)], ids=["weak-init", "strong-init"])
@pytest.mark.parametrize("levels", [2, 3, "auto"])
def test_levels_trace_f_no_more_than_one_level(levels, init):
    """The block and leftover loops reuse the chunk's trace: as many traces as `levels=1`."""

    def traces(levels):
        count = 0

        def step(carry, x):
            nonlocal count
            count += 1
            return carry * 0.5 + x, carry

        xs = jnp.ones(1003)  # k = 4: 250 chunks, leftover chunks at every level, 3 leftover steps
        jax.jit(jax.grad(lambda c: scan(step, c, xs, unroll=4, levels=levels)[1].sum()))(init)
        return count

    assert traces(levels) == traces(1) <= 4 + 3 + 1


# Staging: `levels` is part of the key of the cached unit (scanrewrite/runtime/_staging.py).


def test_levels_is_part_of_the_staging_key():
    from scanrewrite.runtime import _staging

    traces = 0

    def step(carry, x):
        nonlocal traces
        traces += 1
        return jnp.tanh(carry * x + 0.1), carry.sum()

    init, xs = jnp.ones(3), jnp.linspace(0.0, 1.0, N)
    expected = jax.lax.scan(step, init, xs)
    scan(step, init, xs, unroll=K)
    staged = _staging.cache_size()
    for i, levels in enumerate([2, 3, "auto"], start=1):
        actual = scan(step, init, xs, unroll=K, levels=levels)
        assert _staging.cache_size() == staged + i, levels
        traced = traces
        assert assert_trees_close(scan(step, init, xs, unroll=K, levels=levels), actual, rtol=0, atol=0) == 2
        assert traces == traced, "a second call with the same levels traced f again"
        assert assert_trees_close(actual, expected, **TOL["float32"]) == 2


# Memory: deterministic, from XLA's compiled memory analysis (N = 1,024, a 64 KiB carry).

CARRY = (128, 128)  # float32: 64 KiB


def grad_temp_bytes(scan_impl, **kw):
    step = lambda c, x: (jnp.sin(jnp.tanh(c * x) + c), None)
    grad = jax.grad(lambda c, xs: scan_impl(step, c, xs, **kw)[0].sum())
    lowered = jax.jit(grad).lower(jnp.ones(CARRY), jnp.ones((1024, 1, 1)))
    return lowered.compile().memory_analysis().temp_size_in_bytes


def test_grad_memory_of_a_long_scan():
    """levels=2 at most 0.25x levels=1 (same k) and 0.05x jax.lax.scan; about the predicted carries."""
    carry_bytes = 4 * CARRY[0] * CARRY[1]
    lax_bytes = grad_temp_bytes(jax.lax.scan)
    one, two, three = (grad_temp_bytes(scan, unroll=1, levels=levels) for levels in (1, 2, 3))
    assert two <= 0.25 * one and two <= 0.05 * lax_bytes
    assert grad_temp_bytes(scan, unroll=2, levels=2) <= 0.25 * grad_temp_bytes(scan, unroll=2)
    # Within a few carries of `saved_carries` (the rest: the carry being differentiated, its cotangent).
    for temp, levels in [(one, 1), (two, 2), (three, 3)]:
        predicted = _levels.saved_carries(1024, levels)
        assert predicted <= temp / carry_bytes <= predicted + 4, (levels, temp / carry_bytes)


@pytest.mark.parametrize(
    "levels",
    [0, -1, 1.5, "2", "Auto", True, None],
    ids=["zero", "negative", "float", "str-int", "str-case", "bool", "none"],
)
def test_bad_levels(levels):
    with pytest.raises(ValueError, match=re.escape(f"`levels` must be a positive int or 'auto', got {levels!r}")):
        scan(lambda c, x: (c, x), 0.0, jnp.ones(4), levels=levels)


# End to end: what the codemod writes with `levels` runs on the runtime and computes the same.

PROGRAM = b"""\
import jax
import jax.numpy as jnp


def rollout(h0, xs):
    def step(h, x):
        h = jnp.tanh(h * x + 0.1)
        return h, h.sum()

    return jax.lax.scan(step, h0, xs, reverse=True)
"""


@pytest.mark.parametrize("levels", [2, "auto"])
def test_rewritten_program_with_levels_computes_the_same(levels):
    from scanrewrite.codemod import rewrite

    result = rewrite(PROGRAM, unroll=2, levels=levels)
    assert f"levels={levels!r}".replace("'", '"').encode() in result.code
    assert b"scanrewrite.runtime.scan(" in result.code
    original, rewritten = {}, {}
    exec(compile(PROGRAM, "original", "exec"), original)
    exec(compile(result.code, "rewritten", "exec"), rewritten)
    # 65 chunks: 8 blocks of 8, then 1 chunk, then 1 step; "auto" builds 2 levels (65 > 64 carries).
    h0, xs = jnp.ones(3), jnp.linspace(0.5, 1.5, 131)
    expected = jax.jit(original["rollout"])(h0, xs)
    assert assert_trees_close(jax.jit(rewritten["rollout"])(h0, xs), expected, **TOL["float32"]) == 2
    assert assert_trees_close(rewritten["rollout"](h0, xs), expected, **TOL["float32"]) == 2
