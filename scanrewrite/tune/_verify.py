"""Whether a configuration computes the original's numbers: leaf by leaf, within a
tolerance that depends on the dtype.

The difference of one leaf is normwise: its largest absolute difference over its largest
expected magnitude (as `benchmarks/` report it), so an element near zero in a gradient whose
other elements are large does not count as a large relative error. A leaf agrees when that
absolute difference is at most ``atol + rtol * largest magnitude``. Integers and booleans
must be equal; NaN must sit where the original has NaN, infinities match exactly.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: rtol by dtype: a few hundred units in the last place of float32 and float64 (the
#: reordering an unrolled, fused, recomputed body allows), looser for the half precisions.
#: atol is the dtype's smallest normal number: values below it (denormals flushed to zero by
#: one compilation and not another) count as zero.
RTOL = {"float64": 1e-9, "complex128": 1e-9, "float32": 1e-4, "complex64": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}
#: For float dtypes not in `RTOL` (float8 and others).
FALLBACK_RTOL = 1e-1


#: How many times the largest difference among programs equal up to rounding a candidate may
#: differ by (`Tolerance.rounding`): a few samples of rounding are not its worst case.
ROUNDING_FACTOR = 2.0


@dataclass(frozen=True)
class Tolerance:
    """`rtol` and `atol` for every float leaf; None takes each dtype's default.

    With `rounding`, a leaf's rtol is at least its entry there: what rounding in the precision
    the function computes in (`precision`, narrower than the leaf's own dtype) moves it by; with
    `rounding_atol`, its atol too (a leaf whose value is that rounding, `rounding_of`).
    """

    rtol: float | None = None
    atol: float | None = None
    #: Per leaf of the outputs, `ROUNDING_FACTOR` times the largest relative difference among
    #: programs equal to the original up to rounding, at most `precision`'s rtol (`rounding`).
    rounding: tuple[float, ...] | None = None
    #: The narrowest float dtype the function computes in, by name, where `rounding` is measured.
    precision: str | None = None
    #: Per leaf, the atol of a leaf whose value is rounding alone (`rounding_of`), else 0.
    rounding_atol: tuple[float, ...] | None = None

    def of(self, dtype: np.dtype, index: int | None = None) -> tuple[float, float]:
        """(rtol, atol) of a leaf of `dtype`, the `index`-th of the outputs."""
        rtol = RTOL.get(dtype.name, FALLBACK_RTOL) if self.rtol is None else self.rtol
        rtol = max(rtol, _entry(self.rounding, index))
        atol = float(jnp.finfo(dtype).tiny) if self.atol is None else self.atol
        return rtol, max(atol, _entry(self.rounding_atol, index))

    def describe(self) -> str:
        """The tolerance in words, for the report's heading."""
        rtol = "by dtype (float32 1e-4, float64 1e-9, ...)" if self.rtol is None else f"{self.rtol:g}"
        atol = "the dtype's smallest normal" if self.atol is None else f"{self.atol:g}"
        text = f"rtol {rtol}, atol {atol}"
        if self.rounding is None:
            return text
        raised = [value for value in self.rounding if value > 0]
        how = "which raised none"
        if raised:
            how = f"raised on {len(raised)} of {len(self.rounding)} leaves, to at most {max(raised):.1e}"
        noise = [value for value in self.rounding_atol or () if value > 0]
        if noise:
            how += (f"; the atol of {len(noise)} whose value is rounding alone (their programs differ by more than "
                    f"that rtol of their own size) raised to {ROUNDING_FACTOR:g}x that difference, to at most {max(noise):.1e}")
        return (
            f"{text}; the function computes in {self.precision}, so a leaf's rtol is at least {ROUNDING_FACTOR:g}x "
            "its largest difference among programs equal up to rounding (the original compiled twice, the "
            "checkpointed scan at every site, the for-loop's program at scan sites and one stored step at Flax "
            f"sites), at most {self.precision}'s "
            f"{RTOL.get(str(self.precision), FALLBACK_RTOL):g} ({how})"
        )


def _entry(values: tuple[float, ...] | None, index: int | None) -> float:
    """`values[index]`, a per-leaf rounding measure of `Tolerance`; 0 where there is none."""
    return values[index] if values is not None and index is not None and index < len(values) else 0.0


def rounding_of(
    outputs: list[tuple[Any, list[Any]]], expected: tuple[Any, list[Any]], precision: np.dtype
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per leaf of `expected` (the original's outputs), the rtol and the atol that rounding in
    `precision` needs, from `outputs` (of programs equal to it up to rounding; one whose
    structure, NaNs or infinities differ tells nothing of rounding and is left out).

    The rtol is `ROUNDING_FACTOR` times the largest relative difference, at most `precision`'s
    rtol: a difference larger than the precision makes is not rounding. Except of a leaf whose
    value is itself rounding, a sum that cancels (the gradient of an attention's key bias,
    which a softmax cannot see, was 6.9e-6 on a TPU v5e where the other gradients were 1e-2 to
    0.3, and two equal programs differed on it by 1.9x its size): a leaf no larger than
    `precision`'s rtol of the largest magnitude among `expected`'s leaves of its dtype, whose
    largest relative difference is over that cap, gets an atol of `ROUNDING_FACTOR` times its
    largest absolute difference, at most that rtol of that largest magnitude. So no leaf is
    allowed more than the precision's rounding of the output's largest values, and a leaf
    larger than that keeps the capped rtol alone."""
    cap = RTOL.get(precision.name, FALLBACK_RTOL)
    count = len(expected[1])
    relative, absolute, scales = [0.0] * count, [0.0] * count, [0.0] * count
    for tree, leaves in outputs:
        if tree != expected[0] or len(leaves) != count:
            continue
        found = [_difference(a, e) for a, e in zip(leaves, expected[1])]
        if all(math.isfinite(rel) for rel, _, _ in found):
            relative = [max(x, rel) for x, (rel, _, _) in zip(relative, found)]
            absolute = [max(x, diff) for x, (_, diff, _) in zip(absolute, found)]
            scales = [scale for _, _, scale in found]
    largest: dict[Any, float] = {}
    for e, scale in zip(expected[1], scales):
        largest[e.dtype] = max(largest.get(e.dtype, 0.0), scale)
    atol = tuple(
        min(ROUNDING_FACTOR * d, cap * largest[e.dtype]) if ROUNDING_FACTOR * r > cap and s <= cap * largest[e.dtype] else 0.0
        for r, d, s, e in zip(relative, absolute, scales, expected[1])
    )
    return tuple(min(ROUNDING_FACTOR * x, cap) for x in relative), atol


@dataclass(frozen=True)
class Comparison:
    """How a configuration's outputs compare with the original's."""

    #: The largest normwise relative difference over the leaves (inf for a mismatch).
    max_rel_diff: float
    agrees: bool


def to_host(outputs: Any) -> tuple[Any, list[np.ndarray]]:
    """The tree structure and the leaves, as numpy arrays."""
    leaves, tree = jax.tree_util.tree_flatten(outputs)
    return tree, [np.asarray(leaf) for leaf in leaves]


def flat(outputs: Any) -> tuple[Any, list[Any]]:
    """The tree structure and the leaves, where they are (`to_host` without the copy)."""
    leaves, tree = jax.tree_util.tree_flatten(outputs)
    return tree, leaves


def compare(actual: tuple[Any, list[Any]], expected: tuple[Any, list[Any]], tolerance: Tolerance) -> Comparison:
    """`actual` against `expected` (each from `to_host` or `flat`), leaf by leaf."""
    (actual_tree, actual_leaves), (expected_tree, expected_leaves) = actual, expected
    if actual_tree != expected_tree or len(actual_leaves) != len(expected_leaves):
        return Comparison(math.inf, False)
    worst, agrees = 0.0, True
    for index, (a, e) in enumerate(zip(actual_leaves, expected_leaves)):
        diff, ok = _leaf(a, e, tolerance, index)
        worst, agrees = max(worst, diff), agrees and ok
    return Comparison(worst, agrees)


#: Leaves of at least this many elements are compared on the device (`_device_stats`), smaller
#: ones on the host: jit's compile of the reduction, once per leaf shape and tuning run, costs
#: tens of ms, more than the host takes for a small leaf.
DEVICE_ELEMENTS = 2**20


def _leaf(a: Any, e: Any, tolerance: Tolerance, index: int | None = None) -> tuple[float, bool]:
    """(normwise relative difference, whether it is within the tolerance) of one leaf. A leaf
    whose value is rounding alone (`Tolerance.rounding_atol`) is judged at the magnitude its
    atol stands for, atol / rtol, at most the largest of its dtype's leaves: so is its
    difference reported, not over its own size, which rounding is not measured by."""
    rel, diff, scale = _difference(a, e)
    if a.shape != e.shape or a.dtype != e.dtype or not jnp.issubdtype(a.dtype, jnp.inexact):
        return rel, rel == 0
    rtol, atol = tolerance.of(np.dtype(a.dtype), index)
    noise = _entry(tolerance.rounding_atol, index)
    if noise > 0 and rtol > 0 and math.isfinite(rel):
        rel = diff / max(scale, noise / rtol)
    return rel, diff <= atol + rtol * scale


def _difference(a: Any, e: Any) -> tuple[float, float, float]:
    """(normwise relative difference, largest absolute difference, largest finite magnitude of
    `e`) of one leaf: infinite differences where shapes or dtypes differ or a NaN or an
    infinity is out of place."""
    if a.shape != e.shape or a.dtype != e.dtype:
        return math.inf, math.inf, 0.0
    if a.size == 0:
        return 0.0, 0.0, 0.0
    stats = _device_stats(a, e) if a.size >= DEVICE_ELEMENTS else _stats(np, np.asarray(a), np.asarray(e))
    equal, misplaced, diff, scale = (v.item() for v in jax.device_get(stats))
    if equal:
        return 0.0, 0.0, scale
    if misplaced:
        return math.inf, math.inf, scale
    return (0.0 if diff == 0 else diff / scale if scale else math.inf), diff, scale


def _stats(xp: Any, a: Any, e: Any) -> tuple[Any, Any, Any, Any]:
    """(whether all elements are equal, whether a NaN or an infinity is out of place, the
    largest absolute difference, the largest finite magnitude of `e`), as scalars, with the
    array module `xp` (numpy, or jax.numpy under `jit`). Half precisions are compared in
    float32, integers in the widest float there is."""
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        wide = np.float64 if xp is np else jax.dtypes.canonicalize_dtype(np.float64)
        a_, e_ = a.astype(wide), e.astype(wide)
        return xp.all(a == e), xp.bool_(False), xp.max(xp.abs(a_ - e_)), xp.max(xp.abs(e_))
    if jnp.finfo(a.dtype).bits < 32:
        a, e = a.astype(np.float32), e.astype(np.float32)
    misplaced = xp.any(xp.isnan(a) != xp.isnan(e))
    # Equal elements (NaN where the original has NaN, the same infinity) differ by nothing.
    with np.errstate(invalid="ignore"):  # inf - inf, where the where below discards it
        delta = xp.where((a == e) | xp.isnan(e), 0, a - e)
    misplaced |= ~xp.all(xp.isfinite(delta))
    scale = xp.max(xp.where(xp.isfinite(e), xp.abs(e), 0))
    return xp.all(a == e), misplaced, xp.max(xp.abs(delta)), scale


#: `_stats` on the device, for large leaves: a large model's gradients, copied to the host and
#: widened to float64 there, took 15 s a candidate on a TPU v5e's host.
_device_stats = jax.jit(functools.partial(_stats, jnp))
