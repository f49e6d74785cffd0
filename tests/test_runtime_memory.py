"""On the rolled (CPU) layout the runtime builds the chunk size that keeps no more than k.

`_memory.step_bytes` reads a lower bound of a step's residuals off its jaxpr, and `_memory.fit`
picks 1, or a divisor of N below k, where its model says that keeps no more than k. Checked
here: the bound on steps counted by hand, the choice on a table of sizes, XLA's compiled temp
memory of the fitted program against that of the requested k, and the numbers against
`jax.lax.scan`, under `jit` and eagerly, values and gradients.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrewrite.runtime import _memory, _trace, scan
from scanrewrite.runtime._compat import enable_x64
from tests.test_runtime import TOL, pinned_layout
from tests.test_runtime_levels import scan_lengths
from tests.treecheck import assert_trees_close

F32 = 4  # bytes
W = jnp.ones((4, 4))


def tanh_tanh(h):
    return jnp.tanh(jnp.tanh(h))


ckpt_tanh_tanh = jax.checkpoint(tanh_tanh)


@pytest.mark.parametrize(
    "step, residuals",
    [
        pytest.param(lambda h, x: (jnp.tanh(h + x), h), 4 * F32, id="tanh-keeps-its-output"),
        pytest.param(lambda h, x: (jnp.log(h) + x, h), 4 * F32, id="log-keeps-its-input"),
        pytest.param(lambda h, x: (0.5 * h + x, h), 0, id="linear-keeps-nothing"),
        pytest.param(lambda h, x: (W @ h + x, h), 0, id="product-with-a-constant-is-linear"),
        pytest.param(lambda h, x: (h * x, h), 4 * F32, id="product-keeps-the-carry-not-the-slice"),
        pytest.param(lambda h, x: (h * h, h), 4 * F32, id="a-value-counts-once"),
        pytest.param(lambda h, x: (h + jnp.exp(x), h), 4 * F32, id="computed-from-the-slice-varies"),
        pytest.param(lambda h, x: (h + jnp.sum(jnp.exp(W)), h), 0, id="computed-from-constants-is-kept-once"),
        pytest.param(lambda h, x: (x / h, h), 4 * F32, id="quotient-keeps-its-divisor"),
        pytest.param(lambda h, x: (h / 3.0, h), 0, id="quotient-by-a-constant-is-linear"),
        pytest.param(lambda h, x: (h / x, h), 4 * F32, id="quotient-keeps-both-where-both-vary"),
        pytest.param(lambda h, x: (jax.jit(jnp.tanh)(h), h), 4 * F32, id="inside-a-jit"),
        pytest.param(lambda h, x: (h + ckpt_tanh_tanh(h), h), 4 * F32, id="a-checkpoint-keeps-its-inputs"),
        pytest.param(lambda h, x: (jax.nn.relu(h), h), 0, id="custom-jvp-counts-nothing"),
    ],
)
def test_step_bytes_counts_the_residuals_that_vary(step, residuals):
    body = _trace.body(step, jnp.ones(4), jnp.ones((3, 4)))
    assert _memory.step_bytes(body) == _memory.StepBytes(4 * F32, residuals)


def test_a_per_step_checkpoint_taken_over_counts_what_is_inside_it():
    """Taken over, the steps of a chunk replay what is inside the checkpoint, and keep its
    residuals; left on, the checkpoint keeps only its inputs."""
    step = jax.checkpoint(lambda h, x: (tanh_tanh(h * x), h))
    absorbed = _trace.body(step, jnp.ones(4), jnp.ones((3, 4)), absorb=True)
    assert absorbed.checkpoint is True
    # The product keeps the carry and the slice, which the loop holds already: h and two tanh.
    assert _memory.step_bytes(absorbed) == _memory.StepBytes(4 * F32, 3 * 4 * F32)
    kept = _trace.body(step, jnp.ones(4), jnp.ones((3, 4)))
    assert _memory.step_bytes(kept) == _memory.StepBytes(4 * F32, 4 * F32)


def test_a_step_without_a_jaxpr_keeps_k():
    body = _trace.body(lambda h, x: (h, x), jnp.ones(4), jnp.ones((3, 4)), replay=False)
    assert _memory.step_bytes(body) is None
    assert _memory.rolled_chunk_size(body, 13, 4, 1) == 4


@pytest.mark.parametrize(
    "n, k, levels, carry, residuals, chosen",
    [
        (13, 4, 1, 1, 10, 1),  # residuals dominate: one step per chunk
        (13, 4, 1, 100, 1, 4),  # carries dominate, and 13 has no divisor below 4 but 1
        (12, 5, 1, 100, 1, 4),  # a divisor keeps less and leaves no steps over
        (12, 5, 1, 100, 150, 3),  # of the divisors that fit, the one that keeps least
        (8, 3, 1, 16, 8, 2),
        (64, 3, 1, 1, 15, 2),
        (64, 3, 1, 1, 25, 1),
        (64, 2, 1, 1, 31, 2),  # kept(1) = 95 > kept(2) = 94
        (64, 2, 1, 1, 32, 1),  # a tie builds 1
        (1024, 4, 2, 1, 1000, 4),  # nested levels are left as they are
        (1024, 4, "auto", 1, 1000, 4),  # ... also where "auto" would nest one step per chunk
        (64, 4, "auto", 1, 1000, 1),  # ... and fitted where "auto" keeps one level
    ],
)
def test_fit(n, k, levels, carry, residuals, chosen):
    sizes = _memory.StepBytes(carry, residuals)
    assert _memory.fit(n, k, levels, sizes) == chosen
    assert _memory.kept(n, chosen, sizes) <= _memory.kept(n, k, sizes)


def mlp_step(params):
    """Residuals (two tanh outputs, 72 floats) dominate the carry (8 floats)."""

    def step(h, x):
        hidden = jnp.tanh(params["w1"] @ h + x)
        return jnp.tanh(params["w2"] @ hidden + h), jnp.sum(hidden)

    return step


def wide_step(params):
    """The carry (256 floats) dominates the residuals (8 floats)."""

    def step(h, x):
        head = jnp.tanh(params["w1"][:8, :8] @ h[:8] + x[:8])
        return h.at[:8].set(head) * 0.5, jnp.sum(head)

    return step


# (step, N, k, the chunk size the runtime builds)
CASES = [
    pytest.param(mlp_step, 13, 4, 1, id="mlp-13-4-builds-1"),
    pytest.param(mlp_step, 8, 3, 1, id="mlp-8-3-builds-1"),
    pytest.param(wide_step, 13, 4, 4, id="wide-13-4-keeps-4"),
    pytest.param(wide_step, 12, 5, 4, id="wide-12-5-builds-4"),
    pytest.param(wide_step, 8, 3, 2, id="wide-8-3-builds-2"),
]


def make_case(make_step, n, dtype=jnp.float32):
    rng = np.random.default_rng(0)
    draw = lambda *shape: jnp.asarray(rng.normal(size=shape) / np.sqrt(shape[-1]), dtype)
    width = 8 if make_step is mlp_step else 256
    params = {"w1": draw(64, width), "w2": draw(width, 64)}
    return params, draw(width), draw(n, 64 if make_step is mlp_step else width)


def loss_of(scan_impl, make_step, **kwargs):
    def loss(params, h, xs):
        h, ys = scan_impl(make_step(params), h, xs, **kwargs)
        return jnp.sum(h**2) + jnp.sum(jnp.sin(ys))

    return loss


@pytest.mark.parametrize("make_step, n, k, chosen", CASES)
def test_the_fitted_chunk_is_the_one_built(make_step, n, k, chosen):
    params, h, xs = make_case(make_step, n)
    body = _trace.body(make_step(params), h, xs)
    assert _memory.rolled_chunk_size(body, n, k, 1) == chosen
    with pinned_layout("fitted"):
        jaxpr = jax.make_jaxpr(lambda h, xs: scan(make_step(params), h, xs, unroll=k))(h, xs)
    assert scan_lengths(jaxpr.jaxpr) == ([n] if chosen == 1 else [n // chosen, chosen])


# With respect to the parameters too, every loop around the step adds an accumulator of their
# gradient, which the model leaves out: fewer loops then keep even less than it says.
@pytest.mark.parametrize("argnums", [(0, 1, 2), (1, 2)], ids=["params-too", "carry-and-xs"])
@pytest.mark.parametrize("make_step, n, k, chosen", CASES)
def test_the_fitted_chunk_keeps_no_more_memory_than_k(make_step, n, k, chosen, argnums):
    """XLA's compiled temp memory of the gradient, fitted against the requested k."""
    args = make_case(make_step, n)
    temp = {}
    for layout in ("fitted", "rolled"):
        grad = jax.grad(loss_of(scan, make_step, unroll=k), argnums=argnums)  # new to jit's cache
        with pinned_layout(layout):
            temp[layout] = jax.jit(grad).lower(*args).compile().memory_analysis().temp_size_in_bytes
    assert temp["fitted"] <= temp["rolled"], temp
    if chosen != k:
        assert temp["fitted"] < temp["rolled"], temp


@pytest.mark.parametrize("layout", ["rolled", "unrolled"])
def test_one_step_per_chunk_keeps_what_lax_scan_of_checkpoint_keeps(layout):
    """k = 1 (asked for, or fitted) is `jax.lax.scan(jax.checkpoint(f))`: no axis of one
    around the slices, which made XLA keep a copy of their cotangent (5.8x the memory here)."""
    args = make_case(mlp_step, 64)
    checkpointed = lambda f, h, xs: jax.lax.scan(jax.checkpoint(f, prevent_cse=False), h, xs)
    temp = {}
    for name, loss in [("runtime", loss_of(scan, mlp_step, unroll=1)), ("lax", loss_of(checkpointed, mlp_step))]:
        with pinned_layout(layout):
            compiled = jax.jit(jax.grad(loss, argnums=(1, 2))).lower(*args).compile()
        temp[name] = compiled.memory_analysis().temp_size_in_bytes
    assert temp["runtime"] <= temp["lax"], temp


def test_a_wrong_fit_would_keep_more_memory():
    """Where the carry dominates, one step per chunk keeps more than k = 4, as the model says
    (64 carries against 16): the memory test above can tell a wrong choice. (At N = 13 the
    difference is small enough that XLA's buffer assignment decides it, and releases differ.)"""
    args = make_case(wide_step, 64)
    temp = {}
    for k in (1, 4):
        grad = jax.grad(loss_of(scan, wide_step, unroll=k), argnums=(1, 2))
        with pinned_layout("rolled"):
            temp[k] = jax.jit(grad).lower(*args).compile().memory_analysis().temp_size_in_bytes
    assert temp[1] > temp[4], temp


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("make_step, n, k, chosen", CASES)
def test_the_fitted_chunk_computes_what_lax_scan_computes(make_step, n, k, chosen, jit):
    with enable_x64(True), pinned_layout("fitted"):
        args = make_case(make_step, n, jnp.float64)
        results = []
        for loss in (loss_of(scan, make_step, unroll=k), loss_of(jax.lax.scan, make_step)):
            value_and_grad = jax.value_and_grad(loss, argnums=(0, 1, 2))
            results.append((jax.jit(value_and_grad) if jit else value_and_grad)(*args))
    actual, expected = results
    assert assert_trees_close(actual, expected, **TOL["float64"]) == len(jax.tree_util.tree_leaves(expected)) == 5
