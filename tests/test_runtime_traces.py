"""`f` is traced exactly as often as by the scan the rewrite replaced, in every configuration.

Tracing Python is part of compile time, and a trace runs `f`'s Python side effects, so an extra
trace must not come back unseen. Programs are only traced (`jax.make_jaxpr`), never compiled.
"""

import itertools

import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import pytest

from scanrewrite.runtime import eqxi_scan, scan
from tests.test_runtime import pinned_layout
from tests.treecheck import assert_trees_close

N = 7
POLICY = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
# A Python int carry that `f` turns float (jax traces `f` again for the promoted carry), a
# Python float that `f` returns strongly typed, and a strongly typed array.
INITS = {"weak-int": lambda: 0, "weak-float": lambda: 0.5, "strong": lambda: jnp.float32(0.5)}


class Counted:
    """A step that counts its traces."""

    def __init__(self):
        self.traces = 0

    def __call__(self, carry, x):
        self.traces += 1
        carry = jnp.tanh(carry * x + 0.5)
        return carry, carry * 2


def traces(impl, init, transform, **kw) -> int:
    f, xs = Counted(), jnp.linspace(0.1, 1.0, N)
    run = lambda c, x: impl(f, c, x, **kw)[1].sum()
    program = {"plain": run, "grad": jax.grad(run, argnums=1), "vmap": jax.vmap(run, in_axes=(None, 1))}[transform]
    jax.make_jaxpr(program)(init, xs if transform != "vmap" else jnp.stack([xs, xs], 1))
    return f.traces


CASES = [
    *[dict(unroll=k) for k in (1, 3, N, N + 2, True)],
    dict(unroll=3, checkpoint=False),
    dict(unroll=3, checkpoint=POLICY),
    dict(unroll=2, levels=2),
    dict(unroll=3, reverse=True),
]


@pytest.mark.parametrize("layout", ["rolled", "unrolled"])
@pytest.mark.parametrize("init", list(INITS))
@pytest.mark.parametrize("kw", CASES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_scan_traces_f_as_often_as_lax_scan(kw, init, layout):
    expected = traces(jax.lax.scan, INITS[init](), "plain", reverse=kw.get("reverse", False))
    with pinned_layout(layout):
        for transform in ("grad", "vmap"):  # the gradient traces the forward pass too
            assert traces(scan, INITS[init](), transform, **kw) == expected, transform


@pytest.mark.parametrize("kind, unroll", itertools.product(["lax", "checkpointed"], [1, 3]))
def test_eqxi_scan_traces_f_once(kind, unroll):
    """Equinox traces its body more than once; the runtime's body replays `f`'s one trace."""
    assert traces(eqxi_scan, jnp.float32(0.5), "grad", kind=kind, unroll=unroll) == 1
    assert traces(eqxi.scan, jnp.float32(0.5), "grad", kind=kind) > 1 or kind == "lax"


@pytest.mark.parametrize("layout", ["rolled", "unrolled"])
def test_trace_time_values_are_shared_by_every_step(layout):
    """A value computed in Python while tracing (here a counter) is the same in every copy of
    the step, as in `jax.lax.scan`, which traces `f` once."""

    def make_step():
        calls = itertools.count()

        def step(carry, x):
            carry = carry * x + next(calls)
            return carry, carry

        return step

    xs = jnp.linspace(0.1, 1.0, N)
    expected = jax.lax.scan(make_step(), jnp.float32(1), xs)
    with pinned_layout(layout):
        actual = scan(make_step(), jnp.float32(1), xs, unroll=3)
    assert assert_trees_close(actual, expected, rtol=1e-6, atol=1e-6) == 2
