"""Nested checkpointing: the chunks of a scan grouped into checkpointed blocks, level by level.

A loop over C chunks, each chunk in `jax.checkpoint`, keeps one carry per chunk for the
backward pass: C carries. With `levels=L` the C chunks are grouped into about C^(1/L) blocks
of about C^((L-1)/L) chunks; the outer loop runs over blocks, each block in `jax.checkpoint`,
and a block runs its chunks with `L - 1` levels in the same way. The backward pass keeps about
L * C^(1/L) carries (2 sqrt(C) for two levels) plus one chunk's residuals, for one more forward
recomputation per added level (the classic sqrt(N) scheme of Chen et al., 2016, "Training
deep nets with sublinear memory cost", applied recursively).

Any C: at each level, the chunks left over after the last full block run after the blocks
(the highest indices; with `reverse=True` the lowest, which a reversed loop reaches last),
with the block's inner levels and no checkpoint of their own, so steps run in exactly the
original order. A level that would hold fewer than two blocks is not built: `levels` larger
than C supports acts as the largest level count that C supports (about log2(C)).

Everything here works on pytrees of arrays with a leading axis of units (chunks) and takes
the loop and the checkpoint wrapper as arguments, so it knows nothing of how a chunk runs.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from scanrewrite.runtime._chunks import in_blocks
from scanrewrite.runtime._validate import is_int_at_least

# `levels="auto"` picks the smallest level count whose backward pass keeps at most this many
# carries (see `saved_carries`): a bound that does not grow with N, for one more forward
# recomputation per level. Long scans reach it with few levels: 4,096 chunks take 3.
AUTO_MAX_CARRIES = 64

Levels = int | Literal["auto"]
Loop = Callable[[Callable, Any, Any, int], tuple[Any, Any]]


def check(levels: Any) -> None:
    """Raise a `ValueError` naming `levels` unless it is a positive int or `"auto"`."""
    if not (isinstance(levels, str) and levels == "auto") and not is_int_at_least(levels, 1):
        raise ValueError(f"`levels` must be a positive int or 'auto', got {levels!r}")


def _iroot(count: int, levels: int) -> int:
    """The largest r with r**levels <= count, for count >= 0 (exact, unlike a float power)."""
    r = round(count ** (1.0 / levels))
    while r > 0 and r**levels > count:
        r -= 1
    while (r + 1) ** levels <= count:
        r += 1
    return r


class Split(NamedTuple):
    """One level over `count` units: `blocks` blocks of `size` units, then `rest` more units.

    `inner` is the level count the blocks (and the leftover units) run with.
    """

    blocks: int
    size: int
    rest: int
    inner: int


@functools.cache
def split(count: int, levels: int) -> Split | None:
    """How `levels` levels start over `count` units; `None` when they run as one flat loop.

    The outer level has `r = floor(count ** (1 / levels))` blocks of `count // r` units (so
    the `count % r < r` leftover units are fewer than a block). A level with fewer than two
    blocks is dropped and the next one tried, which is how a too large `levels` degrades.
    """
    while levels > 1:
        blocks = _iroot(count, levels)
        if blocks >= 2:
            size = count // blocks
            return Split(blocks, size, count - blocks * size, levels - 1)
        levels -= 1
    return None


@functools.cache
def saved_carries(count: int, levels: int) -> int:
    """The carries the backward pass of `count` checkpointed units keeps at most, at once.

    One per unit for a flat loop; for nested levels, one per block plus the most that a block
    or the leftover units keep while they are differentiated.
    """
    s = split(count, levels)
    if s is None:
        return count
    return s.blocks + max(saved_carries(s.size, s.inner), saved_carries(s.rest, s.inner))


def built_levels(count: int, levels: int) -> int:
    """How many levels `levels` actually builds over `count` units (at least 1)."""
    s = split(count, levels)
    return 1 if s is None else 1 + built_levels(s.size, s.inner)


def resolve(levels: Levels, count: int) -> int:
    """`levels` as an int for `count` units: `"auto"` is the smallest level count whose
    `saved_carries` is at most `AUTO_MAX_CARRIES` (or the one that keeps fewest, if none does).
    """
    if levels != "auto":
        return operator.index(levels)
    best = 1
    for candidate in range(1, max(1, count.bit_length()) + 1):
        if saved_carries(count, candidate) <= AUTO_MAX_CARRIES:
            return candidate
        if saved_carries(count, candidate) < saved_carries(count, best):
            best = candidate
    return best


def nested(
    loop: Loop,
    unit: Callable,
    carry: Any,
    xs: Any,
    count: int,
    levels: int,
    reverse: bool,
    wrap_block: Callable[[Callable], Callable],
) -> tuple[Any, Any]:
    """What `loop(unit, carry, xs, count)` returns, computed with `levels` nested levels.

    **Arguments:**

    - `loop`: `(unit, carry, xs, count) -> (carry, ys)`, a scan of `unit` over the leading axis
        (of length `count`) of every leaf of `xs`, in the direction `reverse` gives.
    - `unit`: `(carry, x) -> (carry, y)`, one chunk (already checkpointed if it should be).
    - `levels`: an int >= 1; 1 is `loop` itself.
    - `reverse`: the direction of `loop`; it decides which end the leftover units take.
    - `wrap_block`: applied to each block (`jax.checkpoint`, or the identity).

    **Returns:**

    The final carry and the per-unit outputs stacked on a leading axis of `count`, in unit
    order, as `loop` returns them.
    """
    s = split(count, levels)
    if s is None:
        return loop(unit, carry, xs, count)

    def block(carry, block_xs):
        return nested(loop, unit, carry, block_xs, s.size, s.inner, reverse, wrap_block)

    # The leftover units get no checkpoint of their own: they are fewer than a block, and
    # would keep no fewer carries.
    return in_blocks(
        carry,
        xs,
        count,
        s.size,
        reverse,
        lambda carry, blocked_xs: loop(wrap_block(block), carry, blocked_xs, s.blocks),
        lambda carry, rest_xs: nested(loop, unit, carry, rest_xs, s.rest, s.inner, reverse, wrap_block),
    )
