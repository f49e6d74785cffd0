"""What the tuner tells a progress display: stages whose totals are known when they begin."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from scanrewrite.tune._candidates import Candidate


class Progress(Protocol):
    """Told the number of steps of each stage as it begins (`"tuning"`, `"tuning again"`,
    `"whole program"`), which never changes, then the steps as they end (a compile, a timed
    round, or several at once: planned steps that were not needed)."""

    def begin(self, total: int, stage: str = "tuning") -> None: ...

    def advance(self, label: str, steps: int = 1) -> None: ...


class Silent:
    """`Progress` that shows nothing."""

    def begin(self, total: int, stage: str = "tuning") -> None:
        pass

    def advance(self, label: str, steps: int = 1) -> None:
        pass


class Steps:
    """The steps of one site's round, of those its stage planned for it: it ends at the count
    planned, passing over what was not needed in one advance (and never past it)."""

    def __init__(self, progress: Progress, planned: int) -> None:
        self.progress, self.left = progress, planned

    def advance(self, label: str) -> None:
        if self.left > 0:
            self.left -= 1
            self.progress.advance(label)

    def finish(self, label: str) -> None:
        if self.left > 0:
            self.progress.advance(label, self.left)
            self.left = 0


def planned_steps(tried: Sequence[Candidate], spend: Sequence[Candidate], repeats: int, length: int | None) -> int:
    """The most steps a site's round takes: a compile of each candidate (or a prediction that
    leaves it out), two more stored counts that fill the budget (`fill`) at each k with stored
    counts, and the timed rounds."""
    families = {(c.unroll, c.checkpoint, c.levels) for c in spend if c.store and c.store != length}
    return len(tried) + len(spend) + 2 * len(families) + repeats
