"""`scanrewrite.runtime.eqxi_scan` computes what `equinox.internal.scan` computes.

N = 5 and k = 2 throughout: two chunks and a remainder of one step, small enough that equinox's
checkpointed loop compiles quickly.
"""

import subprocess
import sys

import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import pytest

from scanrewrite.runtime import eqxi_scan
from tests.treecheck import assert_trees_close

N, K = 5, 2
TOL = dict(rtol=2e-5, atol=2e-5)


def step(carry, x):
    h, s = carry
    h = jnp.tanh(h * x + 0.1 * s)
    s = s * 0.9 + 0.1 * h[0]
    return (h, s), {"h": h, "none": None}


def make_inputs():
    init = (jnp.linspace(-1.0, 1.0, 3), jnp.float32(0.5))
    xs = jnp.linspace(-2.0, 2.0, N * 3).reshape(N, 3)
    return init, xs


def outputs_and_grads(scan_impl, f, init, xs, **kwargs):
    def loss(init, xs):
        return sum(jnp.sum(leaf) for leaf in jax.tree_util.tree_leaves(scan_impl(f, init, xs, **kwargs)))

    both = lambda init, xs: (scan_impl(f, init, xs, **kwargs), jax.grad(loss, argnums=(0, 1))(init, xs))
    return jax.jit(both)(init, xs)


@pytest.mark.parametrize(
    "kind, checkpoints",
    [("lax", None), ("checkpointed", None), ("checkpointed", 1), ("checkpointed", 3), ("checkpointed", "all")],
)
def test_matches_equinox(kind, checkpoints):
    init, xs = make_inputs()
    kwargs = dict(kind=kind, checkpoints=checkpoints)
    expected = outputs_and_grads(eqxi.scan, step, init, xs, **kwargs)
    actual = outputs_and_grads(eqxi_scan, step, init, xs, unroll=K, **kwargs)
    assert assert_trees_close(actual, expected, **TOL) == 6


def buffered_step(carry, x):
    """Writes each step's state into row `i` of a buffer that is part of the carry."""
    i, h, buf = carry
    h = jnp.tanh(h * x + 0.1)
    return (i + 1, h, buf.at[i].set(h * 2.0)), h[0]


@pytest.mark.parametrize("kind", ["lax", "checkpointed"])
def test_buffers(kind):
    init = (jnp.array(0), jnp.linspace(-1.0, 1.0, 3), jnp.zeros((N, 3)))
    _, xs = make_inputs()
    kwargs = dict(kind=kind, buffers=lambda carry: carry[2])

    def run(scan_impl, **kw):
        def loss(h, xs):
            (_, _, buf), ys = scan_impl(buffered_step, (init[0], h, init[2]), xs, **kwargs, **kw)
            return jnp.sum(buf**2) + jnp.sum(ys)

        out = scan_impl(buffered_step, init, xs, **kwargs, **kw)
        return out, jax.jit(jax.grad(loss, argnums=(0, 1)))(init[1], xs)

    actual, expected = run(eqxi_scan, unroll=K), run(eqxi.scan)
    assert assert_trees_close(actual, expected, **TOL) == 6
    assert jnp.all(actual[0][0][2] != 0)  # every row of the buffer was written


def test_empty_scan():
    init, _ = make_inputs()
    xs = jnp.zeros((0, 3))
    expected = eqxi.scan(step, init, xs, kind="lax")
    assert assert_trees_close(eqxi_scan(step, init, xs, kind="lax", unroll=K), expected, **TOL) == 3


@pytest.mark.parametrize("scan_impl", [eqxi.scan, eqxi_scan], ids=["equinox", "scanrewrite"])
def test_empty_checkpointed_scan_fails_as_in_equinox(scan_impl):
    init, _ = make_inputs()
    with pytest.raises(IndexError, match="size 0"):
        scan_impl(step, init, jnp.zeros((0, 3)), kind="checkpointed")


def test_jvp_of_lax_kind():
    init, xs = make_inputs()
    tangents = jax.tree_util.tree_map(jnp.ones_like, (init, xs))

    def pushed(scan_impl, **kw):
        return jax.jvp(lambda i, x: scan_impl(step, i, x, kind="lax", **kw), (init, xs), tangents)

    assert assert_trees_close(pushed(eqxi_scan, unroll=K), pushed(eqxi.scan), **TOL) == 6


@pytest.mark.parametrize("scan_impl", [eqxi.scan, eqxi_scan], ids=["equinox", "scanrewrite"])
def test_checkpointed_kind_has_no_forward_mode(scan_impl):
    """The limit equinox documents; the rewrite keeps it rather than hiding it."""
    init, xs = make_inputs()
    with pytest.raises(TypeError, match="forward-mode"):
        jax.jvp(lambda i: scan_impl(step, i, xs, kind="checkpointed"), (init,), (init,))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        pytest.param(dict(kind="lax", unroll=-3), "`unroll`.*-3", id="unroll"),
        pytest.param(dict(kind="checkpointd"), "`kind`.*'checkpointd'", id="kind"),
        pytest.param(dict(kind="checkpointed", checkpoints=2.5), "`checkpoints`.*2.5", id="checkpoints"),
        pytest.param(dict(kind="checkpointed", checkpoints=True), "`checkpoints`.*True", id="checkpoints-bool"),
        pytest.param(dict(kind="checkpointed", unroll=False, length=4), "`length=4`", id="length"),
    ],
)
def test_bad_input(kwargs, message):
    init, xs = make_inputs()
    with pytest.raises(ValueError, match=message):
        eqxi_scan(step, init, xs, **kwargs)


def test_runtime_imports_equinox_only_when_eqxi_scan_is_called():
    code = "import sys, scanrewrite.runtime; assert 'equinox' not in sys.modules, 'equinox imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
