"""One strict comparison for pytrees of arrays, shared by every test that compares results.

`assert_trees_close(actual, expected, rtol=..., atol=...)` fails unless both trees have the
same structure (`None` leaves included), and every pair of leaves has the same shape, the same
dtype, no NaN, and close values (exactly equal for integer and bool dtypes). It returns the
number of leaves it compared, so a caller can assert that nothing was silently skipped.
"""

import jax
import numpy as np


def _kind(dtype: np.dtype) -> str:
    if np.issubdtype(dtype, np.complexfloating):
        return "complex"
    if np.issubdtype(dtype, np.integer) or dtype == np.bool_:
        return "exact"
    # Floats, including bfloat16 and the other ml_dtypes, which numpy does not call floating.
    return "float"


def _dtype(leaf) -> np.dtype:
    # Python scalars have no dtype attribute; numpy then names the one they would get.
    return np.dtype(leaf.dtype) if hasattr(leaf, "dtype") else np.result_type(leaf)


def assert_trees_close(actual, expected, *, rtol: float, atol: float) -> int:
    """Assert that two pytrees hold the same arrays, and return how many leaves were compared.

    **Arguments:**

    - `actual`, `expected`: pytrees whose leaves are arrays or scalars.
    - `rtol`, `atol`: tolerances for floating and complex leaves, as in `numpy.allclose`.
      Integer and bool leaves must be equal.

    **Returns:**

    The number of leaves compared (`None` counts as structure, not as a leaf).

    Raises `AssertionError` naming the path of the first leaf that differs in structure, shape,
    dtype or value, or that holds a NaN on either side.
    """
    actual_tree = jax.tree_util.tree_structure(actual)
    expected_tree = jax.tree_util.tree_structure(expected)
    assert actual_tree == expected_tree, f"tree structure differs: {actual_tree} != {expected_tree}"
    compared = 0
    paths_and_leaves = jax.tree_util.tree_leaves_with_path(actual)
    for (path, a), e in zip(paths_and_leaves, jax.tree_util.tree_leaves(expected), strict=True):
        where = jax.tree_util.keystr(path) or "<root>"
        a_dtype, e_dtype = _dtype(a), _dtype(e)
        assert a_dtype == e_dtype, f"{where}: dtype {a_dtype} != {e_dtype}"
        a_np, e_np = np.asarray(a), np.asarray(e)
        assert a_np.shape == e_np.shape, f"{where}: shape {a_np.shape} != {e_np.shape}"
        kind = _kind(a_dtype)
        if kind == "exact":
            assert np.array_equal(a_np, e_np), f"{where}: values differ\n{a_np}\n!=\n{e_np}"
        else:
            wide = np.complex128 if kind == "complex" else np.float64
            a_np, e_np = a_np.astype(wide), e_np.astype(wide)
            assert not np.isnan(a_np).any(), f"{where}: actual holds NaN\n{a_np}"
            assert not np.isnan(e_np).any(), f"{where}: expected holds NaN\n{e_np}"
            assert np.allclose(a_np, e_np, rtol=rtol, atol=atol), (
                f"{where}: values differ beyond rtol={rtol}, atol={atol}; "
                f"max abs diff {np.max(np.abs(a_np - e_np), initial=0.0)}\n{a_np}\n!=\n{e_np}"
            )
        compared += 1
    return compared
