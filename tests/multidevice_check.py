"""The runtime on 8 simulated CPU devices, against `jax.lax.scan`; run in its own process.

`tests/test_runtime_devices.py` runs `python -m tests.multidevice_check` with
`XLA_FLAGS=--xla_force_host_platform_device_count=8` (the device count is fixed when jax
starts, so the rest of the suite keeps one device). It prints one JSON object: for each case,
`"ok <leaves compared>"` or the error. Cases: the batch axis of `init` and `xs` sharded by a
`NamedSharding` (eagerly and under `jax.jit`), and the scan inside `shard_map` with a `psum`
in the step; forward and gradient values, and the shardings of every output, compared with
`jax.lax.scan`'s, for `levels` 1 and 2 (N = 23, k = 2: 3 blocks of 3 chunks, 2 leftover
chunks, 1 leftover step). A deliberately wrong scan (the steps reversed) must fail.
"""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from scanrewrite.runtime import scan
from tests.treecheck import assert_trees_close

N, K, BATCH, WIDTH = 23, 2, 16, 3
TOL = dict(rtol=1e-10, atol=1e-12)


def shard_map(f, mesh, in_specs, out_specs):
    """`jax.shard_map` (jax 0.7 and later), or `jax.experimental.shard_map` before it."""
    impl = getattr(jax, "shard_map", None)
    if impl is None:
        from jax.experimental.shard_map import shard_map as impl
    return impl(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


def jit_step(c, x):
    c = jnp.tanh(c * x + 0.1 * c.mean(-1, keepdims=True))
    return c, c.sum(-1)


def psum_step(c, x):
    # Couples the devices: every device's carry depends on every other's.
    c = jnp.tanh(c * x + 0.01 * jax.lax.psum(c.sum(), "batch"))
    return c, c.sum(-1)


def runner(mode, scan_impl, mesh, **kw):
    """`(init, xs) -> (carry, ys)` for one mode; the scan's own arguments in `kw`."""
    if mode == "shard_map":
        spec = (P("batch"), P(None, "batch"))
        inner = lambda i, x: scan_impl(psum_step, i, x, **kw)
        return jax.jit(shard_map(inner, mesh, spec, spec))
    run = lambda i, x: scan_impl(jit_step, i, x, **kw)
    return jax.jit(run) if mode == "jit" else run


def outputs_and_grads(mode, scan_impl, mesh, init, xs, **kw):
    run = runner(mode, scan_impl, mesh, **kw)
    loss = lambda i, x: sum(jnp.sum(leaf**2) for leaf in jax.tree_util.tree_leaves(run(i, x)))
    grad = jax.grad(loss, argnums=(0, 1))
    return run(init, xs), (jax.jit(grad) if mode != "eager" else grad)(init, xs)


def compare(actual, expected) -> int:
    compared = assert_trees_close(actual, expected, **TOL)
    for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected), strict=True):
        assert a.sharding.is_equivalent_to(e.sharding, a.ndim), f"sharding {a.sharding} != {e.sharding}"
    return compared


def main() -> dict[str, str]:
    assert jax.device_count() == 8, jax.devices()
    mesh = Mesh(np.array(jax.devices()), ("batch",))  # axes of the default (auto) type
    rng = np.random.default_rng(0)
    init = jax.device_put(rng.normal(size=(BATCH, WIDTH)), NamedSharding(mesh, P("batch")))
    xs = jax.device_put(rng.normal(size=(N, BATCH, WIDTH)), NamedSharding(mesh, P(None, "batch")))
    results = {}
    for mode in ("eager", "jit", "shard_map"):
        expected = outputs_and_grads(mode, jax.lax.scan, mesh, init, xs)
        cases = {f"{mode}-levels{levels}": dict(unroll=K, levels=levels) for levels in (1, 2)}
        for name, kw in cases.items():
            try:
                actual = outputs_and_grads(mode, scan, mesh, init, xs, **kw)
                results[name] = f"ok {compare(actual, expected)}"
            except Exception as error:  # reported to the parent test, which fails on it
                results[name] = f"{type(error).__name__}: {error}"[:2000]
        try:
            compare(outputs_and_grads(mode, scan, mesh, init, xs, unroll=K, levels=2, reverse=True), expected)
            results[f"{mode}-broken"] = "accepted"
        except AssertionError as error:
            results[f"{mode}-broken"] = f"rejected: {str(error).splitlines()[0]}"
    return results


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    json.dump(main(), sys.stdout)
