"""On the rolled (CPU) layout the runtime builds the chunk size that keeps no more than k.

`_memory.step_bytes` reads a lower bound of a step's residuals off its jaxpr, and `_memory.fit`
picks 1, or a divisor of N below k, where its model says that keeps no more than k, and where k
leaves steps over, blocks of checkpointed steps that keep no more (no leftover loop). Checked
here: the bound on steps counted by hand, the choice on a table of sizes, XLA's compiled temp
memory of the fitted program against that of the requested k, and the numbers against
`jax.lax.scan`, under `jit` and eagerly, values and gradients.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrewrite.runtime import _memory, _staging, _trace, scan
from scanrewrite.runtime._compat import enable_x64
from scanrewrite.runtime._memory import Fit
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
        pytest.param(lambda h, x: (jnp.tanh(h + x), h), 4 * F32, id="tanh-keeps-a-value-of-its-size"),
        pytest.param(lambda h, x: (jnp.tanh(h) * h, h), 3 * 4 * F32, id="a-derivative-is-a-value-of-its-own"),
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
        pytest.param(lambda h, x: (3.0 / h, h), 4 * F32, id="quotient-by-the-carry-keeps-it"),
        pytest.param(
            lambda h, x: (h + jax.lax.stop_gradient(jnp.tanh(h)) * x, h),
            4 * F32,  # the stopped value, a factor of the product
            id="what-stop-gradient-cuts-off-keeps-nothing",
        ),
        pytest.param(lambda h, x: (jax.jit(jnp.tanh)(h), h), 4 * F32, id="inside-a-jit"),
        pytest.param(
            lambda h, x: (jax.jit(lambda a, c: jnp.tanh(a * c))(h, 2.0), h), 4 * F32, id="a-literal-into-a-jit"
        ),
        pytest.param(lambda h, x: (h + ckpt_tanh_tanh(h), h), 4 * F32, id="a-checkpoint-keeps-its-inputs"),
        pytest.param(lambda h, x: (jax.nn.relu(h), h), 0, id="custom-jvp-counts-nothing"),
    ],
)
def test_step_bytes_counts_the_residuals_that_vary(step, residuals):
    body = _trace.body(step, jnp.ones(4), jnp.ones((3, 4)))
    assert _memory.step_bytes(body) == _memory.StepBytes(4 * F32, residuals)


@pytest.mark.parametrize(
    "differentiate, h, residuals",
    [
        pytest.param(lambda loss: jax.grad(loss), jnp.ones(4), 4 * F32, id="grad"),
        pytest.param(lambda loss: jax.jit(jax.grad(loss)), jnp.ones(4), 4 * F32, id="jit-of-grad"),
        pytest.param(lambda loss: jax.vmap(jax.grad(loss), (None, 0)), jnp.ones((2, 4)), 4 * F32, id="vmap-of-grad"),
        pytest.param(lambda loss: jax.grad(loss, argnums=1), jnp.ones(4), 0, id="grad-of-the-carry-only"),
        # Inside `jax.jit`, a gradient taken around it cannot be seen: the bound stays the lower.
        pytest.param(lambda loss: jax.grad(jax.jit(loss)), jnp.ones(4), 0, id="grad-of-jit-not-seen"),
    ],
)
def test_a_differentiated_closed_over_value_makes_a_product_keep_the_carry(differentiate, h, residuals):
    """`w @ h` is linear in h for a constant `w`; where `w` is seen to be differentiated, its
    gradient needs every step's h."""
    seen = []

    def loss(w, h):
        seen.append(_memory.step_bytes(_trace.body(lambda h, x: (w @ h + x, h), h, jnp.ones((3, 4)))))
        return jnp.sum(h)

    differentiate(loss)(W, h)
    assert seen[0].residuals == residuals


def jax_residual_bytes(make_step, params, h, x, differentiate_params):
    """The bytes of the residuals of one step that vary from step to step, as `jax.vjp` of
    the step keeps them: the oracle that `step_bytes` must not exceed."""

    def residuals(params, h, x):
        if differentiate_params:
            return jax.vjp(lambda params, h, x: make_step(params)(h, x), params, h, x)[1]
        return jax.vjp(make_step(params), h, x)[1]

    jaxpr = jax.make_jaxpr(residuals)(params, h, x).jaxpr
    n_params, n_h = len(jax.tree_util.tree_leaves(params)), len(jax.tree_util.tree_leaves(h))
    varying = set(jaxpr.invars[n_params:])
    for eqn in jaxpr.eqns:
        if any(v in varying for v in eqn.invars if not hasattr(v, "val")):
            varying.update(eqn.outvars)
    slices = set(jaxpr.invars[n_params + n_h :])  # held by the loop already
    kept = {v for v in jaxpr.outvars if not hasattr(v, "val") and v in varying and v not in slices}
    return sum(v.aval.size * v.aval.dtype.itemsize for v in kept)


def layer_norm(h, scale):
    mean = h.mean(-1, keepdims=True)
    return (h - mean) * jax.lax.rsqrt(((h - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * scale


def block_step(p):
    """A transformer block of the origin workload: layer norms, softmax attention, a GELU MLP."""

    def step(h, x):
        a = layer_norm(h, p["s"])
        h = h + jax.nn.softmax((a @ p["q"]) @ (a @ p["k"]).T / 2.0, axis=-1) @ (a @ p["v"]) @ p["o"]
        return h + jax.nn.gelu(layer_norm(h, p["s"]) @ p["up"]) @ p["down"], None

    return step


BOUND_STEPS = {
    "block": block_step,
    "tanh": lambda p: lambda h, x: (jnp.tanh(h) * h, x),
    "logistic": lambda p: lambda h, x: (jax.nn.sigmoid(h) * h, x),
    "sqrt": lambda p: lambda h, x: (jnp.sqrt(h * h + 1) * h, x),
    "rsqrt": lambda p: lambda h, x: (jax.lax.rsqrt(h * h + 1) * h, x),
    "cube": lambda p: lambda h, x: (h**3 * h, x),
    "square": lambda p: lambda h, x: (h**2 * h, x),
    "sin": lambda p: lambda h, x: (jnp.sin(h) * h, x),
    "cos": lambda p: lambda h, x: (jnp.cos(h) * h, x),
    "exp": lambda p: lambda h, x: (jnp.exp(h) * p["s"], x),
    "log": lambda p: lambda h, x: (jnp.log(h * h + 1) * p["s"], x),
    "maximum": lambda p: lambda h, x: (jnp.maximum(h, x) * p["s"], x),
    "dot": lambda p: lambda h, x: (jnp.tanh(h @ p["q"]), x),
    "div": lambda p: lambda h, x: (h / p["s"] + 3.0 / h, x),
    "relu": lambda p: lambda h, x: (jax.nn.relu(h @ p["q"]), x),
    "stop-gradient": lambda p: lambda h, x: (h + jax.lax.stop_gradient(jnp.tanh(h)) * x * p["s"], x),
    "jit": lambda p: lambda h, x: (jax.jit(lambda h: jnp.sin(h) * h)(h) @ p["q"], x),
    "checkpoint": lambda p: lambda h, x: (jax.checkpoint(lambda h: jnp.tanh(jnp.tanh(h)))(h) * p["s"], x),
}


@pytest.mark.parametrize("differentiate_params", [False, True], ids=["constant-params", "differentiated-params"])
@pytest.mark.parametrize("name", BOUND_STEPS)
@pytest.mark.matrix_every_point  # each release's derivative rules, with and without the parameters
def test_step_bytes_is_at_most_what_jax_keeps(name, differentiate_params):
    """The count is a lower bound of what jax's own derivative rules keep, on every release
    the matrix runs; the tables' claims about those rules are checked here."""
    rng = np.random.default_rng(0)
    draw = lambda *shape: jnp.asarray(rng.normal(size=shape), jnp.float32)
    params = {"s": draw(8), "q": draw(8, 8), "k": draw(8, 8), "v": draw(8, 8), "o": draw(8, 8)}
    params |= {"up": draw(8, 32), "down": draw(32, 8)}
    h, x = draw(4, 8), draw(4, 8)
    seen = []

    def loss(params, h):
        seen.append(_memory.step_bytes(_trace.body(BOUND_STEPS[name](params), h, x[None])))
        return jnp.sum(h)

    jax.grad(loss, argnums=(0, 1) if differentiate_params else 1)(params, h)
    expected = jax_residual_bytes(BOUND_STEPS[name], params, h, x, differentiate_params)
    assert seen[0].residuals <= expected, (seen[0], expected)
    assert seen[0].residuals > 0 or name == "relu"  # a `custom_jvp` counts as nothing


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
    assert _memory.rolled_chunk_size(body, 13, 4, 1) == Fit(4)


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
        (7, 7, 1, 1, 10, 1),  # one chunk of all 7 steps (no loop) keeps 7 steps' residuals
        (7, 7, 1, 10, 1, 7),  # ... which is less where the carry dominates
        (1024, 4, 2, 1, 1000, 4),  # nested levels are left as they are
        (1024, 4, "auto", 1, 1000, 4),  # ... also where "auto" would nest one step per chunk
        (64, 4, "auto", 1, 1000, 1),  # ... and fitted where "auto" keeps one level
        # k leaves steps over and no divisor below k fits: blocks of checkpointed steps (the
        # least kept, 5 + 10 carries, and of two that keep as much, the longer block)...
        (50, 3, 1, 288, 1840, Fit(10, checkpoint_steps=True)),
        (49, 3, 1, 1, 9, Fit(7, checkpoint_steps=True)),
        (50, 3, 1, 288, 2016, 2),  # ... unless a divisor below k fits (a tie: 25 + 2 * 7 = 18 + 3 * 7)
        (50, 7, 1, 100, 1, 7),  # ... and only where they keep no more than k
    ],
)
def test_fit(n, k, levels, carry, residuals, chosen):
    sizes = _memory.StepBytes(carry, residuals)
    chosen = chosen if isinstance(chosen, Fit) else Fit(chosen)
    assert _memory.fit(n, k, levels, sizes) == chosen
    if chosen.checkpoint_steps:
        assert _memory.kept_in_blocks(n, chosen.size, sizes) <= _memory.kept(n, k, sizes)
    else:
        assert _memory.kept(n, chosen.size, sizes) <= _memory.kept(n, k, sizes)


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


# (step, N, k, the chunks the runtime builds: a size, or a `Fit`)
CASES = [
    pytest.param(mlp_step, 13, 4, 1, id="mlp-13-4-builds-1"),
    pytest.param(mlp_step, 8, 3, 1, id="mlp-8-3-builds-1"),
    # With the parameters differentiated too, the products keep twice as much: it builds 1.
    pytest.param(mlp_step, 64, 4, 2, id="mlp-64-4-builds-2"),
    pytest.param(mlp_step, 8, 8, 1, id="mlp-8-8-builds-1"),
    pytest.param(wide_step, 13, 4, 4, id="wide-13-4-keeps-4"),
    pytest.param(wide_step, 12, 5, 4, id="wide-12-5-builds-4"),
    pytest.param(wide_step, 8, 3, 2, id="wide-8-3-builds-2"),
    # 3 leaves a step over and 1 keeps more (49 carries): blocks of 7 checkpointed steps.
    pytest.param(mlp_step, 49, 3, Fit(7, checkpoint_steps=True), id="mlp-49-3-builds-blocks-of-7"),
]
# CI's matrix parts compile one case per layout the fit builds (the fit's choice of every case
# still runs there, in test_the_fitted_chunk_is_the_one_built).
FIT_DUPLICATES = pytest.mark.main_only(
    "mlp-13-4-builds-1 fits to 1; mlp-64-4-builds-2 and wide-12-5-builds-4 to a divisor",
    ids=["mlp-8-3-builds-1", "mlp-8-8-builds-1", "wide-8-3-builds-2"],
)


def as_fit(chosen):
    return chosen if isinstance(chosen, Fit) else Fit(chosen)


def checkpointed_inside(jaxpr) -> bool:
    """Whether the innermost scan (following the first scan at each depth) checkpoints its step."""
    body, names = None, {"scan", *_trace.CHECKPOINT_PRIMITIVES}
    while scans := [eqn for eqn in jaxpr.eqns if eqn.primitive.name in names]:
        if scans[0].primitive.name == "scan":
            body = scans[0].params["jaxpr"]
        jaxpr = scans[0].params["jaxpr"]
        jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    body = getattr(body, "jaxpr", body)
    return any(eqn.primitive.name in _trace.CHECKPOINT_PRIMITIVES for eqn in body.eqns)


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
    chosen = as_fit(chosen)
    assert _memory.rolled_chunk_size(body, n, k, 1) == chosen
    with pinned_layout("fitted"):
        jaxpr = jax.make_jaxpr(lambda h, xs: scan(make_step(params), h, xs, unroll=k))(h, xs)
    size = chosen.size
    assert scan_lengths(jaxpr.jaxpr) == ([n] if size == 1 else [n // size, size])
    assert checkpointed_inside(jaxpr.jaxpr) == (size == 1 or chosen.checkpoint_steps)


def test_where_the_parameters_are_differentiated_the_fit_counts_their_products():
    """Differentiated, the parameters make mlp_step's products keep twice as much: at N = 64,
    k = 4 the runtime then builds one step per chunk, where it builds chunks of 2 otherwise."""
    args = make_case(mlp_step, 64)
    built = {}
    for argnums in (0, 1):
        grad = jax.grad(loss_of(scan, mlp_step, unroll=4), argnums=argnums)
        with pinned_layout("fitted"):
            built[argnums] = scan_lengths(jax.make_jaxpr(grad)(*args).jaxpr)[0]
    assert built == {0: 64, 1: 32}


def test_a_scan_called_on_arrays_builds_one_step_per_chunk():
    """Called on arrays, with a step that closes over no tracer, nothing can differentiate the
    scan: it keeps nothing, and builds what compiles as `jax.lax.scan`, whatever k and the step.
    Under `jax.grad` the same call is fitted (here: k, as the carry dominates)."""
    params, h, xs = make_case(wide_step, 13)
    step = wide_step(params)
    with pinned_layout("fitted"):
        # A step of code staged before for another step runs unstaged once (`_staging._made_anew`).
        scan(step, h, xs, unroll=4)
        actual = scan(step, h, xs, unroll=4)
        (staged,) = _staging._cache[step].values()
        assert scan_lengths(jax.make_jaxpr(staged)(h, xs).jaxpr) == [13]
        in_grad = jax.make_jaxpr(jax.grad(lambda h: scan(step, h, xs, unroll=4)[0].sum()))(h)
    assert scan_lengths(in_grad.jaxpr)[0] == 3
    expected = jax.lax.scan(step, h, xs)
    assert assert_trees_close(actual, expected, **TOL["float32"]) == 2


# With respect to the parameters too, every loop around the step adds an accumulator of their
# gradient, which the model leaves out: fewer loops then keep even less than it says.
@pytest.mark.parametrize("argnums", [(0, 1, 2), (1, 2)], ids=["params-too", "carry-and-xs"])
@pytest.mark.parametrize("make_step, n, k, chosen", CASES)
@FIT_DUPLICATES
def test_the_fitted_chunk_keeps_no_more_memory_than_k(make_step, n, k, chosen, argnums):
    """XLA's compiled temp memory of the gradient, fitted against the requested k."""
    args = make_case(make_step, n)
    temp = {}
    for layout in ("fitted", "rolled"):
        grad = jax.grad(loss_of(scan, make_step, unroll=k), argnums=argnums)  # new to jit's cache
        with pinned_layout(layout):
            temp[layout] = jax.jit(grad).lower(*args).compile().memory_analysis().temp_size_in_bytes
    assert temp["fitted"] <= temp["rolled"], temp
    if as_fit(chosen) != Fit(k):
        assert temp["fitted"] < temp["rolled"], temp


@pytest.mark.parametrize("layout", ["rolled", "unrolled"])
def test_one_step_per_chunk_keeps_what_lax_scan_of_checkpoint_keeps(layout):
    """k = 1 (asked for, or fitted) is `jax.lax.scan(jax.checkpoint(f))`: no axis of one
    around the slices, which made XLA keep a copy of their cotangent (5.8x the memory here)."""
    args = make_case(mlp_step, 64)
    checkpointed = lambda f, h, xs: jax.lax.scan(jax.checkpoint(f), h, xs)
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
@FIT_DUPLICATES
def test_the_fitted_chunk_computes_what_lax_scan_computes(make_step, n, k, chosen, jit):
    with enable_x64(True), pinned_layout("fitted"):
        args = make_case(make_step, n, jnp.float64)
        results = []
        for loss in (loss_of(scan, make_step, unroll=k), loss_of(jax.lax.scan, make_step)):
            value_and_grad = jax.value_and_grad(loss, argnums=(0, 1, 2))
            results.append((jax.jit(value_and_grad) if jit else value_and_grad)(*args))
    actual, expected = results
    assert assert_trees_close(actual, expected, **TOL["float64"]) == len(jax.tree_util.tree_leaves(expected)) == 5


def ekf_step(w, obs):
    """The extended Kalman filter step of `benchmarks/eager_overhead.py` (a `jax.jacfwd`, a
    `jnp.linalg.solve`): its residuals count about 5 to 7 carries, by jax release."""

    def dynamics(m):
        return jnp.tanh(w @ m) + 0.5 * m

    def step(carry, y):
        m, cov = carry
        jac = jax.jacfwd(dynamics)(m)
        m, cov = dynamics(m), jac @ cov @ jac.T + 0.01 * jnp.eye(8)
        s = obs @ cov @ obs.T + 0.1 * jnp.eye(4)
        gain = jnp.linalg.solve(s, obs @ cov).T
        return (m + gain @ (y - obs @ m), cov - gain @ s @ gain.T), m

    return step


def test_a_step_whose_k_leaves_steps_over_builds_no_leftover_loop():
    """The EKF step at N = 50, k = 3 (16 chunks and 2 steps over) keeps more with one step per
    chunk, and chunks of 2 keep about as much as chunks of 3 (which way the lower bound tips
    differs between jax releases): it builds chunks or blocks that divide 50, keeping no more
    memory than chunks of 3, and computes what `jax.lax.scan` computes."""
    rng = np.random.default_rng(0)
    w, obs = (jnp.asarray(rng.normal(size=shape) / np.sqrt(shape[-1]), jnp.float32) for shape in ((8, 8), (4, 8)))
    m0, ys = jnp.zeros(8, jnp.float32), jnp.asarray(rng.normal(size=(50, 4)), jnp.float32)

    def loss_with(scan_impl):
        return lambda m0, ys: jnp.sum(scan_impl(ekf_step(w, obs), (m0, jnp.eye(8)), ys)[1] ** 2)

    runtime = loss_with(lambda f, init, xs: scan(f, init, xs, unroll=3))
    with pinned_layout("fitted"):
        lengths = scan_lengths(jax.make_jaxpr(runtime)(m0, ys).jaxpr)
    assert len(lengths) == 2 and lengths[0] * lengths[1] == 50, lengths
    temp = {}
    for layout in ("fitted", "rolled"):
        grad = jax.grad(loss_with(lambda f, init, xs: scan(f, init, xs, unroll=3)))  # new to jit's cache
        with pinned_layout(layout):
            temp[layout] = jax.jit(grad).lower(m0, ys).compile().memory_analysis().temp_size_in_bytes
    assert temp["fitted"] <= temp["rolled"], temp
    # The reference is the Python loop run op by op: XLA:CPU of jax 0.4.38 fails to compile
    # `jax.lax.scan`'s gradient of this step under `jit` (a DotThunk layout error).
    expected = jax.value_and_grad(loss_with(python_loop), argnums=(0, 1))(m0, ys)
    with pinned_layout("fitted"):
        for wrap in (jax.jit, lambda fn: fn):
            actual = wrap(jax.value_and_grad(runtime, argnums=(0, 1)))(m0, ys)
            assert assert_trees_close(actual, expected, **TOL["float32"]) == 3


def python_loop(f, carry, xs):
    ys = []
    for x in xs:
        carry, y = f(carry, x)
        ys.append(y)
    return carry, jnp.stack(ys)
