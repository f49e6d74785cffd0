"""`scanrewrite.runtime.override` and `record_sites`: settings by call site, at trace time.

An override must reach the compiled program: a jitted function traced before the override is
traced again under it (counted), the compiled temp memory follows the overridden `unroll`, and
`ORIGINAL` computes what `jax.lax.scan` / `equinox.internal.scan` compute (compared leaf by
leaf, with a wrong variant rejected).
"""

from __future__ import annotations

import os
import re
import sys

import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import pytest

import scanrewrite.runtime
from scanrewrite.runtime import ORIGINAL, Settings, Site, override, record_sites
from scanrewrite.runtime._compat import make_user_context
from scanrewrite.runtime._override import Call, resolve
from tests.test_runtime import pinned_layout
from tests.treecheck import assert_trees_close

HERE = os.path.realpath(__file__)
N = 12
TOL = dict(rtol=2e-5, atol=2e-5)


def counting_step():
    traces = []

    def step(h, x):
        traces.append(None)
        return jnp.tanh(h @ x + 0.5), h

    return step, traces


def line_of(marker: str) -> int:
    """The line in this file whose source ends with `# <marker>`."""
    with open(HERE) as file:
        for number, text in enumerate(file, 1):
            if text.rstrip().endswith(f"# {marker}") and "line_of" not in text:
                return number
    raise AssertionError(marker)


def two_sites(step):
    """A function with two rewritten calls: site A (unroll=1) then site B (unroll=2)."""

    def fn(h, xs):
        h, ys = scanrewrite.runtime.scan(step, h, xs, unroll=1)  # site A
        h, zs = scanrewrite.runtime.scan(step, h, xs + ys, unroll=2)  # site B
        return jnp.sum(h) + jnp.sum(zs)

    return fn


def inputs():
    """A 16x16 carry, so that each step's residuals (and what checkpointing saves) show in the
    compiled memory."""
    return jnp.ones((16, 16)) * 0.1, jnp.linspace(0.5, 1.5, N)[:, None, None] * jnp.eye(16) / 4


def site(marker: str) -> Site:
    return Site(HERE, line_of(marker))


def temp_bytes(fn, *args) -> int:
    """Compiled temp memory of the gradient, with the requested k (not fitted to the step)."""
    with pinned_layout("rolled"):
        return jax.jit(jax.grad(fn)).lower(*args).compile().memory_analysis().temp_size_in_bytes


def test_a_jitted_function_traced_before_is_traced_again_under_an_override():
    step, traces = counting_step()
    fn = jax.jit(two_sites(step))
    args = inputs()
    fn(*args)
    before = len(traces)
    fn(*args)
    assert len(traces) == before  # cached without an override
    with override(unroll=4):
        fn(*args)
        assert len(traces) > before  # not the old compilation
        during = len(traces)
        fn(*args)
        assert len(traces) == during  # cached under the same override
    fn(*args)
    # Where jax has no user context in its cache key, leaving an override clears jax's caches.
    assert len(traces) == (during if make_user_context is not None else during + before)
    with override(unroll=3):
        fn(*args)
    assert len(traces) > during


def test_an_override_changes_the_compiled_memory_at_the_named_site_only():
    step, _ = counting_step()
    fn = two_sites(step)
    args = inputs()
    plain = temp_bytes(fn, *args)
    with override(unroll=4):
        everywhere = temp_bytes(fn, *args)
    with override(unroll=4, sites=[site("site A")]):
        one = temp_bytes(fn, *args)
    with override(unroll=4, sites=[f"{os.path.relpath(HERE)}:{line_of('site B')}"]):
        other = temp_bytes(fn, *args)
    with override(unroll=4, sites=[Site(HERE, 1)]):
        nowhere = temp_bytes(fn, *args)
    with override(unroll=ORIGINAL):
        original = temp_bytes(fn, *args)
    assert nowhere == plain
    assert len({plain, everywhere, one, other}) == 4, (plain, everywhere, one, other)
    assert original > plain  # lax.scan keeps every step's residuals


@pytest.mark.parametrize(
    ("outer", "inner", "expected"),
    [
        pytest.param(dict(unroll=4), dict(unroll=2), {"A": (2, True), "B": (2, True)}, id="inner-wins"),
        pytest.param(
            dict(unroll=4), dict(unroll=3, sites=["A"]), {"A": (3, True), "B": (4, True)}, id="inner-named-site"
        ),
        pytest.param(
            dict(checkpoint=False), dict(unroll=3), {"A": (3, False), "B": (3, False)}, id="settings-combine"
        ),
        pytest.param(
            dict(unroll=ORIGINAL, sites=["B"]), dict(unroll=5, sites=["A"]), {"A": (5, True), "B": (ORIGINAL, True)},
            id="original-at-one-site",
        ),
    ],
)
def test_overrides_nest(outer, inner, expected):
    names = {"A": site("site A"), "B": site("site B")}
    name = lambda kw: {**kw, "sites": [names[s] for s in kw["sites"]]} if "sites" in kw else kw
    with override(**name(outer)), override(**name(inner)):
        for key, (unroll, checkpoint) in expected.items():
            resolved = resolve(names[key], Settings(unroll=1, checkpoint=True), api="scan")
            assert resolved == Settings(unroll=unroll, checkpoint=checkpoint)
    assert resolve(names["A"], Settings(unroll=1, checkpoint=True), api="scan") == Settings(unroll=1, checkpoint=True)


def test_eqxi_scan_calls_ignore_a_checkpoint_override():
    with override(checkpoint=False, unroll=3):
        assert resolve(site("site A"), Settings(unroll=1), api="scan") == Settings(unroll=3)


def test_record_sites_finds_the_calls_of_a_function_compiled_before():
    step, _ = counting_step()
    fn = jax.jit(two_sites(step))
    args = inputs()
    fn(*args)
    with record_sites() as found:
        fn(*args)
    assert found == {
        site("site A"): Call("scan", Settings(1, True, 1, 0)),
        site("site B"): Call("scan", Settings(2, True, 1, 0)),
    }
    assert list(found) == [site("site A"), site("site B")]
    with record_sites() as nothing:
        jax.jit(lambda x: x + 1)(1.0)
    assert nothing == {}


def test_a_call_is_recorded_as_the_api_its_runtime_function_names(monkeypatch: pytest.MonkeyPatch):
    """The name is an argument, not the caller's frame: a hook that wraps `resolve` and passes
    its settings on (as a benchmark's counter does) records the runtime function, not itself."""
    from scanrewrite.runtime import _override

    def hook(site, written, **kwargs):
        return resolve(site, written, **kwargs)

    monkeypatch.setattr(_override, "resolve", hook)
    with record_sites() as found:
        jax.make_jaxpr(two_sites(counting_step()[0]))(*inputs())
    assert [call.api for call in found.values()] == ["scan", "scan"]


@pytest.mark.parametrize("jit", [pytest.param(False, id="eager"), pytest.param(True, id="jit")])
def test_original_computes_what_lax_scan_computes(jit):
    step, _ = counting_step()
    fn = two_sites(step)
    args = inputs()

    def reference(h, xs):
        h, ys = jax.lax.scan(step, h, xs)
        h, zs = jax.lax.scan(step, h, xs + ys)
        return jnp.sum(h) + jnp.sum(zs)

    def wrong(h, xs):  # the second scan reversed: must be rejected
        h, ys = jax.lax.scan(step, h, xs)
        h, zs = jax.lax.scan(step, h, xs + ys, reverse=True)
        return jnp.sum(h) + jnp.sum(zs)

    grad = lambda f: jax.jit(jax.value_and_grad(f)) if jit else jax.value_and_grad(f)
    with override(unroll=ORIGINAL):
        got = grad(fn)(*args)
        jaxpr = str(jax.make_jaxpr(fn)(*args))
    assert "checkpoint" not in jaxpr and "remat" not in jaxpr and jaxpr.count("scan[") == 2
    assert assert_trees_close(got, grad(reference)(*args), **TOL) == 2
    with pytest.raises(AssertionError):
        assert_trees_close(got, grad(wrong)(*args), **TOL)


def test_original_for_eqxi_scan_is_equinox_scan():
    def step(h, x):
        return jnp.sin(h) + x, h

    def fn(h, xs):
        return scanrewrite.runtime.eqxi_scan(step, h, xs, kind="checkpointed", checkpoints="all", unroll=3)

    def reference(h, xs):
        return eqxi.scan(step, h, xs, kind="checkpointed", checkpoints="all")

    args = inputs()
    loss = lambda f: jax.jit(jax.grad(lambda h, xs: jnp.sum(f(h, xs)[1])))
    with override(unroll=ORIGINAL):
        jaxpr = str(jax.make_jaxpr(fn)(*args))
        got = loss(fn)(*args)
    with override(unroll=3):
        chunked = str(jax.make_jaxpr(fn)(*args))
    assert jaxpr != chunked
    # Older equinox prints the functions in its jaxpr with their addresses.
    addresses = lambda text: re.sub(r"0x[0-9a-f]+", "0x", text)
    assert addresses(jaxpr) == addresses(str(jax.make_jaxpr(reference)(*args)))
    assert assert_trees_close(got, loss(reference)(*args), **TOL) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({}, "needs `unroll`, `checkpoint` or `levels`", id="nothing"),
        pytest.param(dict(unroll=-1), "`unroll` must be", id="negative-unroll"),
        pytest.param(dict(unroll="4"), "`unroll` must be", id="str-unroll"),
        pytest.param(dict(checkpoint="dots"), "`checkpoint` must be", id="str-checkpoint"),
        pytest.param(dict(unroll=2, sites=["model.py"]), "'path:line'", id="site-without-line"),
        pytest.param(dict(unroll=2, sites=[("model.py", "3")]), "line must be an int", id="site-str-line"),
        pytest.param(dict(unroll=2, sites=[3]), "a site is", id="site-int"),
    ],
)
def test_bad_overrides_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        with override(**kwargs):
            pass


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param("a/b.py:12", Site(os.path.realpath("a/b.py"), 12), id="relative-str"),
        pytest.param(("/x/y.py", 3), Site(os.path.realpath("/x/y.py"), 3), id="pair"),
        pytest.param(Site("/x/y.py", 3), Site(os.path.realpath("/x/y.py"), 3), id="site"),
        pytest.param("C:/x.py:7", Site(os.path.realpath("C:/x.py"), 7), id="colon-in-path"),
    ],
)
def test_sites_are_absolute(given, expected):
    assert Site.parse(given) == expected
    assert str(expected) == f"{expected.path}:{expected.line}"


def test_a_single_site_may_be_given_without_a_list():
    with override(unroll=7, sites=str(site("site B"))):
        assert resolve(site("site B"), Settings(unroll=1), api="scan").unroll == 7
        assert resolve(site("site A"), Settings(unroll=1), api="scan").unroll == 1


def test_override_state_is_left_when_the_block_raises():
    with pytest.raises(KeyError):
        with override(unroll=5):
            raise KeyError
    assert resolve(site("site A"), Settings(unroll=1), api="scan") == Settings(unroll=1)
    assert sys.modules["scanrewrite.runtime._override"]._recorders == []


def test_without_make_user_context_an_override_clears_jax_caches_and_says_so(monkeypatch):
    """The path taken on a jax older than `jax.make_user_context` (0.4.31, the floor, and up to
    about 0.7 degrade so): still correct, by clearing jax's caches, with a warning."""
    module = sys.modules["scanrewrite.runtime._override"]
    monkeypatch.setattr(module, "_STATE", None)
    monkeypatch.setattr(module, "_warned", False)
    step, traces = counting_step()
    fn = jax.jit(two_sites(step))
    args = inputs()
    fn(*args)
    before = len(traces)
    with pytest.warns(RuntimeWarning, match="clear jax's caches"):
        with override(unroll=4, sites=[site("site A")]):
            assert resolve(site("site A"), Settings(unroll=1), api="scan") == Settings(unroll=4)
            fn(*args)
    assert len(traces) > before
    assert resolve(site("site A"), Settings(unroll=1), api="scan") == Settings(unroll=1)
    with record_sites() as found:
        fn(*args)
    assert list(found) == [site("site A"), site("site B")]


def test_a_levels_override_reaches_the_program():
    def fn(h, xs):
        return scanrewrite.runtime.scan(lambda c, x: (c + x, c), h, xs, unroll=1)

    args = (jnp.zeros(()), jnp.arange(16.0))
    plain = str(jax.make_jaxpr(fn)(*args))
    with override(levels=2):
        nested = str(jax.make_jaxpr(fn)(*args))
        got = jax.jit(fn)(*args)
    assert nested.count("scan[") > plain.count("scan[") >= 1
    assert assert_trees_close(got, jax.lax.scan(lambda c, x: (c + x, c), *args), **TOL) == 2


def test_a_scan_bound_with_partial_is_sited_at_the_user_line_that_applies_it():
    """Called by jax (`jax.jit(partial(...))`, `jax.vmap`), a runtime function's site is the
    line that applied it, not a frame inside jax; called later by name, the line of that call."""
    from functools import partial

    step, _ = counting_step()
    h, xs = inputs()

    def fn(h, xs):
        a = jax.jit(partial(scanrewrite.runtime.scan, step, unroll=2))(h, xs)[0]  # jitted partial
        run = partial(scanrewrite.runtime.scan, step, unroll=3)
        b = run(h, xs)[0]  # bound partial
        c = jax.vmap(partial(scanrewrite.runtime.scan, step, unroll=4), in_axes=(0, None))(h[None], xs)[0]  # vmapped
        return jnp.sum(a) + jnp.sum(b) + jnp.sum(c)

    for run in (fn, jax.jit(fn)):
        with record_sites() as found:
            run(h, xs)
        assert found == {
            site("jitted partial"): Call("scan", Settings(2, True, 1, 0)),
            site("bound partial"): Call("scan", Settings(3, True, 1, 0)),
            site("vmapped"): Call("scan", Settings(4, True, 1, 0)),
        }
    # An override by that site reaches the call; the original scan computes lax.scan's numbers.
    with override(unroll=ORIGINAL, sites=[site("jitted partial"), site("bound partial"), site("vmapped")]):
        named = str(jax.make_jaxpr(fn)(h, xs))
    with override(unroll=ORIGINAL):
        everywhere = str(jax.make_jaxpr(fn)(h, xs))
    assert named == everywhere != str(jax.make_jaxpr(fn)(h, xs))
    expected = 2 * jnp.sum(jax.lax.scan(step, h, xs)[0]) + jnp.sum(jax.lax.scan(step, h, xs)[0])
    assert_trees_close(fn(h, xs), expected, **TOL)


def test_a_partial_unroll_and_a_later_positional_one_do_not_collide():
    """`partial(scanrewrite.runtime.scan, step, unroll=4)`, as the rewrite writes a bound scan,
    called with `unroll` by position (the call's own wins, as in the call it replaced) or by
    keyword (wins too), computes what `jax.lax.scan` computes, jitted and not."""
    from functools import partial

    step, _ = counting_step()
    h, xs = inputs()
    bound = partial(scanrewrite.runtime.scan, step, unroll=4)

    def fn(h, xs):
        by_position = bound(h, xs, None, False, 2)
        by_keyword = bound(h, xs, unroll=3)
        as_bound = bound(h, xs)
        return by_position, by_keyword, as_bound

    with record_sites() as found:
        fn(h, xs)
    assert [call.settings.unroll for call in found.values()] == [2, 3, 4]
    expected = (partial(jax.lax.scan, step)(h, xs, None, False, 2),) * 3
    for run in (fn, jax.jit(fn)):
        assert assert_trees_close(run(h, xs), expected, **TOL) == 6
    # The position is read as `jax.lax.scan` reads it: `reverse` before `unroll`.
    with pytest.raises(AssertionError):
        assert_trees_close(bound(h, xs, None, True, 2), expected[0], **TOL)
