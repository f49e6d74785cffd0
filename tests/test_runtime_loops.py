"""`scanrewrite.runtime.fori_loop` and `map` compute what `jax.lax.fori_loop` and `jax.lax.map` do.

In float64 (to 1e-10) on tiny arrays and few steps: values and gradients inside `jit` (and, for
one case each, outside), `jax.vmap` and `jax.jvp`, each compared with jax's own function through
`tests.treecheck.assert_trees_close`, with the number of leaves compared asserted. Two
deliberately wrong variants (a loop whose index is off by one, a map whose last partial batch
reads the wrong slices) are rejected by the same checks.
"""

import functools
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrewrite.runtime import ORIGINAL, Settings, Site, _staging, fori_loop, override, record_sites
from scanrewrite.runtime import map as runtime_map
from scanrewrite.runtime._compat import enable_x64, typeof
from tests.test_runtime import pinned_layout
from tests.treecheck import assert_trees_close

TOL = dict(rtol=1e-10, atol=1e-12)
HERE = os.path.realpath(__file__)


@pytest.fixture(autouse=True)
def x64():
    with enable_x64():
        yield


def body(i, val):
    """A step that depends on its index and on the order of the steps; a dict carry."""
    h = jnp.tanh(val["h"] * (1.0 + 0.1 * i) + 0.3 * val["s"])
    return {"h": h, "s": 0.9 * val["s"] + 0.1 * h[0]}


def make_init(seed=0):
    rng = np.random.default_rng(seed)
    return {"h": jnp.asarray(rng.normal(size=3)), "s": jnp.asarray(0.5)}


def fori_results(impl, lower, upper, init, jit=True, **kwargs):
    """The final value and the gradient of a scalar loss of it with respect to `init`."""

    def value_and_grad(init):
        def loss(init):
            out = impl(lower, upper, body, init, **kwargs)
            return out["h"].sum() + out["s"], out

        (_, out), grad = jax.value_and_grad(loss, has_aux=True)(init)
        return out, grad

    return (jax.jit(value_and_grad) if jit else value_and_grad)(init)


@functools.cache
def lax_fori_results(lower, upper):
    """`jax.lax.fori_loop`'s results, computed once per module (arrays are immutable)."""
    return fori_results(jax.lax.fori_loop, lower, upper, make_init())


FORI_CASES = [
    pytest.param(0, 0, dict(unroll=3), id="no-steps"),
    pytest.param(4, 1, dict(unroll=3), id="upper-below-lower"),
    pytest.param(2, 3, dict(unroll=3), id="one-step"),
    pytest.param(0, 7, dict(unroll=3), id="prime"),
    pytest.param(3, 16, dict(unroll=4, levels=2), id="prime-from-3-levels-2"),
    pytest.param(0, 7, dict(unroll=None, checkpoint=False), id="unroll-none-plain"),
    pytest.param(1, 6, dict(unroll=True, checkpoint=jax.checkpoint_policies.dots_saveable), id="unroll-true-policy"),
]


@pytest.mark.parametrize("lower, upper, kwargs", FORI_CASES)
def test_fori_loop_matches_jax(lower, upper, kwargs):
    actual = fori_results(fori_loop, lower, upper, make_init(), **kwargs)
    expected = lax_fori_results(lower, upper)
    assert assert_trees_close(actual, expected, **TOL) == 4


def test_fori_loop_matches_jax_outside_jit():
    actual = fori_results(fori_loop, 0, 7, make_init(), jit=False, unroll=3)
    assert assert_trees_close(actual, lax_fori_results(0, 7), **TOL) == 4


def fori_off_by_one(lower, upper, body_fun, init_val, **kwargs):
    """Deliberately wrong: the same number of steps, with the index starting at `lower + 1`."""
    return fori_loop(lower + 1, upper + 1, body_fun, init_val, **kwargs)


def test_checker_rejects_a_fori_loop_off_by_one():
    actual = fori_results(fori_off_by_one, 0, 7, make_init(), unroll=3)
    with pytest.raises(AssertionError, match="values differ"):
        assert_trees_close(actual, lax_fori_results(0, 7), **TOL)


def test_fori_loop_index_and_result_types_are_jaxs():
    seen = {"jax": set(), "runtime": set()}

    def recording(key):
        def step(i, val):
            seen[key].add((typeof(i).dtype, typeof(i).weak_type))
            return val + i

        return step

    bounds = (jnp.int16(1), jnp.int16(5))
    expected = jax.lax.fori_loop(*bounds, recording("jax"), 0.0)
    actual = fori_loop(*bounds, recording("runtime"), 0.0, unroll=3)
    assert seen["runtime"] == seen["jax"] == {(jnp.dtype("int64"), True)}
    assert assert_trees_close(actual, expected, rtol=0, atol=0) == 1
    assert typeof(actual).weak_type == typeof(expected).weak_type


def test_fori_loop_vmap_and_jvp():
    inits = jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), make_init(0), make_init(1))

    def batched(impl, **kwargs):
        return jax.vmap(lambda init: impl(0, 7, body, init, **kwargs))(inits)

    def pushed(impl, **kwargs):
        tangent = jax.tree_util.tree_map(jnp.ones_like, make_init())
        return jax.jvp(lambda init: impl(0, 7, body, init, **kwargs), (make_init(),), (tangent,))

    assert assert_trees_close(batched(fori_loop, unroll=3), batched(jax.lax.fori_loop), **TOL) == 2
    assert assert_trees_close(pushed(fori_loop, unroll=3), pushed(jax.lax.fori_loop), **TOL) == 4


def test_fori_loop_with_a_traced_bound_is_jaxs():
    """Under `jit` or `vmap` a bound is traced: the program is `jax.lax.fori_loop`'s own."""

    def program(impl, **kwargs):
        return jax.make_jaxpr(lambda n, init: impl(0, n, body, init, **kwargs))(7, make_init())

    with record_sites() as found:
        actual = program(fori_loop, unroll=3, levels=2)
    assert str(actual) == str(program(jax.lax.fori_loop))
    assert found == {}
    uppers = jnp.array([2, 7])
    batched = [jax.vmap(lambda n: impl(0, n, body, make_init()))(uppers) for impl in (fori_loop, jax.lax.fori_loop)]
    assert assert_trees_close(*batched, **TOL) == 2


def test_fori_loop_with_known_bounds_is_chunked():
    with pinned_layout("fitted"):  # the memory rule: chunks, where the CPU's layout needs none
        jaxpr = jax.make_jaxpr(lambda init: fori_loop(3, 10, body, init, unroll=3))(make_init())
    outer = next(eqn for eqn in jaxpr.eqns if eqn.primitive.name == "scan")  # then the leftover step
    assert outer.params["length"] == 7 // 3


def test_fori_loop_under_disable_jit_is_jaxs():
    step = lambda i, val: val + i  # noqa: E731
    with jax.disable_jit():
        for lower, upper in ((0, 4), (3, 0)):
            actual = fori_loop(lower, upper, step, 0.5, unroll=3)
            expected = jax.lax.fori_loop(lower, upper, step, 0.5)
            assert (type(actual), actual) == (type(expected), expected)


@pytest.mark.parametrize(
    "call, error, message",
    [
        pytest.param(lambda: fori_loop(0, 3, body, make_init(), unroll=-1), ValueError, "`unroll`.*-1", id="unroll"),
        pytest.param(lambda: fori_loop(0, 3, body, make_init(), levels=0), ValueError, "`levels`.*0", id="levels"),
        pytest.param(lambda: fori_loop(0, 3, None, make_init()), TypeError, "`body_fun` must be callable", id="body"),
        pytest.param(
            lambda: fori_loop(jnp.int16(0), jnp.int32(3), body, make_init()), TypeError, "equal types", id="bounds"
        ),
        pytest.param(lambda: runtime_map(jnp.sin, jnp.ones(3), batch_size=-1), ValueError, "`batch_size`", id="batch"),
        pytest.param(lambda: runtime_map(jnp.sin, jnp.ones(3), checkpoint="yes"), ValueError, "`checkpoint`", id="ckpt"),
        pytest.param(lambda: runtime_map(None, jnp.ones(3)), TypeError, "`f` must be callable", id="f"),
    ],
)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


def mapped(x):
    """A pytree in, a pytree out."""
    return {"y": jnp.sin(x["a"]) * x["b"], "z": jnp.cumsum(x["a"]) ** 2}


def make_xs(n, seed=0, batch=()):
    rng = np.random.default_rng(seed)
    return {"a": jnp.asarray(rng.normal(size=(*batch, n, 2))), "b": jnp.asarray(rng.normal(size=(*batch, n)))}


def lax_map(f, xs, *, batch_size=None):
    # `batch_size=0` is one `jax.vmap` (jax 0.4.38's `lax.map` divides by it instead).
    return jax.vmap(f)(xs) if batch_size == 0 else jax.lax.map(f, xs, batch_size=batch_size)


def map_results(impl, xs, jit=True, **kwargs):
    """The outputs and the gradient of a scalar loss of them with respect to `xs`."""

    def value_and_grad(xs):
        def loss(xs):
            out = impl(mapped, xs, **kwargs)
            return sum(jnp.sum(leaf) for leaf in jax.tree_util.tree_leaves(out)), out

        (_, out), grad = jax.value_and_grad(loss, has_aux=True)(xs)
        return out, grad

    return (jax.jit(value_and_grad) if jit else value_and_grad)(xs)


@functools.cache
def lax_map_results(n, batch_size):
    """`jax.lax.map`'s results, computed once per module."""
    return map_results(lax_map, make_xs(n), batch_size=batch_size)


MAP_CASES = [
    pytest.param(0, None, id="empty"),
    pytest.param(1, None, id="one"),
    pytest.param(7, None, id="prime"),
    pytest.param(0, 3, id="empty-batched"),
    pytest.param(2, 3, id="one-partial-batch"),
    pytest.param(7, 3, id="prime-batched"),
    pytest.param(7, 0, id="batch-size-0"),
]


@pytest.mark.parametrize("n, batch_size", MAP_CASES)
def test_map_matches_jax(n, batch_size):
    actual = map_results(runtime_map, make_xs(n), batch_size=batch_size, unroll=2)
    assert assert_trees_close(actual, lax_map_results(n, batch_size), **TOL) == 4


def test_map_matches_jax_outside_jit():
    actual = map_results(runtime_map, make_xs(7), jit=False, batch_size=3, unroll=2)
    assert assert_trees_close(actual, lax_map_results(7, 3), **TOL) == 4


def map_with_the_wrong_last_batch(f, xs, *, batch_size, **kwargs):
    """Deliberately wrong: the last partial batch is computed from the first slices of `xs`."""
    n = jax.tree_util.tree_leaves(xs)[0].shape[0]
    head = n - n % batch_size
    full = runtime_map(f, jax.tree_util.tree_map(lambda a: a[:head], xs), batch_size=batch_size, **kwargs)
    rest = jax.vmap(f)(jax.tree_util.tree_map(lambda a: a[: n - head], xs))
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), full, rest)


def test_checker_rejects_a_map_with_the_wrong_last_batch():
    actual = map_results(map_with_the_wrong_last_batch, make_xs(7), batch_size=3, unroll=2)
    with pytest.raises(AssertionError, match="values differ"):
        assert_trees_close(actual, lax_map_results(7, 3), **TOL)


def test_map_vmap_and_jvp():
    xss = jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves, axis=1), make_xs(5, 0), make_xs(5, 1))

    def batched(impl, **kwargs):
        return jax.vmap(lambda xs: impl(mapped, xs, **kwargs), in_axes=1)(xss)

    def pushed(impl, **kwargs):
        tangent = jax.tree_util.tree_map(jnp.ones_like, make_xs(5))
        return jax.jvp(lambda xs: impl(mapped, xs, **kwargs), (make_xs(5),), (tangent,))

    actual = batched(runtime_map, batch_size=2, unroll=2)
    assert assert_trees_close(actual, batched(lax_map, batch_size=2), **TOL) == 2
    assert assert_trees_close(pushed(runtime_map, unroll=2), pushed(lax_map), **TOL) == 4


def test_map_under_disable_jit_is_jaxs():
    xs = make_xs(3)
    with jax.disable_jit():
        actual = runtime_map(mapped, xs, batch_size=2, unroll=2)
        expected = jax.lax.map(mapped, xs, batch_size=2)
    assert assert_trees_close(actual, expected, rtol=0, atol=0) == 2


class Counted:
    """A function that counts its traces (a Python side effect runs once per trace)."""

    def __init__(self):
        self.traces = 0

    def __call__(self, *args):
        self.traces += 1
        return body(*args) if len(args) == 2 else mapped(*args)


CACHED_CALLS = [
    pytest.param(lambda f: fori_loop(0, 7, f, make_init(), unroll=3), id="fori_loop"),
    pytest.param(lambda f: jax.grad(lambda c: fori_loop(0, 7, f, c, unroll=3)["s"])(make_init()), id="fori-grad"),
    pytest.param(lambda f: runtime_map(f, make_xs(7), unroll=2), id="map"),
    pytest.param(lambda f: runtime_map(f, make_xs(7), batch_size=3, unroll=2), id="map-batched"),
    pytest.param(lambda f: jax.vmap(lambda xs: runtime_map(f, xs, unroll=2))(make_xs(7, batch=(2,))), id="map-vmap"),
]


@pytest.mark.parametrize("call", CACHED_CALLS)
def test_a_second_call_with_the_same_function_does_not_trace(call):
    f = Counted()
    first = call(f)
    traced, staged = f.traces, _staging.cache_size()
    assert traced > 0
    second = call(f)
    assert (f.traces, _staging.cache_size()) == (traced, staged)
    assert assert_trees_close(second, first, rtol=0, atol=0) >= 1


def test_the_cache_entry_dies_with_the_function_and_binds_a_method_to_its_instance():
    before = _staging.cache_size()

    class Model:
        traces = 0

        def step(self, i, val):
            self.traces += 1
            return body(i, val)

    model = Model()
    fori_loop(0, 7, model.step, make_init(), unroll=3)
    traced = model.traces
    fori_loop(0, 7, model.step, make_init(), unroll=3)
    assert model.traces == traced
    assert _staging.cache_size() == before + 1
    del model
    assert _staging.cache_size() == before


class Scaled(eqx.Module):
    w: jax.Array

    def __call__(self, i, val):
        return jax.tree_util.tree_map(lambda leaf: leaf * self.w, body(i, val))


def test_a_function_holding_arrays_is_not_cached_and_sees_its_arrays():
    before = _staging.cache_size()
    for w in (0.5, 0.25):
        step = Scaled(jnp.asarray(w))
        expected = jax.lax.fori_loop(0, 7, lambda i, val, step=step: step(i, val), make_init())
        assert assert_trees_close(fori_loop(0, 7, step, make_init(), unroll=3), expected, **TOL) == 2
    assert _staging.cache_size() == before


def line_of(marker):
    with open(HERE) as file:
        return next(n for n, text in enumerate(file, 1) if text.rstrip().endswith(f"# {marker}"))


def both_loops(init, xs):
    val = fori_loop(0, 7, body, init, unroll=3)  # fori site
    ys = runtime_map(mapped, xs, batch_size=2, unroll=2)  # map site
    return val, ys


def lax_loops(init, xs):
    return jax.lax.fori_loop(0, 7, body, init), jax.lax.map(mapped, xs, batch_size=2)


def test_record_sites_and_override_see_both_loops():
    fori_site, map_site = Site(HERE, line_of("fori site")), Site(HERE, line_of("map site"))
    args = (make_init(), make_xs(7))
    with record_sites() as found:
        jax.make_jaxpr(both_loops)(*args)
    assert {site: (call.api, call.settings) for site, call in found.items()} == {
        fori_site: ("fori_loop", Settings(unroll=3, checkpoint=True, levels=1, store=0)),
        map_site: ("map", Settings(unroll=2, checkpoint=True, levels=1, store=0)),
    }
    with override(unroll=ORIGINAL):
        assert str(jax.make_jaxpr(both_loops)(*args)) == str(jax.make_jaxpr(lax_loops)(*args))
    with override(unroll=1, sites=[fori_site]), pinned_layout("rolled"):  # k as requested
        jaxpr = jax.make_jaxpr(both_loops)(*args)
    lengths = [eqn.params["length"] for eqn in jaxpr.eqns if eqn.primitive.name == "scan"]
    assert lengths[:2] == [7, 3 // 2]  # then, on CPU, the map's leftover step in a loop of its own
    with override(unroll=1, sites=[fori_site]):
        actual = jax.jit(both_loops)(*args)
    assert assert_trees_close(actual, lax_loops(*args), **TOL) == 4
