"""Each runtime call is one staged unit, cached weakly on `f`, as `jax.lax.scan` caches its body.

Trace counts stand in for "neither retraces nor recompiles" (jax compiles a staged function
once per trace); every result is compared with `jax.lax.scan`'s.
"""

import dataclasses
import functools
import gc
import weakref

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import scanrewrite.runtime
from scanrewrite.runtime import _override, _staging, eqxi_scan, scan
from tests.test_runtime import pinned_layout
from tests.treecheck import assert_trees_close

TOL = dict(rtol=2e-5, atol=2e-5)
XS = jnp.linspace(0.0, 1.0, 7)


class Counted:
    """A step that counts its traces (a Python side effect runs once per trace)."""

    def __init__(self):
        self.traces = 0

    def __call__(self, carry, x):
        self.traces += 1
        carry = jnp.tanh(carry * x + 0.1)
        return carry, carry.sum()


CALLS = [
    pytest.param(lambda f, c: scan(f, c, XS, unroll=3), id="eager"),
    pytest.param(lambda f, c: jax.vmap(lambda c: scan(f, c, XS, unroll=3))(c), id="vmap"),
    pytest.param(lambda f, c: jax.grad(lambda c: scan(f, c, XS, unroll=3)[0].sum())(c), id="grad"),
    pytest.param(lambda f, c: eqxi_scan(f, c, XS, kind="checkpointed", unroll=3), id="eqxi-checkpointed"),
]


@pytest.mark.parametrize("call", CALLS)
def test_second_call_with_the_same_f_does_not_trace(call):
    f, init = Counted(), jnp.ones((2, 3))
    first = call(f, init)
    traced = f.traces
    assert traced > 0
    second = call(f, init)
    assert f.traces == traced
    assert assert_trees_close(second, first, rtol=0, atol=0) >= 1


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(dict(unroll=2), id="unroll"),
        pytest.param(dict(checkpoint=False), id="checkpoint"),
        pytest.param(dict(reverse=True), id="reverse"),
        pytest.param(dict(length=7), id="length"),
    ],
)
def test_a_changed_setting_stages_anew(change):
    f, init = Counted(), jnp.ones(3)
    scan(f, init, XS, unroll=3)
    staged = _staging.cache_size()
    actual = scan(f, init, XS, **{"unroll": 3, **change})
    assert _staging.cache_size() == staged + 1
    scan(f, init, XS, **{"unroll": 3, **change})
    assert _staging.cache_size() == staged + 1
    kwargs = {key: value for key, value in change.items() if key in ("reverse", "length")}
    assert assert_trees_close(actual, jax.lax.scan(f, init, XS, **kwargs), **TOL) == 2


SCALE = 1.0


def test_a_changed_global_is_seen_as_lax_scan_sees_it():
    """Like `jax.lax.scan`, a cached `f` keeps the value of a global it read when traced."""
    global SCALE

    def step(c, x):
        return c * SCALE + x, c

    init = jnp.ones(2)
    SCALE = 1.0
    first = scan(step, init, XS, unroll=3), jax.lax.scan(step, init, XS)
    SCALE = 2.0
    try:
        second = scan(step, init, XS, unroll=3), jax.lax.scan(step, init, XS)
    finally:
        SCALE = 1.0
    for actual, expected in (first, second):
        assert assert_trees_close(actual, expected, **TOL) == 2
    # The cached runtime and the cached lax.scan both still compute with the old value.
    assert assert_trees_close(second[0], first[0], rtol=0, atol=0) == 2


def test_cache_entry_dies_with_f():
    before = _staging.cache_size()

    def step(c, x):
        return c + x, c

    scan(step, jnp.ones(2), XS, unroll=3)
    assert _staging.cache_size() == before + 1
    alive = weakref.ref(step)
    del step
    gc.collect()
    assert alive() is None
    assert _staging.cache_size() == before


class ArrayStep(eqx.Module):
    w: jax.Array

    def __call__(self, c, x):
        return c * self.w + x, c.sum()


def partial_step(w, c, x):
    return c * w + x, c.sum()


@pytest.mark.parametrize(
    "make_f",
    [
        pytest.param(lambda w: ArrayStep(w), id="equinox-module-with-array"),
        pytest.param(lambda w: ArrayStep(w).__call__, id="equinox-bound-method"),
        pytest.param(lambda w: functools.partial(partial_step, w), id="partial-with-array"),
    ],
)
def test_f_holding_arrays_is_not_cached_and_sees_its_arrays(make_f):
    before = _staging.cache_size()
    init = jnp.ones(2)
    for w in (jnp.full(2, 0.5), jnp.full(2, 0.25)):
        f = make_f(w)
        actual = scan(f, init, XS, unroll=3)
        # `jax.lax.scan` itself cannot hash an `equinox.Module` of arrays, so it gets a wrapper.
        expected = jax.lax.scan(lambda c, x, f=f: f(c, x), init, XS)
        assert assert_trees_close(actual, expected, **TOL) == 2
    assert _staging.cache_size() == before


def test_bound_method_is_cached_on_its_instance():
    class Model:
        def step(self, c, x):
            self.traces = getattr(self, "traces", 0) + 1
            return c + x, c

    model = Model()
    scan(model.step, jnp.ones(2), XS, unroll=3)
    traced = model.traces
    scan(model.step, jnp.ones(2), XS, unroll=3)
    assert model.traces == traced


@pytest.mark.parametrize("layout", ["rolled", "unrolled"])
def test_disable_jit_runs_op_by_op_and_agrees(layout):
    """Nothing is staged or cached: without checkpointing `f` sees concrete arrays, every step."""
    f, init = Counted(), jnp.ones(3)
    seen = []
    step = lambda c, x: (seen.append(type(c)), f(c, x))[1]
    with jax.disable_jit(), pinned_layout(layout):
        actual = scan(step, init, XS, unroll=3, checkpoint=False)
        again = scan(step, init, XS, unroll=3, checkpoint=False)
        checkpointed = scan(f, init, XS, unroll=3)
    assert len(seen) == 2 * 7
    assert all(issubclass(kind, jax.Array) and not issubclass(kind, jax.core.Tracer) for kind in seen)
    expected = jax.lax.scan(f, init, XS)
    assert assert_trees_close(actual, expected, **TOL) == 2
    assert assert_trees_close(again, expected, **TOL) == 2
    assert assert_trees_close(checkpointed, expected, **TOL) == 2


def made_anew(scale):
    """A step made anew on every call of its maker, as a loss function's inner `def` is."""

    def step(c, x):
        return jnp.tanh(c * x * scale), c.sum()

    return step


#: A call of `scan_fn(f, init)` eagerly, under `jax.vmap` and under `jax.grad`.
AROUND = {
    "eager": lambda scan_fn, f, c: scan_fn(f, c),
    "vmap": lambda scan_fn, f, c: jax.vmap(lambda c: scan_fn(f, c))(c),
    "grad": lambda scan_fn, f, c: jax.grad(lambda c: scan_fn(f, c)[0].sum())(c),
}


def runtime_scan(f, c):
    return scan(f, c, XS, unroll=3)


def lax_scan(f, c):
    return jax.lax.scan(f, c, XS)


@pytest.mark.parametrize("around", list(AROUND))
def test_a_step_made_anew_on_every_call_runs_unstaged_on_the_cpu_layout(around):
    """Staged, such a step would be traced and compiled for one call alone; it runs unstaged,
    so nothing piles up in the cache. The same step called again is staged and cached."""
    call, init = AROUND[around], jnp.ones((2, 3))
    with pinned_layout("rolled"):
        call(runtime_scan, made_anew(0.5), init)
        before = _staging.cache_size()
        for scale in (0.25, 0.75):
            step = made_anew(scale)
            actual = call(runtime_scan, step, init)
            assert _staging.cache_size() == before
            assert assert_trees_close(actual, call(lax_scan, step, init), **TOL) >= 1
        call(runtime_scan, step, init)
        assert _staging.cache_size() == before + 1
    with pinned_layout("unrolled"):  # the accelerators' layout: staged, as before
        kept = made_anew(0.5)  # the cache holds it weakly
        call(runtime_scan, kept, init)
    assert _staging.cache_size() == before + 2


def step_of_arrays(c, x):
    return jnp.tanh(c * x), c.sum()


@pytest.mark.parametrize("around", ["eager", "vmap"])
def test_on_arrays_the_cpu_layout_builds_lax_scan_without_checkpoints(around):
    """Nothing around the call can differentiate it (arrays, or `vmap`'s tracers of arrays):
    on the CPU layout the staged program is `jax.lax.scan` of the step, with no checkpoint."""
    call, init = AROUND[around], jnp.ones((2, 3))
    with pinned_layout("fitted"):
        actual = call(runtime_scan, step_of_arrays, init)
        # The cache key is (None, ("scan", length, reverse, _split_transpose, layout,
        # constant_inputs, ...), inline): the program built for inputs no transformation
        # differentiates.
        (staged,) = [fn for key, fn in _staging._cache[step_of_arrays].items() if key[1][5]]
    jaxpr = jax.make_jaxpr(staged)(init[0], XS).jaxpr
    if [eqn.primitive.name for eqn in jaxpr.eqns] in (["jit"], ["pjit"]):  # staged not inlined
        jaxpr = jaxpr.eqns[0].params["jaxpr"].jaxpr
    names = [eqn.primitive.name for eqn in jaxpr.eqns]
    assert names.count("scan") == 1 and not {"checkpoint", "remat", "remat2"} & set(names)
    assert next(eqn for eqn in jaxpr.eqns if eqn.primitive.name == "scan").params["length"] == len(XS)
    assert assert_trees_close(actual, call(lax_scan, step_of_arrays, init), **TOL) == 2


def test_inside_jit_the_program_is_inlined():
    jaxpr = jax.make_jaxpr(lambda c: scan(Counted(), c, XS, unroll=3))(jnp.ones(3))
    assert [eqn.primitive.name for eqn in jaxpr.eqns if eqn.primitive.name in ("pjit", "jit")] == []


def test_resolve_sees_the_users_call_line_and_its_settings_reach_the_program(monkeypatch):
    """The override hook gets the rewritten call's own line, and what it returns is used."""
    sites = []

    def resolve(site, written, api):
        sites.append(site)
        return dataclasses.replace(written, unroll=2)

    monkeypatch.setattr(_override, "resolve", resolve)
    f = Counted()
    with pinned_layout("rolled"):  # the requested k, not fitted to the step
        jaxpr = jax.make_jaxpr(lambda c: scan(f, c, XS, unroll=7))(jnp.ones(3)); line = _line()  # fmt: skip
        jaxpr_eqxi = jax.make_jaxpr(lambda c: eqxi_scan(f, c, XS, kind="lax", unroll=7))(jnp.ones(3)); line_eqxi = _line()  # fmt: skip
    assert sites == [_override.Site(__file__, line), _override.Site(__file__, line_eqxi)]
    for program in (jaxpr, jaxpr_eqxi):
        outer = next(eqn for eqn in program.eqns if eqn.primitive.name == "scan")  # then the leftover's
        assert outer.params["length"] == 7 // 2  # resolved k = 2, not the 7 the call wrote


def _line() -> int:
    import sys

    return sys._getframe(1).f_lineno


def test_public_api_is_unchanged():
    # The loop functions, Flax's scans, the tuner's override API (scanrewrite.runtime._override)
    # and the runtime's checkpoint policies (scanrewrite.runtime._policies); a site's settings
    # (scanrewrite.settings) and the rest of what the tuner uses.
    assert scanrewrite.runtime.__all__ == [
        "DEFAULTS", "ORIGINAL", "Call", "Settings", "Site", "Sites", "dots_and_reductions_saveable",
        "dots_with_no_batch_dims_and_reductions_saveable", "eqxi_scan", "fori_loop", "linen_scan", "map",
        "named_policy", "nnx_scan", "override", "record_sites", "reductions_saveable", "scan", "sub_jaxprs",
    ]


def test_entries_per_f_are_bounded(monkeypatch):
    """A key that changes on every call (an inline `buffers=lambda c: ...`) cannot pile up."""
    monkeypatch.setattr(_staging, "MAX_PER_F", 2)
    f, before = Counted(), _staging.cache_size()
    for unroll in (1, 2, 3):
        scan(f, jnp.ones(3), XS, unroll=unroll)
    assert _staging.cache_size() == before + 2
