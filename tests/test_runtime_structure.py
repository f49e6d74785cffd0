"""A step made anew on every call is staged by the structure of its jaxpr (`_staging._by_structure`,
`_structure.key`): steps that compute alike share one compiled program, steps that differ in
anything but the values of the arrays they close over never do.

Every result is compared with `jax.lax.scan`'s on the same step; the cache is read through
`_staging._structures` and jax's compile events (`jax.monitoring`), never by mocking jax.
"""

import gc
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrewrite.runtime import _staging, _structure, scan
from tests.test_runtime import pinned_layout
from tests.treecheck import assert_trees_close

TOL = {"rtol": 2e-5, "atol": 2e-5}
XS = jnp.linspace(0.0, 1.0, 7)
COMPILES = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, *_, **__: COMPILES.append(event) if event.endswith("backend_compile_duration") else None
)


def made_anew(w, bias=0.1):
    """The `def _body` a loss function builds on every call, closing over `w` and `bias`."""

    def step(c, x):
        c = jnp.tanh(c * w + x + bias)
        return c, c.sum()

    return step


def runtime_scan(f, c):
    return scan(f, c, XS, unroll=3)


def lax_scan(f, c):
    return jax.lax.scan(f, c, XS)


AROUND = {
    "eager": lambda scan_impl, f, c: scan_impl(f, c),
    "vmap": lambda scan_impl, f, c: jax.vmap(lambda c: scan_impl(f, c))(jnp.stack([c, -c])),
    "grad": lambda scan_impl, f, c: jax.grad(lambda c: scan_impl(f, c)[0].sum())(c),
}


def grad_is_eager() -> bool:
    """Whether this jax differentiates eagerly (its `grad` tracers wrap arrays); older jax
    linearizes by partial evaluation, which stages a program: no structure is cached there."""
    seen = []
    jax.grad(lambda x: seen.append(_staging._eager(x)) or x)(1.0)
    return seen[0]


@pytest.fixture
def rolled():
    with pinned_layout("fitted"):
        _staging._structures.clear()
        yield


def calls(around, steps, init):
    """Each step through the runtime and through `jax.lax.scan`, compared; the results."""
    results = []
    for step in steps:
        actual = AROUND[around](runtime_scan, step, init)
        assert assert_trees_close(actual, AROUND[around](lax_scan, step, init), **TOL) >= 1
        results.append(actual)
    return results


@pytest.mark.parametrize("around", list(AROUND))
def test_steps_made_anew_share_one_program_and_compute_their_own_values(around, rolled):
    if around == "grad" and not grad_is_eager():
        pytest.skip("this jax linearizes by partial evaluation: nothing is cached by structure")
    init = jnp.ones(3)
    steps = [made_anew(jnp.full(3, w)) for w in (0.5, 0.25, 0.75, 1.5)]
    results = calls(around, steps, init)  # the first is staged on itself, the rest by structure
    assert len(_staging._structures) == 1
    leaves = [jax.tree_util.tree_leaves(r)[0] for r in results]
    assert not any(np.allclose(a, b) for a, b in zip(leaves, leaves[1:]))
    compiles = {}
    for name, scan_impl in (("runtime", runtime_scan), ("lax", lax_scan)):
        del COMPILES[:]
        for w in (2.0, 3.0):
            AROUND[around](scan_impl, made_anew(jnp.full(3, w)), init)
        compiles[name] = len(COMPILES)
    # `jax.lax.scan` compiles every new step again; the runtime compiled its program once.
    assert compiles["runtime"] == 0 and compiles["lax"] >= 2


def test_whether_the_closed_over_arrays_are_differentiated_is_part_of_the_key(rolled):
    """The fit counts the products with a closed-over array that is differentiated, so the same
    step gets one program with its array differentiated and another without."""
    if not grad_is_eager():
        pytest.skip("this jax linearizes by partial evaluation: nothing is cached by structure")

    def loss(w, c, scan_impl):
        return scan_impl(made_anew(w), c)[0].sum()

    w, c = jnp.full(3, 0.5), jnp.ones(3)
    for argnums in (0, 1, 0, 1):
        expected = jax.grad(loss, argnums)(w, c, lax_scan)
        assert assert_trees_close(jax.grad(loss, argnums)(w, c, runtime_scan), expected, **TOL) == 1
    assert len(_staging._structures) == 2


def literal(bias):
    def step(c, x):
        return c * x + bias, c

    return step


def power(y):
    return lambda c, x: (c**y * x, c)


@pytest.mark.parametrize(
    "first, second",
    [
        pytest.param(made_anew(2.0, 0.1), made_anew(2.0, 0.2), id="python-constants"),
        pytest.param(literal(0.0), literal(-0.0), id="zero-and-negative-zero"),
        pytest.param(power(2), power(3), id="params"),
        pytest.param(made_anew(jnp.ones(3)), made_anew(jnp.ones(3, jnp.int32)), id="dtypes"),
        pytest.param(made_anew(2.0), lambda c, x: (jnp.tanh(c * 2.0 - x + 0.1), c.sum()), id="primitives"),
    ],
)
def test_steps_that_compute_differently_never_share(first, second, rolled):
    init = jnp.ones(3)
    for step in (first, second):  # each compared with lax.scan of itself
        calls("eager", [step, literal(0.5)], init)
    keys = [_structure.key(jax.make_jaxpr(step)(init, XS[0])) for step in (first, second)]
    assert None not in keys and keys[0] != keys[1]


def custom(scale):
    @jax.custom_jvp
    def f(c):
        return jnp.sin(c)

    f.defjvp(lambda primals, tangents: (f(*primals), scale * tangents[0]))
    return lambda c, x: (f(c) + x, c)


def test_custom_derivative_rules_made_anew_are_never_shared(rolled):
    """Each closure defines its own rule, which its jaxpr holds as a function: compared by
    identity, it never matches another's, and each gradient is the step's own."""
    init = jnp.ones(3)
    grads = calls("grad", [custom(1.0), custom(2.0), custom(3.0)], init)
    assert not np.allclose(grads[0], grads[1]) and not np.allclose(grads[1], grads[2])


def test_a_debug_callback_fires_on_every_call_in_order(rolled):
    """Each closure's own callback, once per step, in order, on every call."""
    seen = []

    def with_callback(w):
        def step(c, x):
            jax.debug.callback(lambda x: seen.append((w, float(x))), x, ordered=True)
            return c * w + x, c

        return step

    for w in (0.5, 0.25, 0.75):
        seen.clear()
        runtime_scan(with_callback(w), jnp.ones(3))
        assert [s[0] for s in seen] == [w] * len(XS)
        np.testing.assert_allclose([s[1] for s in seen], XS, rtol=1e-6)


def test_the_cache_is_bounded_and_keeps_no_array_alive(rolled, monkeypatch):
    monkeypatch.setattr(_staging, "MAX_STRUCTURES", 2)
    init = jnp.ones(3)
    for bias in (0.1, 0.2, 0.3, 0.4):  # four structures, two steps of each
        calls("eager", [made_anew(2.0, bias), made_anew(2.0, bias)], init)
    assert len(_staging._structures) == 2
    w = jnp.full(3, 0.5)
    ref = weakref.ref(w)
    calls("grad", [made_anew(w), made_anew(w)], init)
    del w
    gc.collect()
    assert ref() is None


def test_inside_jit_the_program_is_traced_in_place(rolled):
    """Nothing compiles there to be saved: the program is the one traced in place, and nothing
    is cached by structure."""
    for w in (0.5, 0.25):
        jax.jit(lambda c, w=w: runtime_scan(made_anew(w), c))(jnp.ones(3))
    assert len(_staging._structures) == 0
