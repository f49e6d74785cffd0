"""Leaf-by-leaf comparison of Flax programs: parameters, state, outputs and gradients.

`assert_flax_close(actual, expected)` is `treecheck.assert_trees_close` for trees that hold
Flax's values: typed PRNG keys (an `nnx.Rngs` stream, a Linen `rngs` dict) are compared by
their key data, exactly, and `nnx.State`s by their pure dicts, so the structure compared is
the variable tree itself (paths, collections, RNG counters, `sow` intermediates).
`float64`, imported into a test module, turns 64-bit types on within each of its tests.
"""

import jax
import jax.numpy as jnp
import pytest
from treecheck import assert_trees_close

from scanrewrite.runtime._compat import enable_x64


@pytest.fixture(autouse=True)
def float64():
    # Within each test only: turned on for a module, x64 would change every later test's dtypes.
    with enable_x64(True):
        yield


def _plain(tree):
    try:
        from flax import nnx

        if isinstance(tree, nnx.State):
            tree = nnx.to_pure_dict(tree) if hasattr(nnx, "to_pure_dict") else tree.to_pure_dict()
    except ImportError:
        pass

    def leaf(x):
        if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jax.random.key_data(x)
        return x

    return jax.tree_util.tree_map(leaf, tree)


def assert_flax_close(actual, expected, *, rtol: float = 1e-10, atol: float = 1e-12) -> int:
    """Assert both trees hold the same values leaf by leaf (keys by their data); return the
    number of leaves compared."""
    return assert_trees_close(_plain(actual), _plain(expected), rtol=rtol, atol=atol)
