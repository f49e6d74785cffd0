"""Stage 2, list the candidates: what each site tries, from the options and what it wrote."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scanrewrite.runtime import Site, named_policy
from scanrewrite.targets import ALL_POLICIES
from scanrewrite.tune._options import TuneOptions
from scanrewrite.tune._select import (
    LEVELS_MIN_STEPS,
    ROLLED_SPENDING_POLICIES,
    SPENDING_APIS,
    Candidate,
    candidates,
    default_stores,
    spending,
    spending_policies,
)
from scanrewrite.tune._sites import Found


@dataclass
class SiteCandidates:
    """What one site tries."""

    #: Compiled in every round of the site: each k with each checkpoint mode and levels tried,
    #: and the original scan.
    tried: list[Candidate]
    #: Under a memory budget, what spends memory for speed: compiled only where predicted to
    #: fit and win (`_predict`); the stored counts that fill the budget join it as measured.
    spend: list[Candidate] = field(default_factory=list)

    def planned_steps(self, repeats: int, length: int | None) -> int:
        """The most steps a round of the site takes: a compile of each candidate (or a
        prediction that leaves it out), two more stored counts that fill the budget (`fill`)
        at each k with stored counts, and the timed rounds."""
        families = {(c.unroll, c.checkpoint, c.levels) for c in self.spend if c.store and c.store != length}
        return len(self.tried) + len(self.spend) + 2 * len(families) + repeats


def list_candidates(found: Found, options: TuneOptions) -> dict[Site, SiteCandidates]:
    """Each site's candidates: every k with the written checkpoint mode and levels and with
    each other of `options.checkpoints` and `options.levels` (not at `eqxi_scan` sites, which
    take neither; levels only at sites of `LEVELS_MIN_STEPS` steps or more), the original scan
    (but with `keep_rewrites`), and under a budget at sites of `SPENDING_APIS` what spends."""
    return {site: _of_site(found, site, options) for site in found.calls}


def _of_site(found: Found, site: Site, options: TuneOptions) -> SiteCandidates:
    call = found.calls[site]
    written, length = call.settings, found.lengths.get(site)
    configurable = call.api != "eqxi_scan"
    tried = candidates(
        options.ks,
        [mode for mode in options.checkpoints if mode != _mode(written.checkpoint)],
        written=written.unroll,
        has_checkpoint=configurable,
        levels=[depth for depth in options.levels if depth != written.or_defaults().levels]
        if configurable and (length or 0) >= LEVELS_MIN_STEPS else (),
        original=not options.keep_rewrites,
        checkpointed=written.checkpoint is not False,
    )
    if options.memory_budget is None or call.api not in SPENDING_APIS:
        return SiteCandidates(tried)
    counts = default_stores(length) if options.stores is None else options.stores
    found_spending = spending(options.ks, counts, length, spending_policies(options.checkpoints), ROLLED_SPENDING_POLICIES)
    return SiteCandidates(tried, [c for c in found_spending if c not in tried])


def _mode(checkpoint: Any) -> bool | str | None:
    """The checkpoint mode a call wrote, as a `Settings` holds it: `True`, `False` or a policy's
    name (None if it is none of them)."""
    if isinstance(checkpoint, bool):
        return checkpoint
    return next((name for name in ALL_POLICIES if named_policy(name) is checkpoint), None)
