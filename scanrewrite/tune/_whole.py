"""The last measurement: the whole program with every site at its pick, against the original and
the program as written, timed together; and the report of the run."""

from __future__ import annotations

import time

import jax

from scanrewrite.tune._compile import BASELINE, memory_measure
from scanrewrite.tune._measure import measure
from scanrewrite.tune._progress import Progress
from scanrewrite.tune._report import Row, SiteReport, TuneReport
from scanrewrite.tune._session import Session


def measure_whole(session: Session, progress: Progress) -> list[Row]:
    """Rows for the original at every site, the program as written, and every site at its pick (one
    row with the written where the picks change nothing), timed in one interleaved run."""
    program, options = session.program, session.options
    final = session.config(session.picks)
    entries = [program.compile(config) for config in [BASELINE, (), *([final] if final != () else [])]]
    progress.begin(options.repeats, "whole program")
    timings = measure(
        program, entries, options.repeats, options.warmup, lambda: progress.advance("timing every site at its pick")
    )
    labels = [session.found.original, "as written", "every site at its pick"]
    if final == ():
        labels[1] = "as written = every site at its pick"
    rows = []
    for label, result, timing in zip(labels, entries, timings):
        error = result.error or (timing if isinstance(timing, str) else None)
        comparison = session.baseline.comparison if result is session.baseline else result.comparison
        rows.append(
            Row(label, None, result.compile_s, result.memory_bytes, None if error else timing, error, comparison=comparison)
        )
    return rows


def tune_report(session: Session, reports: list[SiteReport], whole: list[Row], started: float) -> TuneReport:
    """The run's report: each site's, the whole program's, and what the run cost."""
    device = jax.devices()[0]
    options = session.options
    differing = [(report.site, row) for report in reports for row in report.differing]
    differing += [(None, row) for row in whole[1:] if row.differs]
    return TuneReport(
        reports, whole, options.memory_budget, session.limit, options.repeats, options.warmup,
        f"{device.platform} ({device.device_kind}), jax {jax.__version__}",
        [error for report in reports for error in report.errors], differing, session.program.tolerance,
        picks_agree=not whole[-1].differs, wall_s=time.perf_counter() - started,
        compiled=session.program.compiled_count,
        not_compiled=sum(row.note.startswith("not compiled") for report in reports for row in report.rows),
        compile_threads=options.compile_threads, memory=memory_measure(device.platform),
    )  # fmt: skip
