"""`scanrewrite.runtime.scan` computes what `jax.lax.scan` computes, at less memory.

Every comparison goes through `tests.treecheck.assert_trees_close` and asserts how many leaves
it compared; `test_checker_rejects_remainder_run_in_the_wrong_order` shows the same checks
reject a scan that gets the step order wrong only in the remainder.
"""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scanrewrite.runtime
from scanrewrite.runtime import _chunks, record_sites, scan
from scanrewrite.runtime._compat import enable_x64, typeof
from tests.treecheck import assert_trees_close

TOL = {"float64": dict(rtol=1e-10, atol=1e-12), "float32": dict(rtol=2e-5, atol=2e-5)}
POLICY = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
# The layout the backend picks, the straight-line one of accelerators, and the rolled ones.
LAYOUTS = {
    "backend": None,
    "unrolled": _chunks.Layout(rolled_chunk=False, rolled_rest=False),
    "rolled": _chunks.Layout(rolled_chunk=True, rolled_rest=True),
    # The CPU's layout: rolled, with the chunk size fitted to the step (`_memory`).
    "fitted": _chunks.Layout(rolled_chunk=True, rolled_rest=True, fit_chunk=True),
    # The accelerators' layout as the backend picks it, with every call checkpointed: straight-line,
    # fitted, `checkpoint=True` keeping reductions (`_plan.make`).
    "accelerator": _chunks.Layout(rolled_chunk=False, rolled_rest=False, fit_chunk=True, keeps_reductions=True),
}


@contextlib.contextmanager
def pinned_layout(name: str):
    """Build the program with the layout `name` (part of the staging key, so never stale)."""
    saved, _chunks._FORCE_LAYOUT = _chunks._FORCE_LAYOUT, LAYOUTS[name]
    try:
        yield
    finally:
        _chunks._FORCE_LAYOUT = saved


@contextlib.contextmanager
def always_checkpointed():
    """The backend's layout, but `checkpoint=True` checkpoints whatever it saves: for tests of
    the checkpointed program on steps whose saving the backend weighs as negligible."""
    saved, _chunks._FORCE_LAYOUT = _chunks._FORCE_LAYOUT, _chunks.layout()._replace(negligible_saving=0)
    try:
        yield
    finally:
        _chunks._FORCE_LAYOUT = saved


def make_step(xs_kind: str, ys_kind: str):
    """A step that depends on the order of its inputs, with a dict carry of two leaves."""

    def step(carry, x):
        h, s = carry["h"], carry["s"]
        if xs_kind == "none":
            u = 0.25
        elif xs_kind == "array":
            u = x
        else:
            u = x["a"] * x["b"][1] + x["b"][0]
        h = jnp.tanh(h * u + 0.1 * s)
        s = s * 0.9 + 0.1 * h[0]
        y = {
            "array": h * s,
            "tree": {"h": h, "none": None, "pair": (s, None)},
            "none": None,
        }[ys_kind]
        return {"h": h, "s": s}, y

    return step


def make_inputs(n: int, xs_kind: str, dtype, seed: int = 0, weak_s: bool = False):
    rng = np.random.default_rng(seed)
    draw = lambda *shape: jnp.asarray(rng.normal(size=shape), dtype)
    init = {"h": draw(3), "s": 0.5 if weak_s else jnp.asarray(0.5, dtype)}
    xs = {"none": None, "array": draw(n, 3), "tree": {"a": draw(n, 3), "b": (draw(n), draw(n, 3))}}[xs_kind]
    return init, xs


def outputs_and_grads(scan_impl, step, init, xs, length, **kwargs):
    """Forward outputs and the gradient of a scalar loss wrt `init` and `xs`, under one jit."""

    def run(init, xs):
        return scan_impl(step, init, xs, length, **kwargs)

    def loss(init, xs):
        return sum(jnp.sum(leaf) for leaf in jax.tree_util.tree_leaves(run(init, xs)))

    return jax.jit(lambda i, x: (run(i, x), jax.grad(loss, argnums=(0, 1))(i, x)))(init, xs)


def check_against_lax(scan_impl, n, xs_kind, ys_kind, dtype, *, seed=0, weak_s=False, **kwargs):
    """Assert `scan_impl` matches `jax.lax.scan`, forward and gradient; return leaves compared."""
    step = make_step(xs_kind, ys_kind)
    init, xs = make_inputs(n, xs_kind, dtype, seed, weak_s)
    length = n if xs_kind == "none" else None
    reverse = kwargs.get("reverse", False)
    expected = outputs_and_grads(jax.lax.scan, step, init, xs, length, reverse=reverse)
    actual = outputs_and_grads(scan_impl, step, init, xs, length, **kwargs)
    compared = assert_trees_close(actual, expected, **TOL[jnp.dtype(dtype).name])
    leaves = len(jax.tree_util.tree_leaves(expected))
    weak = lambda tree: [typeof(leaf).weak_type for leaf in jax.tree_util.tree_leaves(tree)]
    assert weak(actual) == weak(expected), "weak types differ"
    assert compared == leaves > 0
    return compared


unrolls = st.one_of(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, True, False]), st.integers(21, 30))
checkpoints = st.sampled_from([True, False, POLICY])


# XLA's CPU compiler (LLVM) takes seconds for an unrolled gradient, so examples are few.
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@settings(max_examples=7)
@given(
    n=st.integers(0, 20),
    unroll=unrolls,
    reverse=st.booleans(),
    xs_kind=st.sampled_from(["none", "array", "tree"]),
    ys_kind=st.sampled_from(["array", "tree", "none"]),
    checkpoint=checkpoints,
    weak_s=st.booleans(),
    seed=st.integers(0, 2**16),
    layout=st.sampled_from(["backend", "unrolled"]),
    levels=st.sampled_from([1, 2, 3, "auto"]),  # tests/test_runtime_levels.py has fixed cases
    # The last steps kept stored: none, one, some, all (tests/test_runtime_store.py has fixed cases).
    store=st.sampled_from([0, 1, 3, 25]),
)
def test_matches_lax_scan(
    dtype, n, unroll, reverse, xs_kind, ys_kind, checkpoint, weak_s, seed, layout, levels, store
):
    with enable_x64(dtype == "float64"), pinned_layout(layout):
        check_against_lax(
            scan, n, xs_kind, ys_kind, jnp.dtype(dtype), seed=seed, weak_s=weak_s,
            reverse=reverse, unroll=unroll, checkpoint=checkpoint, levels=levels, store=store,
        )  # fmt: skip


@pytest.mark.parametrize("layout", ["unrolled", "rolled"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("n", [0, 2, 4, 7, 8], ids=["empty", "shorter", "equal", "prime", "multiple"])
def test_lengths_around_the_chunk_size_eagerly(n, reverse, layout):
    """Without jit: N == 0, N < k, N == k, N prime, N a multiple of k, for k = 4."""
    step = make_step("array", "tree")
    init, xs = make_inputs(n, "array", jnp.float32)
    expected = jax.lax.scan(step, init, xs, reverse=reverse)
    with pinned_layout(layout):
        actual = scan(step, init, xs, reverse=reverse, unroll=4)
    assert assert_trees_close(actual, expected, **TOL["float32"]) == 4


def scan_with_remainder_forward(f, init, xs, length=None, reverse=False, unroll=1):
    """Deliberately wrong: the chunks honour `reverse`, the leftover steps always run forward."""
    n = jax.tree_util.tree_leaves(xs)[0].shape[0]
    rest = n % unroll
    head = jax.tree_util.tree_map(lambda a: a[: n - rest], xs)
    tail = jax.tree_util.tree_map(lambda a: a[n - rest :], xs)
    carry, ys = scan(f, init, head, reverse=reverse, unroll=unroll)
    carry, ys_tail = scan(f, carry, tail, unroll=True)
    return carry, jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), ys, ys_tail)


def test_checker_rejects_remainder_run_in_the_wrong_order():
    kwargs = dict(n=7, xs_kind="array", ys_kind="array", dtype=jnp.float32, unroll=3)
    # Forward, the wrong variant happens to be right, and the checker agrees ...
    assert check_against_lax(scan_with_remainder_forward, reverse=False, **kwargs) == 6
    # ... reversed, it is wrong, and the checker says so.
    with pytest.raises(AssertionError, match="values differ"):
        check_against_lax(scan_with_remainder_forward, reverse=True, **kwargs)


# Transformations, on one small case with a remainder (N = 7, k = 3), forward and reversed.

N, K = 7, 3


def small_case(seed=0):
    step = make_step("array", "array")
    init, xs = make_inputs(N, "array", jnp.float32, seed)
    return step, init, xs


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_vmap(reverse):
    step, _, _ = small_case()
    inits, xss = zip(*(make_inputs(N, "array", jnp.float32, seed) for seed in range(2)))
    inits = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *inits)
    xss = jnp.stack(xss, axis=1)  # batch on a non-leading axis of xs

    def batched(scan_impl, **kw):
        return jax.vmap(lambda i, x: scan_impl(step, i, x, reverse=reverse, **kw), in_axes=(0, 1))(inits, xss)

    assert assert_trees_close(batched(scan, unroll=K), batched(jax.lax.scan), **TOL["float32"]) == 3


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_jvp(reverse):
    step, init, xs = small_case()
    tangents = jax.tree_util.tree_map(jnp.ones_like, (init, xs))

    def pushed(scan_impl, **kw):
        return jax.jvp(lambda i, x: scan_impl(step, i, x, reverse=reverse, **kw), (init, xs), tangents)

    assert assert_trees_close(pushed(scan, unroll=K), pushed(jax.lax.scan), **TOL["float32"]) == 6


@pytest.mark.parametrize("checkpoint", [True, False, POLICY], ids=["checkpoint", "plain", "policy"])
def test_value_and_grad_under_jit(checkpoint):
    step, init, xs = small_case()

    def value_and_grad(scan_impl, **kw):
        def loss(init, xs):
            carry, ys = scan_impl(step, init, xs, reverse=True, **kw)
            return jnp.sum(ys**2) + carry["s"]

        return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(init, xs)

    actual = value_and_grad(scan, unroll=K, checkpoint=checkpoint)
    assert assert_trees_close(actual, value_and_grad(jax.lax.scan), **TOL["float32"]) == 4


def test_hessian():
    # Forward-over-reverse of an unrolled chunk is slow to compile: a shorter scan, N = 5, k = 2.
    step = make_step("array", "array")
    init, xs = make_inputs(5, "array", jnp.float32)

    def hessian(scan_impl, **kw):
        def loss(h):
            carry, ys = scan_impl(step, {"h": h, "s": init["s"]}, xs, reverse=True, **kw)
            return jnp.sum(ys**2) + carry["s"]

        return jax.jit(jax.hessian(loss))(init["h"])

    assert assert_trees_close(hessian(scan, unroll=2), hessian(jax.lax.scan), **TOL["float32"]) == 1


def test_split_transpose_is_accepted():
    step, init, xs = small_case()
    actual = outputs_and_grads(scan, step, init, xs, None, unroll=K, _split_transpose=True)
    expected = outputs_and_grads(jax.lax.scan, step, init, xs, None)
    assert assert_trees_close(actual, expected, **TOL["float32"]) == 6


@pytest.mark.parametrize(
    "unroll, unrolled, rolled",
    [
        (1, [7], [7]),
        (False, [7], [7]),
        # Straight-line, the leftover step sits in its `jax.checkpoint`; rolled, it is a loop.
        (3, [2], [2, 1]),
        # One chunk of all the steps: no loop around it (rolled, its loop is in its checkpoint).
        (7, [], []),
        (9, [], []),
        (0, [], []),
        (True, [], []),
    ],
)
@pytest.mark.parametrize("layout", ["unrolled", "rolled"])
def test_chunking(unroll, unrolled, rolled, layout):
    """`unroll` picks k: the loops over chunks and leftover steps, as scans in the program.

    `f` is traced once, as by `jax.lax.scan`, whatever the layout and chunk size.
    """
    traces = 0

    def step(carry, x):
        nonlocal traces
        traces += 1
        return carry * x, carry

    with pinned_layout(layout):
        jaxpr = jax.make_jaxpr(lambda c, x: scan(step, c, x, unroll=unroll))(jnp.float32(1), jnp.ones(N))
    lengths = [eqn.params["length"] for eqn in jaxpr.eqns if eqn.primitive.name == "scan"]
    assert lengths == (unrolled if layout == "unrolled" else rolled)
    assert traces == 1


@pytest.mark.parametrize(
    "checkpoint, remat_eqns",
    [(True, 2), (False, 0), (POLICY, 2)],
    ids=["checkpoint", "plain", "policy"],
)
@pytest.mark.parametrize("layout", ["unrolled", "rolled"])
def test_checkpoint_modes_wrap_chunk_and_remainder(checkpoint, remat_eqns, layout):
    """One `jax.checkpoint` around the chunk and one for the leftover steps, with the policy
    given: around them, straight-line; around each of them in their loop, rolled."""
    step, init, xs = small_case()
    with pinned_layout(layout):
        jaxpr = jax.make_jaxpr(lambda i, x: scan(step, i, x, unroll=K, checkpoint=checkpoint))(init, xs)
    remats = [
        eqn
        for outer in jaxpr.eqns
        for eqn in (outer.params["jaxpr"].eqns if outer.primitive.name == "scan" else [outer])
        if eqn.primitive.name == "remat2"  # what jax.checkpoint binds
    ]
    assert len(remats) == remat_eqns
    if callable(checkpoint) and checkpoint is not True:
        assert all(eqn.params["policy"] is checkpoint for eqn in remats)
    # Outside a loop, `prevent_cse=True` keeps the recomputation from merging with the forward pass.
    leftover_cse = layout == "unrolled"
    assert [eqn.params["prevent_cse"] for eqn in remats] == [False, leftover_cse][:remat_eqns]


@pytest.mark.parametrize(
    "init, xs_dtype",
    [
        pytest.param((jnp.ones(2, jnp.bfloat16),), jnp.bfloat16, id="bfloat16"),
        pytest.param((jnp.ones(2, jnp.complex64),), jnp.complex64, id="complex64"),
        pytest.param((jnp.ones(2, jnp.float32), jnp.int32(0), jnp.array(False)), jnp.float32, id="int-bool-leaves"),
    ],
)
def test_dtypes_forward_and_grad(init, xs_dtype):
    def step(carry, x):
        c = carry[0] * x + jnp.sin(carry[0])
        extra = () if len(carry) == 1 else (carry[1] + 1, jnp.logical_not(carry[2]))
        return (c, *extra), (c, extra)

    xs = (jnp.arange(10).reshape(5, 2) / 7).astype(xs_dtype)
    tol = dict(rtol=2e-2, atol=2e-2) if xs_dtype == jnp.bfloat16 else TOL["float32"]

    def run(scan_impl, **kw):
        def out_and_grad(xs):
            out = scan_impl(step, init, xs, reverse=True, **kw)
            grad = jax.grad(lambda x: jnp.sum(jnp.abs(scan_impl(step, init, x, **kw)[0][0]) ** 2))(xs)
            return out, grad

        return jax.jit(out_and_grad)(xs)

    expected = run(jax.lax.scan)
    compared = assert_trees_close(run(scan, unroll=2), expected, **tol)
    assert compared == len(jax.tree_util.tree_leaves(expected))


def test_int32_scan_is_exact():
    step = lambda c, x: (c * 3 + x, c % 7)
    xs = jnp.arange(11, dtype=jnp.int32)
    for reverse in (False, True):
        actual = scan(step, jnp.int32(1), xs, reverse=reverse, unroll=4)
        assert assert_trees_close(actual, jax.lax.scan(step, jnp.int32(1), xs, reverse=reverse), rtol=0, atol=0) == 2


@pytest.mark.parametrize("checkpoint", [True, False], ids=["checkpoint", "plain"])
def test_numpy_xs_reach_f_as_jax_arrays(checkpoint):
    """Also in the straight-line remainder: float64 numpy becomes float32 and has `.at`."""
    step = lambda c, x: (c + x.at[0].set(1.0), x.dtype == jnp.float32)
    xs = np.ones((N, 2))
    actual = scan(step, jnp.zeros(2), xs, unroll=K, checkpoint=checkpoint)
    assert assert_trees_close(actual, jax.lax.scan(step, jnp.zeros(2), xs), rtol=0, atol=0) == 2


def test_grad_memory_at_most_half_of_lax_scan():
    """XLA's compiled temp memory for the gradient of a residual-heavy scan (N = 64, k = 8)."""

    def step(c, x):
        return jnp.sin(jnp.tanh(c * x) + c), None

    def temp_bytes(scan_impl, **kw):
        grad = jax.grad(lambda c, xs: scan_impl(step, c, xs, **kw)[0].sum(), argnums=(0, 1))
        lowered = jax.jit(grad).lower(jnp.ones((16, 16)), jnp.ones((64, 16, 16)))
        return lowered.compile().memory_analysis().temp_size_in_bytes

    with always_checkpointed():  # the rule would build `jax.lax.scan` for this small a saving
        assert temp_bytes(scan, unroll=8) <= temp_bytes(jax.lax.scan) / 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        pytest.param(dict(unroll=-1), "`unroll`.*-1", id="unroll-negative"),
        pytest.param(dict(unroll=2.0), "`unroll`.*2.0", id="unroll-float"),
        pytest.param(dict(unroll="4"), "`unroll`.*'4'", id="unroll-str"),
        pytest.param(dict(unroll=None), "`unroll`.*None", id="unroll-none"),
        pytest.param(dict(checkpoint="dots_saveable"), "`checkpoint`.*'dots_saveable'", id="checkpoint-str"),
        pytest.param(dict(checkpoint=None), "`checkpoint`.*None", id="checkpoint-none"),
        pytest.param(dict(checkpoint=jnp.sum), "`checkpoint`.*policy.*raised TypeError", id="checkpoint-jnp-sum"),
        pytest.param(dict(checkpoint=lambda x: x), "`checkpoint`.*policy.*raised TypeError", id="checkpoint-one-arg"),
        pytest.param(dict(checkpoint=lambda *_, **__: 1.0), "`checkpoint`.*answered float", id="checkpoint-float"),
        pytest.param(
            dict(checkpoint=jax.checkpoint_policies.save_only_these_names), "`checkpoint`.*raised", id="checkpoint-factory"
        ),
        pytest.param(dict(xs=(jnp.ones(3), jnp.ones(4))), r"xs\[0\]. has leading axis 3 but .xs\[1\]. has 4", id="xs-lengths"),
        pytest.param(dict(xs=jnp.ones(4), length=5), "`length=5` but `xs` has leading axis 4", id="length-vs-xs"),
        pytest.param(dict(xs=None), "`xs=None`.*no `length`", id="no-length"),
        pytest.param(dict(xs=jnp.float32(1)), "no leading axis", id="xs-scalar"),
        pytest.param(dict(xs=None, length=-2), "`length`.*-2", id="length-negative"),
        pytest.param(dict(xs=None, length=2.5), "`length`.*2.5", id="length-float"),
    ],
)
def test_bad_input(kwargs, message):
    kwargs = {"xs": jnp.ones(4), **kwargs}
    with pytest.raises(ValueError, match=message):
        scan(lambda c, x: (c, x), 0.0, **kwargs)


def _keeps_nothing(prim, *_, **__):
    return False


@pytest.mark.parametrize(
    "policy",
    [
        *(getattr(jax.checkpoint_policies, name) for name in ("everything_saveable", "nothing_saveable", "dots_saveable",
                                                             "dots_with_no_batch_dims_saveable")),
        jax.checkpoint_policies.save_only_these_names("h"),
        jax.checkpoint_policies.save_any_names_but_these("h"),
        jax.checkpoint_policies.save_from_both_policies(POLICY, jax.checkpoint_policies.dots_saveable),
        jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host"),
        jax.checkpoint_policies.save_and_offload_only_these_names(
            names_which_can_be_saved=["h"], names_which_can_be_offloaded=[], offload_src="device", offload_dst="pinned_host"
        ),
        scanrewrite.runtime.reductions_saveable,
        scanrewrite.runtime.dots_with_no_batch_dims_and_reductions_saveable,
        scanrewrite.runtime.dots_and_reductions_saveable,
        _keeps_nothing,
    ],
)
def test_every_policy_passes_the_check_of_checkpoint(policy):
    # The check asks a policy about one `sin`: every policy jax and the runtime ship, and one
    # written as `def p(prim, *_, **__)`, answers; the call builds with it (no offloading here).
    with record_sites() as sites:
        jax.make_jaxpr(jax.grad(lambda c: scan(lambda c, x: (jnp.sin(c * x), c), c, jnp.ones(3), checkpoint=policy)[0]))(1.0)
    assert len(sites.plans) == 1


def test_f_must_be_callable():
    with pytest.raises(TypeError, match="`f` must be callable"):
        scan(None, 0.0, jnp.ones(3))
