"""A scan inside the step of a scan that nothing differentiates is not differentiated either.

Called eagerly on arrays (or under `jax.vmap` alone), a runtime scan on the CPU layout builds
`jax.lax.scan` of its step: there is no backward pass to keep memory for. A runtime scan inside
that step (jax-cfd's `trajectory` of `repeated` steps) is traced on tracers, which could be
differentiated in general; here it cannot, and it builds the same plain loop instead of
checkpointed chunks that only cost compile time (`_trace.forward_only`). Such a call's program,
the loop of its step, is traced whole and staged by its structure (`_staging._whole_by_structure`).
"""

import gc
import weakref

import jax
import jax.numpy as jnp
import pytest

from scanrewrite.runtime import _staging, _trace, scan
from tests.test_runtime import pinned_layout
from tests.treecheck import assert_trees_close

TOL = {"rtol": 2e-5, "atol": 2e-5}
XS = jnp.linspace(0.0, 1.0, 7)
CHECKPOINTS = {"checkpoint", "remat", "remat2"}


def inner_step(c, x):
    return jnp.tanh(c * 0.9 + x), c.sum()


def outer_step(c, x):
    c, ys = scan(inner_step, c, XS * x, unroll=3)
    return c, ys.sum()


def lax_outer_step(c, x):
    c, ys = jax.lax.scan(inner_step, c, XS * x)
    return c, ys.sum()


def primitives(jaxpr) -> list[str]:
    """Every equation's primitive name, nested jaxprs included."""
    names = []
    for eqn in jaxpr.eqns:
        names.append(eqn.primitive.name)
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                if hasattr(sub, "eqns") or hasattr(getattr(sub, "jaxpr", None), "eqns"):
                    names += primitives(getattr(sub, "jaxpr", sub))
    return names


#: An outer scan of `outer_step` eagerly and under `jax.vmap`.
AROUND = {
    "eager": lambda c: scan(outer_step, c, XS, unroll=3),
    "vmap": lambda c: jax.vmap(lambda c: scan(outer_step, c, XS, unroll=3))(jnp.stack([c, c])),
}


@pytest.mark.parametrize("around", list(AROUND))
def test_a_scan_inside_an_undifferentiated_scan_builds_lax_scan(around):
    init = jnp.ones(3)
    with pinned_layout("fitted"):
        actual = AROUND[around](init)
        # The cache key is (None, ("scan", length, reverse, _split_transpose, layout,
        # constant_inputs, forward, ...), inline).
        (staged,) = [fn for key, fn in _staging._cache[outer_step].items() if key[1][6]]
        names = primitives(jax.make_jaxpr(staged)(init, XS).jaxpr)
    assert names.count("scan") == 2 and not CHECKPOINTS & set(names)
    expected = jax.lax.scan(lax_outer_step, init, XS)
    if around == "vmap":
        expected = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), expected)
    assert assert_trees_close(actual, expected, **TOL) == 2


def test_under_grad_the_inner_scan_stays_checkpointed():
    """A carry of arrays under `jax.grad` of what the step closes over: the outer scan's own
    inputs are undifferentiated, but the step's constants are not, and so is the inner scan."""
    init = jnp.ones(3)

    def loss(scale, scan_fn):
        def step(c, x):
            c, ys = scan_fn(inner_step, c * scale, XS * x)
            return c, ys.sum()

        return scan_fn(step, init, XS)[0].sum()

    runtime = lambda f, c, xs: scan(f, c, xs, unroll=3)
    with pinned_layout("fitted"):
        jaxpr = jax.make_jaxpr(jax.grad(loss), static_argnums=1)(0.5, runtime).jaxpr
        actual = jax.grad(loss)(0.5, runtime)
    assert CHECKPOINTS & set(primitives(jaxpr))
    assert assert_trees_close(actual, jax.grad(loss)(0.5, jax.lax.scan), **TOL) == 1


COMPILES = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, *_, **__: COMPILES.append(event) if event.endswith("backend_compile_duration") else None
)


@pytest.mark.parametrize("around", ["eager", "vmap"])
def test_a_step_made_anew_is_traced_once_and_its_loop_compiled_once(around):
    """Where the program is `jax.lax.scan` of the step, the program itself is traced (the step
    once, as `jax.lax.scan` traces it) and staged by its structure, keeping no array alive."""
    traces = []

    def made_anew(w):
        def step(c, x):
            traces.append(w)
            c, ys = scan(inner_step, c * w, XS * x, unroll=3)
            return c, ys.sum()

        return step

    def call(scan_fn, w, init):
        run = lambda c: scan_fn(made_anew(w), c, XS)
        return run(init) if around == "eager" else jax.vmap(run)(jnp.stack([init, init]))

    init, ws = jnp.ones(3), [jnp.full(3, w) for w in (0.5, 0.25, 0.75, 1.5)]
    with pinned_layout("fitted"):
        _staging._structures.clear()
        for i, w in enumerate(ws):
            del COMPILES[:]
            actual = call(lambda f, c, xs: scan(f, c, xs, unroll=3), w, init)
            assert assert_trees_close(actual, call(jax.lax.scan, w, init), **TOL) == 2
            assert len(traces) == 2 * (i + 1)  # once each, by the runtime and by `jax.lax.scan`
            if i >= 2:  # the first is staged on itself, the second by structure
                assert len(COMPILES) == 1  # `jax.lax.scan`'s alone
        assert len(_staging._structures) == 1
    ref = weakref.ref(ws[0])
    del ws, w, traces[:]
    gc.collect()
    assert ref() is None


def seen(call):
    """`_trace.forward_only` of the carry inside a scan's step, under `call`."""
    found = []

    def step(c, x):
        found.append(_trace.forward_only(c))
        return c, x

    call(lambda c: scan(step, c, XS, unroll=3), jnp.ones(3))
    return found


@pytest.mark.parametrize(
    "call, expected",
    [
        pytest.param(lambda run, c: run(c), True, id="eager"),
        pytest.param(lambda run, c: jax.vmap(run)(jnp.stack([c, c])), True, id="vmap"),
        pytest.param(lambda run, c: jax.grad(lambda c: run(c)[0].sum())(c), False, id="grad"),
        pytest.param(lambda run, c: jax.jit(run)(c), False, id="jit"),
        pytest.param(
            lambda run, c: jax.vmap(jax.grad(lambda c: run(c)[0].sum()))(jnp.stack([c, c])), False, id="vmap-of-grad"
        ),
    ],
)
def test_forward_only_inside_the_step(call, expected):
    with pinned_layout("fitted"):
        assert seen(call) == [expected]


def test_forward_only_does_not_reach_into_a_transformation_inside_the_step():
    """Inside the step of an undifferentiated scan, a `jax.grad` or a `jax.jit` (which the step
    may differentiate) traces values that may be differentiated."""
    found = []

    def step(c, x):
        found.append(_trace.forward_only(c))
        jax.grad(lambda c: found.append(_trace.forward_only(c)) or c.sum())(c)
        jax.jit(lambda c: found.append(_trace.forward_only(c)) or c)(c)
        return c, x

    with pinned_layout("fitted"):
        scan(step, jnp.ones(3), XS, unroll=3)
    assert found == [True, False, False]
    assert _trace._forward_traces.get() == ()
