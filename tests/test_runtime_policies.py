"""The runtime's checkpoint policies: `reductions_saveable` and its two companions.

What each policy keeps (jax's own account of the residuals, with jax's softmax a `custom_jvp`
or not) and what `record_sites()` says it keeps; a step that cannot be read keeps sums; and a
rewritten scan with each computes `jax.lax.scan`'s numbers eagerly, under `vmap` and `jvp`,
for a softmax-attention step, which keeps its maxima, and for a step whose output is a maximum,
which keeps sums only. Which steps may keep their maxima, attacked, and the gradients on every
layout: `test_runtime_extremes.py`.
"""

import collections
import contextlib
import io

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import print_saved_residuals

import scanrewrite.runtime
from scanrewrite.runtime import _policies, _reveal, record_sites, scan
from scanrewrite.runtime._compat import enable_x64
from tests.test_runtime import TOL, outputs_and_grads, pinned_layout
from tests.treecheck import assert_trees_close

POLICIES = [
    scanrewrite.runtime.reductions_saveable,
    scanrewrite.runtime.dots_with_no_batch_dims_and_reductions_saveable,
    scanrewrite.runtime.dots_and_reductions_saveable,
]
N = 5
X = jnp.ones((2, 3))


@contextlib.contextmanager
def softmax_custom_jvp(value: bool):
    """`jax.nn.softmax` as a `custom_jvp` (jax 0.12's default), or not (0.10's)."""
    saved = jax.config.jax_softmax_custom_jvp
    jax.config.update("jax_softmax_custom_jvp", value)
    try:
        yield
    finally:
        jax.config.update("jax_softmax_custom_jvp", saved)


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


def kept(policy, custom) -> collections.Counter:
    """The types of the values `policy` keeps of one `attention` step, counted (by type: jax
    names the primitive that made each, or on older releases the `reduce_precision` around it),
    with jax's softmax a `custom_jvp` or not, as the runtime replays the step (`_reveal`)."""
    h, ws = inputs(jnp.float32)
    w = jax.tree_util.tree_map(lambda a: a[0], ws)
    with softmax_custom_jvp(custom):
        step = _reveal.reveal(jax.make_jaxpr(attention)(h, w))
    with contextlib.redirect_stdout(io.StringIO()) as out:
        print_saved_residuals(jax.checkpoint(jax.extend.core.jaxpr_as_fun(step), policy=policy), h, *jax.tree_util.tree_leaves(w))
    return collections.Counter(line.split()[0] for line in out.getvalue().splitlines() if " output of " in line)


@pytest.mark.parametrize("custom", [False, True], ids=["softmax", "custom-jvp-softmax"])
def test_each_policy_keeps_what_it_says(custom):
    """Jax's account of the residuals, with the softmax as it is on jax 0.10 and as a
    `custom_jvp` (jax 0.12's default), which the runtime writes out (`_reveal`)."""
    if custom and jax.__version_info__ < (0, 5):
        pytest.skip("jax 0.4 names no custom_jvp's function: its softmax stays whole")
    h, ws = inputs(jnp.float32)
    with softmax_custom_jvp(custom):
        step = _reveal.reveal(jax.make_jaxpr(attention)(h, jax.tree_util.tree_map(lambda a: a[0], ws)))
        sums, maxima = collections.Counter({"f32[2,4]": 2}), collections.Counter({"f32[2,4]": 1})
        # q and k (no batch dimensions); the mix, and the scores, too (with them).
        dots = [collections.Counter(), collections.Counter({"f32[2,4,3]": 2}),
                collections.Counter({"f32[2,4,3]": 3, "f32[2,4,4]": 1})]  # fmt: skip
        for policy, its_dots, said in zip(POLICIES, dots, ["", "2 matrix products, ", "4 matrix products, "]):
            # Outside a rewritten scan: the sums (the softmax's and the mean) and its dots.
            assert kept(policy, custom) == sums + its_dots, policy.__name__
            # In one whose step allows it, the softmax's maximum too.
            built, why = _policies.resolve(policy, step, 1)
            assert kept(built, custom) == sums + maxima + its_dots, policy.__name__
            assert why.endswith(f"it keeps {said}1 maximum, 2 sums of each step"), why
        assert kept(jax.checkpoint_policies.nothing_saveable, custom) == collections.Counter()


@pytest.mark.parametrize("custom", [False, True], ids=["softmax", "custom-jvp-softmax"])
def test_a_rewritten_scan_says_what_it_keeps(custom):
    """`record_sites()` reports the reductions the compiled program keeps, on every release,
    the softmax's too where jax computes it as a `custom_jvp` (on jax 0.12 by default)."""
    if custom and jax.__version_info__ < (0, 5):
        pytest.skip("jax 0.4 names no custom_jvp's function: its softmax stays whole")
    h, ws = inputs(jnp.float32)
    with softmax_custom_jvp(custom), record_sites() as sites:
        jax.grad(lambda h: jnp.sum(scan(attention, h, ws, unroll=2, checkpoint=POLICIES[0])[1]))(h)
    (plans,) = sites.plans.values()
    assert all(plan.describe().count("it keeps 1 maximum, 2 sums of each step") == 1 for plan in plans), plans


@pytest.mark.parametrize("step", [attention])
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


def gru(h, x):
    """A step with no reduction: there is nothing to keep."""
    return jnp.tanh(h @ x), h[:, 0]


def test_checkpoint_true_keeps_reductions_on_accelerators():
    """The plain rewrite (`checkpoint=True`) keeps a step's reductions where the layout says so,
    computing `jax.lax.scan`'s numbers; a step with none, a policy or `checkpoint=False` the
    call names, and the CPU's layout build what they built before."""
    with enable_x64(True), pinned_layout("accelerator"), record_sites() as sites:
        h, ws = inputs(jnp.float64)
        expected = outputs_and_grads(jax.lax.scan, attention, h, ws, None)
        actual = outputs_and_grads(scan, attention, h, ws, None, unroll=2)
        ((plan, *_),) = sites.plans.values()
    assert assert_trees_close(actual, expected, **TOL["float64"]) == 5
    assert plan.checkpoint is _policies.with_maxima(POLICIES[0]), plan.describe()
    assert "checkpoint=True keeps the step's reductions on this layout" in plan.describe()

    def built(step, xs, layout="accelerator", **settings):
        with pinned_layout(layout), record_sites() as sites:
            jax.grad(lambda h: jnp.sum(scan(step, h, xs, unroll=2, **settings)[0]))(h)
        return [plan.checkpoint for plans in sites.plans.values() for plan in plans]

    h, ws = inputs(jnp.float32)
    assert built(gru, ws["q"][:, :3, :3]) == [True]
    assert built(attention, ws, checkpoint=jax.checkpoint_policies.dots_saveable) == [jax.checkpoint_policies.dots_saveable]
    assert built(attention, ws, checkpoint=False) == [False]
    assert built(attention, ws, layout="fitted") == [True]


def test_the_cpus_layout_keeps_nothing_by_default():
    from scanrewrite.runtime import _chunks

    assert jax.default_backend() != "cpu" or not _chunks.layout().keeps_reductions
