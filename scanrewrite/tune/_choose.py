"""Stage 7, choose: the pick among a site's measured candidates, and why.

Plain data and arithmetic, no jax: the choice can be tested (and reproduced from a report's
numbers) without compiling anything.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scanrewrite.settings import NAMES, Settings
from scanrewrite.tune._candidates import Candidate


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
    memory_bytes: int | None
    error: str | None = None
    #: Whether its numbers differ from the original's: it is never picked.
    differs: bool = False
    #: Whether it is the setting the call has now: it wins a tie of speed and memory.
    written: bool = False
    #: A digest of its optimized program (`Compiled.program`), if known.
    program: str | None = None
    #: How many of the call's settings writing it back changes (`changes`); None: none if it
    #: is `written`, else one.
    changes: int | None = None

    @property
    def distance(self) -> int:
        """How far it is from what the source says: 0 for the written setting."""
        if self.changes is not None:
            return self.changes
        return 0 if self.written else 1


def changes(candidate: Candidate, written: Settings) -> int:
    """How many of a call's settings (`unroll`, `checkpoint`, `levels`, `store`) writing
    `candidate` back changes, the call having written `written` (`Settings.changes`); the
    original scan changes all."""
    if candidate.original:
        return len(NAMES)
    return len(candidate.changes(written))


#: The reason given when no candidate fits the memory budget.
OVER_BUDGET = "no candidate fits the memory budget: the least memory"


def choose(options: Sequence[Option], limit: int | None) -> tuple[Option | None, str]:
    """The pick among `options`, and why.

    Only candidates that ran and compute the original's numbers count. The fastest (median
    step time) of those whose memory fits `limit`; then, among those within the measured
    noise of it (the larger of the two spreads) or compiled to the same program: the original
    scan if it is one of them (the rewrite keeps only what helps: speed, or the memory the
    budget needs), else the one with the least memory (ties: the one closest to the
    written setting, which changes fewest of the call's settings, then the faster).
    The written setting also stands wherever it compiles to the same program as the pick.
    If none fits the budget, the one with the least memory, said so in the reason. None if no
    candidate ran and agreed.
    """
    ran = [option for option in options if option.error is None and option.timing is not None and not option.differs]
    if not ran:
        return None, "no candidate ran" if not any(option.differs for option in options) else "no candidate verified"
    fits = [o for o in ran if limit is None or o.memory_bytes is None or o.memory_bytes <= limit]
    if not fits:
        least = min(ran, key=lambda o: (o.memory_bytes, o.timing.median))
        return least, OVER_BUDGET
    fastest = min(fits, key=lambda o: o.timing.median)
    ties = [
        o for o in fits
        if o.timing.median - fastest.timing.median <= max(o.timing.noise, fastest.timing.noise)
        or (o.program is not None and o.program == fastest.program)
    ]
    within = "within the memory budget" if limit is not None else ""
    original = next((o for o in ties if o.candidate.original), None)
    if original is not None:
        if original is fastest:
            return original, " ".join(filter(None, ["fastest", within]))
        same = original.program is not None and original.program == fastest.program
        how = "the same program as" if same else "as fast as"
        return original, f"{how} {fastest.candidate}{'' if same else ' within noise'}: the rewrite does not help here"
    memory = lambda o: math.inf if o.memory_bytes is None else o.memory_bytes
    best = min(ties, key=lambda o: (memory(o), o.distance, o.timing.median))
    written = next((o for o in fits if o.written), None)
    if written not in (None, best) and written.program is not None and written.program == best.program:
        return written, f"as written: the same program as {best.candidate}"
    if best.written and best is not fastest and best.program is not None and best.program == fastest.program:
        return best, f"as written: the same program as {fastest.candidate}"
    if best is fastest:
        return best, " ".join(filter(None, ["fastest", within]))
    if best.written and memory(best) == memory(fastest):
        return best, f"as written: as fast as {fastest.candidate} within noise, at the same memory"
    if best.distance < fastest.distance and memory(best) == memory(fastest):
        return best, f"closest to what is written: as fast as {fastest.candidate} within noise, at the same memory"
    return best, f"less memory than {fastest.candidate} at the same speed within noise"
