"""One tuning run, as its stages share it: the program, the options, the sites and their
candidates, the reference, the budget in bytes, and the picks made so far."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scanrewrite.runtime import Site
from scanrewrite.tune._candidates import Candidate, SiteCandidates
from scanrewrite.tune._compile import BASELINE, Compiled, Config, Program
from scanrewrite.tune._options import TuneOptions
from scanrewrite.tune._report import SiteReport
from scanrewrite.tune._sites import Found


@dataclass
class Session:
    """The state the stages share. Only `keep` changes it once the reference is compiled: the
    picks grow, one site's round at a time."""

    program: Program
    options: TuneOptions
    found: Found
    candidates: dict[Site, SiteCandidates]
    #: The original compiled (`_reference.compile_reference`), timed beside every round.
    baseline: Compiled
    #: The memory budget in bytes; None without one (or where the original program's memory is unknown).
    limit: int | None
    picks: dict[Site, Candidate] = field(default_factory=dict)

    def config(self, settings: Mapping[Site, Candidate]) -> Config:
        """`settings` as a configuration: sorted, and without the sites left as written (so two
        requests for the same program are one compile)."""
        calls = self.found.calls
        changed = (item for item in settings.items() if not item[1].as_written(calls[item[0]].settings))
        return tuple(sorted(changed, key=lambda item: (item[0], str(item[1]))))

    def trying(self, site: Site, candidate: Candidate) -> Config:
        """The configuration of `candidate` at `site`, the sites picked before at their picks."""
        held = {other: pick for other, pick in self.picks.items() if other != site}
        return self.config({**held, site: candidate})

    def planned_steps(self, site: Site) -> int:
        return self.candidates[site].planned_steps(self.options.repeats, self.found.lengths.get(site))

    def keep(self, report: SiteReport) -> None:
        """Take the pick of a site's round, and let go of the programs no longer needed."""
        if report.pick is not None:
            self.picks[report.site] = report.pick
        self.program.forget([BASELINE, (), self.config(self.picks)])
