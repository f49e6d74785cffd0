"""What the tuner tries and how it chooses: candidates, the memory budget, noise, the pick.

Plain data and arithmetic, no jax: the choice can be tested (and reproduced from a report's
numbers) without compiling anything.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scanrewrite.targets import CHECKPOINT_POLICIES

#: The chunk sizes tried by default.
DEFAULT_KS: tuple[int, ...] = (1, 2, 3, 4, 6, 8)


class TuneError(Exception):
    """Bad input to the tuner: one line, naming the file and line where there is one."""


@dataclass(frozen=True)
class Candidate:
    """One setting tried at a site: `unroll=k`, and a checkpoint mode or the written one."""

    unroll: int
    #: None: as the call wrote it; `"none"`: `checkpoint=False`; `"checkpoint"`:
    #: `checkpoint=True`; else the name of a policy in `jax.checkpoint_policies`.
    checkpoint: str | None = None

    def __str__(self) -> str:
        if self.checkpoint is None:
            return f"k={self.unroll}"
        if self.checkpoint == "none":
            return f"k={self.unroll}, checkpoint=False"
        if self.checkpoint == "checkpoint":
            return f"k={self.unroll}, checkpoint=True"
        return f"k={self.unroll}, {self.checkpoint}"


def candidates(
    ks: Sequence[int], checkpoints: Sequence[str], *, written: object, has_checkpoint: bool
) -> list[Candidate]:
    """Every k with the written checkpoint mode, then every k with each of `checkpoints`
    (only where the call takes `checkpoint`). The written `unroll`, when it is an int not
    among `ks`, is tried too, so the status quo is always measured."""
    ks = list(dict.fromkeys(ks))
    if isinstance(written, int) and not isinstance(written, bool) and written > 0 and written not in ks:
        ks.append(written)
    modes: list[str | None] = [None, *(dict.fromkeys(checkpoints) if has_checkpoint else ())]
    return [Candidate(k, mode) for mode in modes for k in ks]


def parse_ks(values: Sequence[int]) -> tuple[int, ...]:
    """`values` checked as chunk sizes (positive ints)."""
    for k in values:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise TuneError(f"a chunk size must be a positive int, got {k!r}")
    if not values:
        raise TuneError("no chunk sizes to try")
    return tuple(dict.fromkeys(values))


def parse_policies(text: str | Sequence[str]) -> tuple[str, ...]:
    """Checkpoint modes to try besides the written one: `none` (`checkpoint=False`),
    `checkpoint` (`True`), or names of `jax.checkpoint_policies`; comma-separated in a string."""
    names = [name.strip() for name in text.split(",") if name.strip()] if isinstance(text, str) else list(text)
    known = ("none", "checkpoint", *CHECKPOINT_POLICIES)
    for name in names:
        if name not in known:
            raise TuneError(f"unknown checkpoint mode {name!r}; choose from {', '.join(known)}")
    return tuple(dict.fromkeys(names))


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "tb": 10**12}


@dataclass(frozen=True)
class Budget:
    """A memory budget for XLA's compiled temp memory: bytes, or a fraction of `lax.scan`'s."""

    bytes: int | None = None
    fraction: float | None = None

    @classmethod
    def parse(cls, text: str | int | float | None) -> Budget | None:
        """`"2GiB"`, `"512MB"`, `1000000` (bytes); `"0.5x"` or `"50%"` (of `lax.scan`'s)."""
        if text is None:
            return None
        if isinstance(text, (int, float)) and not isinstance(text, bool):
            text = str(text)
        if not isinstance(text, str):
            raise TuneError(f"a memory budget is bytes ('2GiB') or a fraction ('0.5x', '50%'), got {text!r}")
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*(x|%|[a-z]*)\s*", text.lower())
        if match is None or match.group(2) not in (*_UNITS, "x", "%"):
            raise TuneError(f"a memory budget is bytes ('2GiB') or a fraction ('0.5x', '50%'), got {text!r}")
        number, unit = float(match.group(1)), match.group(2)
        if number <= 0:
            raise TuneError(f"a memory budget must be positive, got {text!r}")
        if unit == "x":
            return cls(fraction=number)
        if unit == "%":
            return cls(fraction=number / 100)
        return cls(bytes=int(number * _UNITS[unit]))

    def limit(self, baseline_bytes: int | None) -> int | None:
        """The budget in bytes, given `lax.scan`'s temp memory (None: unknown, no limit)."""
        if self.bytes is not None:
            return self.bytes
        if baseline_bytes is None:
            return None
        return math.floor(self.fraction * baseline_bytes)

    def __str__(self) -> str:
        if self.bytes is not None:
            return f"{self.bytes} bytes"
        return f"{self.fraction:g}x lax.scan's temp memory"


@dataclass(frozen=True)
class Timing:
    """The step times of one program, in seconds, from interleaved repeats."""

    times: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def noise(self) -> float:
        """Half the interquartile range of the repeats, in seconds (0 for a single repeat):
        the spread reported as `±` and the margin within which two configurations tie."""
        if len(self.times) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.times, n=4, method="inclusive")
        return (q3 - q1) / 2


@dataclass(frozen=True)
class Option:
    """What the pick sees of one measured candidate."""

    candidate: Candidate
    timing: Timing | None
    temp_bytes: int | None
    error: str | None = None


#: The reason given when no candidate fits the memory budget.
OVER_BUDGET = "no candidate fits the memory budget: the least memory"


def choose(options: Sequence[Option], limit: int | None) -> tuple[Option | None, str]:
    """The pick among `options`, and why.

    The fastest (median step time) of those that ran and whose temp memory fits `limit`;
    then, among those within the measured noise of it (the larger of the two spreads), the
    one with the least temp memory (ties: the faster). If none fits the budget, the one with
    the least memory, said so in the reason. None if no candidate ran.
    """
    ran = [option for option in options if option.error is None and option.timing is not None]
    if not ran:
        return None, "no candidate ran"
    fits = [o for o in ran if limit is None or o.temp_bytes is None or o.temp_bytes <= limit]
    if not fits:
        least = min(ran, key=lambda o: (o.temp_bytes, o.timing.median))
        return least, OVER_BUDGET
    fastest = min(fits, key=lambda o: o.timing.median)
    ties = [
        o for o in fits
        if o.timing.median - fastest.timing.median <= max(o.timing.noise, fastest.timing.noise)
    ]
    memory = lambda o: math.inf if o.temp_bytes is None else o.temp_bytes
    best = min(ties, key=lambda o: (memory(o), o.timing.median))
    within = "within the memory budget" if limit is not None else ""
    if best is fastest:
        return best, " ".join(filter(None, ["fastest", within]))
    return best, f"less memory than {fastest.candidate} at the same speed within noise"
