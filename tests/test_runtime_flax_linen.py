"""`runtime.linen_scan` against `flax.linen.scan`: `init` with the same seed gives the same
parameters, and `apply` the same outputs, BatchNorm statistics, `sow` intermediates and
gradients, with Dropout streams split per layer, over `nn.remat(Block)` and `nn.checkpoint`."""

import pytest

nn = pytest.importorskip("flax.linen", reason="flax is not installed (the `flax` extra)")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from flaxcheck import assert_flax_close, float64  # noqa: E402, F401 (float64 is autouse)

from scanrewrite import runtime  # noqa: E402
W = 4


class Block(nn.Module):
    train: bool = True

    @nn.compact
    def __call__(self, x, _):
        h = jnp.tanh(nn.Dense(W, param_dtype=jnp.float64)(x))
        h = nn.BatchNorm(use_running_average=not self.train, param_dtype=jnp.float64)(h)
        h = nn.Dropout(0.25, deterministic=not self.train)(h)
        self.sow("intermediates", "h", jnp.sum(h))
        return x + h, None


def model(scan, wrap=None, n=7, **options):
    block = Block if wrap is None else wrap(Block)
    return scan(
        block,
        variable_axes={"params": 0, "batch_stats": 0, "intermediates": 0},
        split_rngs={"params": True, "dropout": True},
        in_axes=nn.broadcast,
        length=n,
        **options,
    )()


def rewritten(k, **runtime_options):
    return lambda *a, **kw: runtime.linen_scan(*a, unroll=k, **runtime_options, **kw)


def program(scan, *, jit=False, **options):
    """(the variables `init` makes, and loss, gradients, updated state of one step)."""
    m = model(scan, **options)
    x = jnp.linspace(-1.0, 1.0, 2 * W, dtype=jnp.float64).reshape(2, W)
    variables = m.init({"params": jax.random.key(0), "dropout": jax.random.key(1)}, x, None)

    def loss(params, x):
        (out, _), state = m.apply(
            {**variables, "params": params}, x, None, rngs={"dropout": jax.random.key(2)},
            mutable=["batch_stats", "intermediates"],
        )  # fmt: skip
        return jnp.sum(out**2), state

    step = jax.value_and_grad(loss, has_aux=True)
    step = jax.jit(step) if jit else step
    return variables, step(variables["params"], x)


CASES = {
    "k3": dict(k=3),
    "k2-reverse": dict(k=2, reverse=True),
    "k7-jit": dict(k=7, jit=True),
    "k2-levels": dict(k=2, levels=2),
    "remat": dict(k=3, wrap=nn.remat),
    "checkpoint-policy": dict(k=4, wrap=lambda b: nn.checkpoint(b, policy=jax.checkpoint_policies.nothing_saveable)),
    "remat-jit": dict(k=2, wrap=nn.remat, jit=True),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.main_only(
    "in the matrix, every other case runs k3's plain step, remat-jit runs jax.jit, and k = N is the"
    " runtime's own (test_runtime.py's lengths)",
    ids=["k3", "k7-jit"],
)
def test_same_program(case):
    options = dict(CASES[case])
    k = options.pop("k")
    runtime_options = {"levels": options.pop("levels")} if "levels" in options else {}
    expected = program(nn.scan, **options)
    with runtime.record_sites() as sites:
        actual = program(rewritten(k, **runtime_options), **options)
    calls = [(call.api, call.settings.unroll) for call in sites.values()]
    assert calls == [("linen_scan", k)], "the runtime's scan was not reached (as linen_scan)"
    assert assert_flax_close(actual, expected) > 10


@pytest.mark.parametrize("case", [dict(k=2, store=3, reverse=True), dict(k=3, store=7, wrap=nn.remat)])
def test_same_program_with_stored_steps(case):
    options = dict(case)
    k, store = options.pop("k"), options.pop("store")
    expected = program(nn.scan, **options)
    with runtime.record_sites() as sites:
        actual = program(rewritten(k, store=store), **options)
    assert [call.settings.store for call in sites.values()] == [store]
    assert assert_flax_close(actual, expected) > 10


def test_wrong_variant_rejected():
    expected = program(nn.scan)
    wrong = program(rewritten(3), reverse=True)
    with pytest.raises(AssertionError):
        assert_flax_close(wrong, expected)


def test_positional_arguments():
    # flax.linen.scan's parameters in order: target, variable_axes, variable_broadcast,
    # variable_carry, split_rngs, in_axes, out_axes, length.
    args = (Block, {"params": 0, "batch_stats": 0, "intermediates": 0}, False, False, {"params": True, "dropout": True})
    args += (nn.broadcast, 0, 5)
    x = jnp.ones((2, W), jnp.float64)
    rngs = {"params": jax.random.key(0), "dropout": jax.random.key(1)}
    expected = nn.scan(*args)().init(rngs, x, None)
    actual = runtime.linen_scan(*args, unroll=2)().init(rngs, x, None)
    assert assert_flax_close(actual, expected) > 5


def test_a_partial_unroll_and_a_later_positional_one_do_not_collide():
    """`partial(runtime.linen_scan, unroll=4)`, as the rewrite writes a bound `nn.scan`, called
    with every argument up to `unroll` by position: the call's own unroll, 2, is used."""
    import functools

    # flax.linen.scan's parameters in order, up to unroll (`reverse`, then `unroll`).
    args = (Block, {"params": 0, "batch_stats": 0, "intermediates": 0}, False, False, {"params": True, "dropout": True})
    args += (nn.broadcast, 0, 5, False)
    x = jnp.ones((2, W), jnp.float64)
    rngs = {"params": jax.random.key(0), "dropout": jax.random.key(1)}
    expected = functools.partial(nn.scan)(*args, 2)().init(rngs, x, None)
    with runtime.record_sites() as sites:
        actual = functools.partial(runtime.linen_scan, unroll=4)(*args, 2)().init(rngs, x, None)
    assert [call.settings.unroll for call in sites.values()] == [2]
    assert assert_flax_close(actual, expected) > 5
