"""The comparison helper itself: every kind of difference it promises to catch is caught."""

import jax.numpy as jnp
import numpy as np
import pytest

from tests.treecheck import assert_trees_close


def test_counts_leaves_and_accepts_equal_trees():
    tree = {"f": jnp.ones(2, jnp.bfloat16), "none": None, "i": jnp.arange(3), "b": jnp.array(True)}
    assert assert_trees_close(tree, tree, rtol=0, atol=0) == 3


@pytest.mark.parametrize(
    "actual, expected, message",
    [
        pytest.param({"a": 1.0, "b": None}, {"a": 1.0}, "tree structure", id="none-leaf-missing"),
        pytest.param((jnp.ones(2),), [jnp.ones(2)], "tree structure", id="tuple-vs-list"),
        pytest.param(jnp.ones(2), jnp.ones(3), "shape", id="shape"),
        pytest.param(jnp.ones(2), jnp.ones(2, jnp.bfloat16), "dtype", id="dtype"),
        pytest.param(jnp.arange(2), jnp.arange(2) + 1, "values differ", id="int-off-by-one"),
        pytest.param(jnp.ones(2), jnp.ones(2) * 1.1, "values differ", id="float"),
        pytest.param(jnp.ones(1, jnp.complex64), jnp.ones(1, jnp.complex64) * 1j, "values", id="complex"),
        pytest.param(jnp.array([np.nan]), jnp.array([np.nan]), "NaN", id="nan-on-both-sides"),
        pytest.param(jnp.array([1.0]), jnp.array([np.nan]), "NaN", id="nan-expected"),
    ],
)
def test_rejects(actual, expected, message):
    with pytest.raises(AssertionError, match=message):
        assert_trees_close(actual, expected, rtol=1e-5, atol=1e-6)
