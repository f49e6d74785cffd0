"""The end of a site's round: its rows from the measurements (each verified against the
original as it ran, `_verify`), and the pick among them (`_choose`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scanrewrite.runtime import Settings, Site
from scanrewrite.tune._candidates import Candidate
from scanrewrite.tune._choose import Option, Timing, changes, choose
from scanrewrite.tune._compile import Compiled
from scanrewrite.tune._report import Row, SiteReport, describe_built, original_label
from scanrewrite.tune._session import Session


def site_report(
    session: Session,
    site: Site,
    results: Sequence[tuple[Candidate, Compiled]],
    over: set[int],
    timing_of: Mapping[int, Timing | str],
    baseline_timing: Timing,
    skipped: Mapping[Candidate, str],
) -> SiteReport:
    """The report of a site's round: a row per candidate in the order compiled (those over the
    budget untimed, those predicted out last, with why), its errors and the rows that compute
    other numbers, and the pick, its row marked."""
    report = SiteReport(
        site, session.found.calls[site].api, session.found.calls[site].settings,
        Row(session.found.original, None, session.baseline.compile_s, session.baseline.memory_bytes,
            baseline_timing, comparison=session.baseline.comparison),
        [], None, "",
    )  # fmt: skip
    options: list[Option] = []
    row_of: list[Row] = []  # the row of each option
    for candidate, result in results:
        row = _row(session, report, candidate, result, id(result) in over, timing_of.get(id(result)))
        report.rows.append(row)
        if id(result) not in over:
            row_of.append(row)
            options.append(_option(candidate, result, row, report.written))
    report.rows += [Row(str(candidate), candidate, note=why) for candidate, why in skipped.items()]
    chosen, report.reason = choose(options, session.limit)
    if chosen is not None:
        row_of[options.index(chosen)].note = "pick"
    report.pick = chosen.candidate if chosen is not None else session.picks.get(site)
    return report


def _row(
    session: Session, report: SiteReport, candidate: Candidate, result: Compiled, over: bool, timing: Timing | str | None
) -> Row:
    """The row of one candidate; an error (compiling or running) goes to `report.errors`, a
    row whose numbers differ to `report.differing`."""
    built = describe_built(result.plans.get(report.site, ()))
    if over:
        return Row(str(candidate), candidate, result.compile_s, result.memory_bytes, note="over budget: not timed", built=built)
    error = result.error or (timing if isinstance(timing, str) else None)
    if error is not None:
        report.errors.append((report.site, f"{candidate}: {error}"))
        timing = None
    label = original_label(report.kind) if candidate.original else str(candidate)
    row = Row(label, candidate, result.compile_s, result.memory_bytes, timing, error, comparison=result.comparison, built=built)
    if candidate.as_written(report.written):
        row.label += " (written)"
    limit = session.limit
    if row.differs:
        row.note = "differs"
        report.differing.append(row)
    elif error is None and limit is not None and result.memory_bytes is not None and result.memory_bytes > limit:
        row.note = "over budget"
    return row


def _option(candidate: Candidate, result: Compiled, row: Row, written: Settings) -> Option:
    """What the pick sees of one candidate's row."""
    return Option(
        candidate, row.timing, result.memory_bytes, row.error, differs=row.differs,
        written=candidate.as_written(written), program=result.program,
        changes=changes(candidate, written),
    )  # fmt: skip
