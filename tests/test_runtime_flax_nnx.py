"""`runtime.nnx_scan` against `flax.nnx.scan`: the same parameters, RNG streams, state,
outputs and gradients, leaf by leaf, for a tiny stack of layers (Linear, Dropout, BatchNorm,
a counter Variable and `sow`), eagerly and under `nnx.jit`, with `nnx.value_and_grad` and `nnx.grad`."""

import functools

import pytest

nnx = pytest.importorskip("flax.nnx", reason="flax is not installed (the `flax` extra)")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from flaxcheck import assert_flax_close, float64  # noqa: E402, F401 (float64 is autouse)

from scanrewrite import runtime  # noqa: E402
from tests.test_runtime import always_checkpointed, pinned_layout  # noqa: E402

W = 4


class Count(nnx.Variable):
    pass


class Block(nnx.Module):
    def __init__(self, rngs):
        self.lin = nnx.Linear(W, W, rngs=rngs, param_dtype=jnp.float64)
        self.norm = nnx.BatchNorm(W, rngs=rngs, param_dtype=jnp.float64)
        self.drop = nnx.Dropout(0.25, rngs=rngs)
        self.count = Count(jnp.zeros((), jnp.int32))

    def __call__(self, x):
        self.count.value += 1
        h = self.drop(self.norm(jnp.tanh(self.lin(x))))
        self.sow(nnx.Intermediate, "h", jnp.sum(h))
        return x + h


def stack(n, seed=0):
    @nnx.vmap(in_axes=0, out_axes=0)
    def make(key):
        return Block(nnx.Rngs(params=key, dropout=jax.random.fold_in(key, 1)))

    return make(jax.random.split(jax.random.key(seed), n))


def rewritten(k, **options):
    return lambda *a, **kw: runtime.nnx_scan(*a, unroll=k, **options, **kw)


def program(scan, *, n=7, remat=False, jit=False, grad="nnx", reverse=False, decorator=False, **kwargs):
    """(loss, gradients, the model's state after the step) of one training step."""
    blocks = stack(n)

    def body(x, block):
        return block(x)

    if remat:
        body = nnx.remat(body)
    axes = dict(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry, reverse=reverse, **kwargs)
    fwd = scan(**axes)(body) if decorator else scan(body, **axes)

    def loss(blocks, x):
        return jnp.sum(fwd(x, blocks) ** 2)

    x = jnp.linspace(-1.0, 1.0, 2 * W, dtype=jnp.float64).reshape(2, W)
    if grad == "nnx":
        step = nnx.value_and_grad(loss)
        if jit:
            step = nnx.jit(step)
        value, grads = step(blocks, x)
    else:  # nnx.grad, with the loss computed apart
        step = nnx.grad(loss)
        if jit:
            step = nnx.jit(step)
        grads = step(blocks, x)
        value = loss(blocks, x)
    return value, grads, nnx.state(blocks)


CASES = {
    "k3": dict(k=3),
    "k2-reverse": dict(k=2, reverse=True),
    "k7": dict(k=7),
    "k2-levels": dict(k=2, levels=2),
    "remat": dict(k=3, remat=True),
    "jit": dict(k=3, jit=True),
    "nnx.grad": dict(k=4, grad="grad", remat=True),
    "nnx.grad-jit": dict(k=2, grad="grad", jit=True),
    "decorator": dict(k=3, decorator=True),
    "length": dict(k=3, length=7),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.main_only(
    "in the matrix, every other case runs k3's plain step, nnx.grad-jit runs nnx.jit, and k = N is the"
    " runtime's own (test_runtime.py's lengths)",
    ids=["k3", "k7", "jit"],
)
def test_same_program(case):
    options = dict(CASES[case])
    k = options.pop("k")
    runtime_options = {"levels": options.pop("levels")} if "levels" in options else {}
    if options.get("decorator"):
        scan = lambda **kw: runtime.nnx_scan(unroll=k, **runtime_options, **kw)  # noqa: E731
        expected_scan = lambda **kw: nnx.scan(**kw)  # noqa: E731
    else:
        scan = rewritten(k, **runtime_options)
        expected_scan = nnx.scan
    expected = program(expected_scan, **options)
    with runtime.record_sites() as sites:
        actual = program(scan, **options)
    calls = [(call.api, call.settings.unroll) for call in sites.values()]
    assert calls == [("nnx_scan", k)], "the runtime's scan was not reached (as nnx_scan)"
    assert assert_flax_close(actual, expected) > 10


@pytest.mark.parametrize(
    "case", [dict(k=2, store=3, reverse=True), dict(k=3, store=7, remat=True), dict(k=2, store=2, jit=True)]
)
def test_same_program_with_stored_steps(case):
    options = dict(case)
    k, store = options.pop("k"), options.pop("store")
    expected = program(nnx.scan, **options)
    with runtime.record_sites() as sites:
        actual = program(rewritten(k, store=store), **options)
    assert [call.settings.store for call in sites.values()] == [store]
    assert assert_flax_close(actual, expected) > 10


def test_plain_blocks_keep_their_reductions_on_accelerators_and_remat_blocks_nothing():
    """On the accelerators' layout the default of `checkpoint=True` (the rewrite's) reaches
    Flax's scan: over plain blocks their BatchNorm's sums are kept; over `nnx.remat` blocks the
    user's remat keeps what it says, nothing. Either way the step is Flax's own."""
    from scanrewrite.runtime import _policies

    kept = {runtime.reductions_saveable, _policies.with_maxima(runtime.reductions_saveable)}
    for remat, expected_built in ((False, kept), (True, {True})):
        expected = program(nnx.scan, remat=remat, jit=True)
        with pinned_layout("accelerator"), runtime.record_sites() as sites:
            actual = program(rewritten(3), remat=remat, jit=True)
        assert assert_flax_close(actual, expected) > 10
        built = {plan.checkpoint for plans in sites.plans.values() for plan in plans}
        assert built and built <= expected_built, (remat, built)


def test_wrong_variant_rejected():
    expected = program(nnx.scan)
    wrong = program(rewritten(3), reverse=True)
    with pytest.raises(AssertionError):
        assert_flax_close(wrong, expected)


def test_same_init():
    # The parameters come from nnx.vmap, not the scan; a scan over a stack built inside it
    # (the init path) must leave them alone and give the same parameters for the same seed.
    def init(scan):
        blocks = stack(5, seed=3)
        body = lambda x, b: (b(x), None)  # noqa: E731
        scan(body, in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, 0))(jnp.ones((2, W), jnp.float64), blocks)
        return nnx.state(blocks)

    assert assert_flax_close(init(rewritten(2)), init(nnx.scan)) >= 10


def test_remat_absorbed():
    # Inside a checkpointed chunk a per-step nnx.remat would recompute every step twice: the
    # rewrite of a scan over nnx.remat(body) is the rewrite of a scan over body.
    def text(remat):
        blocks = stack(6)
        body = lambda x, b: b(x)  # noqa: E731
        fwd = runtime.nnx_scan(nnx.remat(body) if remat else body, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry, unroll=3)
        loss = lambda blocks, x: jnp.sum(fwd(x, blocks))  # noqa: E731
        graphdef, state = nnx.split(blocks)
        grad = lambda state, x: nnx.grad(loss)(nnx.merge(graphdef, state), x)  # noqa: E731
        return str(jax.make_jaxpr(grad)(state, jnp.ones((2, W), jnp.float64)))

    # The remat asks for recomputation: the chunks checkpoint however little it saves.
    assert "remat" in text(True) or "checkpoint" in text(True)
    with always_checkpointed():  # so that the chunks without it checkpoint too
        with_remat, without = text(True), text(False)
    assert with_remat.count("remat") + with_remat.count("checkpoint") == without.count("remat") + without.count("checkpoint")
    assert "remat" in without or "checkpoint" in without


def test_unrewritten_scan_unaffected():
    # The shadow is per call: Flax's own module still runs jax.lax.scan.
    runtime.nnx_scan(lambda x, b: b(x), in_axes=(nnx.Carry, 0), out_axes=nnx.Carry, unroll=2)
    with runtime.record_sites() as sites:
        program(nnx.scan)
    assert not sites


def test_eager_second_call_cached():
    blocks = stack(4)
    fwd = runtime.nnx_scan(lambda x, b: b(x), in_axes=(nnx.Carry, 0), out_axes=nnx.Carry, unroll=2)
    x = jnp.ones((2, W), jnp.float64)
    first = fwd(x, blocks)
    second = fwd(x, blocks)
    assert first.shape == second.shape == (2, W)


def test_partial_decorator():
    @functools.partial(runtime.nnx_scan, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry, unroll=2)
    def fwd(x, b):
        return b(x)

    @functools.partial(nnx.scan, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
    def ref(x, b):
        return b(x)

    x = jnp.ones((2, W), jnp.float64)
    assert_flax_close(fwd(x, stack(5)), ref(x, stack(5)))


def test_a_partial_unroll_never_collides():
    """`nnx.scan` takes only `f` by position, so its partial, as the rewrite writes it
    (`partial(runtime.nnx_scan, in_axes=..., unroll=4)`), meets no later positional unroll; a
    later `unroll=` wins over the partial's, as over the original's."""
    bound = functools.partial(runtime.nnx_scan, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry, unroll=4)
    with runtime.record_sites() as sites:
        fwd = bound(lambda x, b: b(x), unroll=3)
        x = jnp.ones((2, W), jnp.float64)
        actual = fwd(x, stack(5))
    assert [call.settings.unroll for call in sites.values()] == [3]
    expected = functools.partial(nnx.scan, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)(lambda x, b: b(x))(x, stack(5))
    assert assert_flax_close(actual, expected) >= 1
    for scan in (nnx.scan, runtime.nnx_scan):
        with pytest.raises(TypeError):
            scan(lambda x, b: b(x), 5)
