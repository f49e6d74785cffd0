"""The runtime's checkpoint policies: `reductions_saveable` and its two companions.

Which steps may keep their maxima (`maxima_unsafe`, on small functions with a known answer),
what each policy keeps (jax's own account of the residuals), and that a rewritten scan with
each computes `jax.lax.scan`'s numbers, leaf by leaf, forward and gradient, on every layout,
stored steps too, under `jit` and eagerly, `vmap` and `jvp`: both for a softmax-attention step,
which keeps its maxima, and for a step that differentiates its maximum, which keeps sums only;
a wrong variant is rejected.
"""

import collections
import contextlib
import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import print_saved_residuals

import scanrewrite.runtime
from scanrewrite.runtime import _policies, record_sites, scan
from scanrewrite.runtime._compat import enable_x64
from tests.test_runtime import TOL, outputs_and_grads, pinned_layout
from tests.test_runtime_store import LAYOUTS  # noqa: F401 - it adds the straight-line layout, "line"
from tests.treecheck import assert_trees_close

POLICIES = [
    scanrewrite.runtime.reductions_saveable,
    scanrewrite.runtime.dots_with_no_batch_dims_and_reductions_saveable,
    scanrewrite.runtime.dots_and_reductions_saveable,
]
N = 5
X = jnp.ones((2, 3))
stopped_max = lambda x: jax.lax.stop_gradient(jnp.max(x, -1, keepdims=True))  # noqa: E731


@jax.custom_jvp
def sneaky_max(x):
    """A maximum whose own derivative rule compares it with its operand."""
    return jnp.max(x, -1)


@sneaky_max.defjvp
def _sneaky_max_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    top = jnp.max(x, -1, keepdims=True)
    return top[..., 0], jnp.sum(jnp.where(x == top, t, 0.0), -1)


@contextlib.contextmanager
def softmax_custom_jvp(value: bool):
    """`jax.nn.softmax` as a `custom_jvp` (jax 0.12's default), or not (0.10's)."""
    saved = jax.config.jax_softmax_custom_jvp
    jax.config.update("jax_softmax_custom_jvp", value)
    try:
        yield
    finally:
        jax.config.update("jax_softmax_custom_jvp", saved)


@pytest.mark.parametrize(
    "f, why",
    [
        (jax.nn.softmax, None),
        (lambda x: jax.nn.logsumexp(x, -1), None),
        (lambda x: jax.jit(jax.nn.softmax)(x), None),
        (lambda x: x * stopped_max(x), None),
        (jax.nn.relu, None),  # an elementwise max with a constant: no reduction
        (lambda x: jnp.max(x, -1), "it compares (eq) a maximum with a value"),  # its derivative does
        (lambda x: jnp.min(jax.jit(lambda y: y * 2)(x)), "it compares (eq) a maximum with a value"),
        (sneaky_max, "it compares (eq) a maximum with a value"),
        (lambda x: jnp.where(x == stopped_max(x), x, 0.0), "it compares (eq) a maximum with a value"),
        (lambda x: jnp.maximum(x, stopped_max(x)), "it compares (max) a maximum with a value"),
        # Scaled, it no longer equals the element it came from: an order turns only on a near tie,
        # as it does wherever a value kept meets one recomputed (`dots_saveable`'s too).
        (lambda x: jnp.maximum(x, stopped_max(x) / 2), None),
        (lambda x: jax.lax.cond(True, lambda: jnp.max(x), lambda: 0.0), "a maximum is inside cond"),
    ],
    ids=["softmax", "logsumexp", "jitted-softmax", "stopped", "relu", "max-out", "min-in-jit", "custom-jvp",
         "eq", "max", "max-of-half", "cond"],  # fmt: skip
)
def test_which_steps_keep_their_maxima(f, why):
    found = _policies.maxima_unsafe(_policies.jvp_jaxpr(jax.make_jaxpr(f)(X)))
    assert found == why if why is None else found.startswith(why), found


@jax.custom_vjp
def kept_max(x):
    """A maximum whose backward pass (Python, not looked into) gets it as a residual."""
    return jnp.max(x)


kept_max.defvjp(lambda x: (jnp.max(x), (x, jnp.max(x))), lambda res, g: (g * (res[0] == res[1]),))


def test_a_maximum_that_enters_python_or_a_step_that_cannot_be_traced_keeps_sums():
    policy = scanrewrite.runtime.reductions_saveable
    built, why = _policies.resolve(policy, jax.make_jaxpr(kept_max)(X))
    assert built is policy and "not looked into" in why, why
    # No forward derivative at all: the plan says so and keeps sums.
    callback = lambda x: jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), jnp.max(x) * x)  # noqa: E731
    built, why = _policies.resolve(policy, jax.make_jaxpr(callback)(X))
    assert built is policy and why.startswith("reductions_saveable keeps sums, not maxima: its jax.jvp could not"), why
    assert _policies.resolve(jax.checkpoint_policies.dots_saveable, None) == (jax.checkpoint_policies.dots_saveable, None)
    # An integer input has no tangent (float0): the step is still read.
    built, why = _policies.resolve(policy, jax.make_jaxpr(lambda x, i: jax.nn.softmax(x * i))(X, 3))
    assert built is not policy and "maxima and minima too" in why, why


def test_a_custom_jvp_softmax_keeps_its_maxima():
    with softmax_custom_jvp(True):
        step = jax.make_jaxpr(jax.nn.softmax)(X)
    assert "custom_jvp_call" in str(step)
    assert _policies.maxima_unsafe(_policies.jvp_jaxpr(step)) is None


def attention(h, w):
    """A softmax-attention layer, its weights scanned over as `xs`: it may keep its maxima."""
    scores = jnp.einsum("bsd,btd->bst", h @ w["q"], h @ w["k"])
    h = h + jax.nn.softmax(scores, axis=-1) @ h
    return h / jnp.sqrt(jnp.mean(h**2, axis=-1, keepdims=True) + 1.0), jnp.sum(h, axis=-1)


def peaked(h, w):
    """The same, its output each row's maximum: differentiated, so it keeps sums only."""
    h, _ = attention(h, w)
    return h, jnp.max(h, axis=-1)


def inputs(dtype, seed=0):
    rng = np.random.default_rng(seed)
    draw = lambda *shape: jnp.asarray(rng.normal(size=shape) / 2, dtype)  # noqa: E731
    return draw(2, 4, 3), {"q": draw(N, 3, 3), "k": draw(N, 3, 3)}


def kept(policy) -> collections.Counter:
    """The types of the values `policy` keeps of one `attention` step, counted (by type: jax
    names the primitive that made each, or on older releases the `reduce_precision` around it)."""
    h, ws = inputs(jnp.float32)
    w = jax.tree_util.tree_map(lambda a: a[0], ws)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        print_saved_residuals(jax.checkpoint(attention, policy=policy), h, w)
    return collections.Counter(line.split()[0] for line in out.getvalue().splitlines() if " output of " in line)


@softmax_custom_jvp(False)  # as a custom_jvp, jax keeps or recomputes the softmax whole
def test_each_policy_keeps_what_it_says():
    h, ws = inputs(jnp.float32)
    step = jax.make_jaxpr(attention)(h, jax.tree_util.tree_map(lambda a: a[0], ws))
    sums, maxima = collections.Counter({"f32[2,4]": 2}), collections.Counter({"f32[2,4]": 1})
    # q and k (no batch dimensions); the mix, and the scores, too (with them).
    dots = [collections.Counter(), collections.Counter({"f32[2,4,3]": 2}),
            collections.Counter({"f32[2,4,3]": 3, "f32[2,4,4]": 1})]  # fmt: skip
    for policy, its_dots in zip(POLICIES, dots):
        # Outside a rewritten scan: the sums (the softmax's and the mean) and its dots.
        assert kept(policy) == sums + its_dots, policy.__name__
        # In one whose step allows it, the softmax's maximum too.
        assert kept(_policies.resolve(policy, step)[0]) == sums + maxima + its_dots, policy.__name__
    assert kept(jax.checkpoint_policies.nothing_saveable) == collections.Counter()


def _cases():
    """Each policy and step in chunks of 2 on the accelerators' layout; the layouts, chunk
    sizes and stored steps with the first policy (the others differ from it in jax's dots)."""
    for policy in POLICIES:
        for step, keeps in ((attention, True), (peaked, False)):
            yield pytest.param(policy, step, keeps, 2, 0, "line", id=f"{policy.__name__}-{step.__name__}")
    for step, keeps, unroll, store, layout in [
        (attention, True, 1, 0, "unrolled"), (attention, True, 1, 0, "line"), (attention, True, True, 0, "fitted"),
        (attention, True, 2, 2, "fitted"), (attention, True, 2, 2, "line"), (peaked, False, True, 0, "line"),
        (peaked, False, 2, 2, "unrolled"),
    ]:  # fmt: skip
        name = f"{step.__name__}-{'loop' if unroll is True else f'k{unroll}'}-store{store}-{layout}"
        yield pytest.param(POLICIES[0], step, keeps, unroll, store, layout, id=name)


CASES = list(_cases())
MATRIX_CASES = ("reductions_saveable-attention", "reductions_saveable-peaked")


@pytest.mark.main_only(
    "the two steps with reductions_saveable (one keeps its maxima, one does not)",
    ids=[case.id for case in CASES if case.id not in MATRIX_CASES],
)
@pytest.mark.parametrize("policy, step, keeps, unroll, store, layout", CASES)
def test_matches_lax_scan(policy, step, keeps, unroll, store, layout):
    with enable_x64(True), pinned_layout(layout), record_sites() as sites:
        h, ws = inputs(jnp.float64)
        expected = outputs_and_grads(jax.lax.scan, step, h, ws, None)
        actual = outputs_and_grads(scan, step, h, ws, None, unroll=unroll, checkpoint=policy, store=store)
    assert assert_trees_close(actual, expected, **TOL["float64"]) == len(jax.tree_util.tree_leaves(expected)) == 5
    (plans,) = sites.plans.values()
    built = {plan.checkpoint for plan in plans}
    assert built == {_policies.resolve(policy, None)[0] if not keeps else _policies._WITH_MAXIMA[policy]}, built
    assert all(("maxima and minima too" if keeps else "keeps sums, not maxima") in plan.describe() for plan in plans)


@pytest.mark.parametrize("step", [attention, peaked])
def test_eagerly_under_vmap_and_jvp(step):
    policy = POLICIES[0]
    h, ws = inputs(jnp.float32)
    found = {}
    for name, run in (("lax", jax.lax.scan), ("runtime", lambda f, c, xs: scan(f, c, xs, unroll=2, checkpoint=policy))):
        loss = lambda h, ws, run=run: jnp.sum(run(step, h, ws)[1])  # noqa: E731
        found[name] = (
            jax.grad(loss, argnums=(0, 1))(h, ws),
            jax.vmap(loss, (0, None))(jnp.stack([h, 2 * h]), ws),
            jax.jvp(loss, (h, ws), (h, ws)),
        )
    assert assert_trees_close(found["runtime"], found["lax"], **TOL["float32"]) == 6


def test_the_checker_rejects_a_wrong_variant():
    """The steps run in the wrong order: the same shapes and policy, other numbers."""
    with enable_x64(True):
        h, ws = inputs(jnp.float64)
        expected = outputs_and_grads(jax.lax.scan, attention, h, ws, None)
        wrong = outputs_and_grads(scan, attention, h, ws, None, unroll=2, checkpoint=POLICIES[0], reverse=True)
    with pytest.raises(AssertionError, match="values differ"):
        assert_trees_close(wrong, expected, **TOL["float64"])
