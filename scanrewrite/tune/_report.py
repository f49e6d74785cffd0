"""What a tuning run found: a row per measured configuration, a table per site, the picks."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scanrewrite.files import display_path
from scanrewrite.runtime import Settings, Site
from scanrewrite.targets import TARGETS
from scanrewrite.tune._budget import Budget
from scanrewrite.tune._candidates import Candidate
from scanrewrite.tune._choose import OVER_BUDGET, Timing
from scanrewrite.tune._verify import Comparison, Tolerance

#: The API each runtime function replaces, by the name `record_sites` gives it.
_ORIGINALS = {target.replacement.rpartition(".")[2]: target.qualified_name for target in TARGETS}


def original_label(api: str) -> str:
    """The original call at a site of the runtime function `api`, named by the API the user
    wrote (`original flax.nnx.scan` at an `nnx_scan` site)."""
    return f"original {_ORIGINALS.get(api, 'scan')}"


def site_name(site: Site) -> str:
    """`site` as the command and the errors name it: its path as `scanrewrite` shows paths, and
    its line."""
    return f"{display_path(site.path)}:{site.line}"


def originals_label(apis: Iterable[str]) -> str:
    """The row of the function with every site as the call it replaced, named by the API the
    user wrote where the sites share one (`lax.scan at every site`, `flax.nnx.scan at every
    site`), else `the original at every site`."""
    names = {_ORIGINALS.get(api, "scan").removeprefix("jax.") for api in apis}
    return f"{names.pop()} at every site" if len(names) == 1 else "the original at every site"


def format_diff(comparison: Comparison | None) -> str:
    """A max relative difference as the tables print it: `0` when exact, else two digits."""
    if comparison is None:
        return "n/a"
    if comparison.max_rel_diff == 0:
        return "0"
    return f"{comparison.max_rel_diff:.1e}"

HEADER = (
    "| {what} | step time vs original | median step (ms) | spread | memory | vs original "
    "| compile (s) | vs original | max rel diff | | the runtime built |\n"
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
)


def describe_built(plans: Sequence[Any]) -> str:
    """What the runtime built at a site (`record_sites()`' plans) in its own words, without the
    reasons: program, chunk size built and asked, layout, checkpoint or policy (with what it
    keeps), levels, stored steps; several builds (a site traced twice, at two types) joined."""
    return " / ".join(dict.fromkeys(plan.describe().partition(". Why: ")[0] for plan in plans))


def format_bytes(count: int) -> str:
    """`count` bytes in B, KiB, MiB or GiB, three significant digits or so."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:.2f} {unit}"
    return f"{count} B"


@dataclass
class Row:
    """One configuration as measured: its label, numbers, or the reason it has none."""

    label: str
    candidate: Candidate | None = None
    compile_s: float | None = None
    memory_bytes: int | None = None
    timing: Timing | None = None
    error: str | None = None
    note: str = ""
    #: Its outputs against the original's (for the baseline: a second compilation's).
    comparison: Comparison | None = None
    #: What the runtime built at the site (`describe_built`); empty where it built nothing (the
    #: original scan) or the row is not one site's.
    built: str = ""

    @property
    def differs(self) -> bool:
        """Whether it computes other numbers than the original."""
        return self.comparison is not None and not self.comparison.agrees

    def cells(self, baseline: Row) -> str:
        """The row of the table, with ratios to `baseline` (lax.scan at every site)."""
        if self.error is not None:
            return f"| {self.label} | {self.error} | | | | | | | | {self.note} | {self.built} |"
        ratio = lambda a, b, fmt: "n/a" if a is None or not b else format(a / b, fmt)
        timing, base = self.timing, baseline.timing
        mib = "n/a" if self.memory_bytes is None else format_bytes(self.memory_bytes)
        return " | ".join([
            f"| {self.label}",
            ratio(timing.median, base.median, ".2f") if timing and base else "n/a",
            f"{timing.median * 1e3:.2f}" if timing else "n/a",
            f"±{timing.noise / timing.median:.0%}" if timing and timing.median else "n/a",
            mib,
            ratio(self.memory_bytes, baseline.memory_bytes, ".2f"),
            "n/a" if self.compile_s is None else f"{self.compile_s:.2f}",
            ratio(self.compile_s, baseline.compile_s, ".2f"),
            format_diff(self.comparison),
            self.note,
            f"{self.built} |",
        ])


@dataclass
class SiteReport:
    """The candidates measured at one site, the others held fixed, and the pick."""

    site: Site
    #: The runtime function called there, as `record_sites` names it (`"scan"`, `"nnx_scan"`, ...).
    kind: str
    #: The settings the call wrote (`levels` None at an `eqxi_scan`, which takes none).
    written: Settings
    #: lax.scan at every site, timed in the same interleaved rounds as `rows`.
    baseline: Row
    rows: list[Row]
    pick: Candidate | None
    reason: str
    #: (site, `candidate: reason`) for each candidate that failed to compile or run.
    errors: list[tuple[Site, str]] = field(default_factory=list)
    #: The rows of the candidates that compute other numbers than the original.
    differing: list[Row] = field(default_factory=list)

    @property
    def over_budget(self) -> bool:
        """Whether no candidate fitted the memory budget (the pick is the least memory)."""
        return self.reason.startswith(OVER_BUDGET)

    def _name(self, candidate: Candidate) -> str:
        return original_label(self.kind) if candidate.original else str(candidate)

    def table(self, name: Callable[[Site], str] = str) -> str:
        heading = (
            f"{name(self.site)} ({self.kind}, written unroll={self.written.unroll!r}): "
            + (f"pick {self._name(self.pick)} ({self.reason})" if self.pick else f"no pick ({self.reason})")
        )
        lines = [heading, HEADER.format(what="candidate"), self.baseline.cells(self.baseline)]
        lines += [row.cells(self.baseline) for row in self.rows]
        return "\n".join(lines)


@dataclass
class TuneReport:
    """The result of `scanrewrite.tune`: a table per site, the whole program, the picks.

    `str(report)` (or `report.table()`) is the printable table. `picks` maps each site to
    the chosen `Candidate`; `unroll_picks` to its `unroll` alone, which is what the
    write-back sets.
    """

    sites: list[SiteReport]
    #: The whole program: lax.scan at every site, as written, and every site at its pick,
    #: timed together in one interleaved run.
    whole: list[Row]
    budget: Budget | None = None
    #: The budget in bytes (a fraction is taken of the original's memory).
    limit: int | None = None
    repeats: int = 0
    warmup: int = 0
    #: The device and jax version measured on.
    device: str = ""
    #: (site, `candidate: reason`) for each candidate that failed to compile or run.
    errors: list[tuple[Site, str]] = field(default_factory=list)
    #: (site, candidate) for each candidate that computes other numbers than the original;
    #: the site is None for a configuration of the whole program.
    differing: list[tuple[Site | None, Row]] = field(default_factory=list)
    #: What "the same numbers" meant.
    tolerance: Tolerance = Tolerance()
    #: False if the whole program with every site at its pick computed other numbers.
    picks_agree: bool = True
    #: The tuner's own wall time, seconds, and how many configurations it compiled and how
    #: many candidates it left uncompiled (predicted over the budget, or beaten).
    wall_s: float = 0.0
    compiled: int = 0
    not_compiled: int = 0
    #: How many programs XLA compiled at a time (each compile time is then one among several).
    compile_threads: int = 1
    #: What the memory column reads (`_compile.memory_measure`).
    memory: str = "XLA's temp memory"

    @property
    def picks(self) -> dict[Site, Candidate]:
        """Each site's pick, all verified: none if the picks together computed other numbers."""
        if not self.picks_agree:
            return {}
        return {site.site: site.pick for site in self.sites if site.pick is not None}

    @property
    def unroll_picks(self) -> dict[Site, int | None]:
        """Each site's picked `unroll` (None where the original scan is picked)."""
        return {site: None if candidate.original else candidate.unroll for site, candidate in self.picks.items()}

    def table(self, name: Callable[[Site], str] = str) -> str:
        """Every site's table, then the whole program's; sites named by `name(site)`."""
        budget = ""
        if self.budget is not None and self.limit is not None:
            budget = f"; memory budget {self.budget} = {format_bytes(self.limit)}"
        parts = [
            f"{self.device}; {self.repeats} timed repeats after {self.warmup} warm-up, interleaved; "
            f"spread: half the interquartile range of the repeats, as a fraction of the median; "
            f"memory: {self.memory}{budget}; "
            f"max rel diff: of the outputs against the original's (for lax.scan: a second compilation's), "
            f"largest difference over largest magnitude per leaf (a leaf whose value is rounding alone: over "
            f"the magnitude its atol stands for, atol / rtol); the same numbers within "
            f"{self.tolerance.describe()}"
        ]
        parts += [site.table(name) for site in self.sites]
        baseline = self.whole[0]
        whole = ["whole program, every site at its pick, measured together", HEADER.format(what="configuration")]
        parts.append("\n".join(whole + [row.cells(baseline) for row in self.whole]))
        if self.wall_s:
            left = f", {self.not_compiled} candidates not compiled (predicted over the budget, or beaten)" if self.not_compiled else ""
            at_a_time = f" ({self.compile_threads} at a time)" if self.compile_threads > 1 else ""
            parts.append(f"tuned in {self.wall_s:.1f} s: {self.compiled} programs compiled{at_a_time}{left}")
        return "\n\n".join(parts)

    def __str__(self) -> str:
        return self.table()
