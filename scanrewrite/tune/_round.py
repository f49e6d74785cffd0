"""One site's round: its candidates compiled with the other sites held at their picks (or as
written), those that spend memory predicted first, all timed interleaved with the original.

The stages of a round, in order: compile (`_compile`), predict what spends memory (`_predict`),
measure (`_measure`, each first output verified as it comes, `_verify`), and choose (`_rows`,
`_choose`)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from scanrewrite.runtime import Site
from scanrewrite.tune._candidates import Candidate
from scanrewrite.tune._compile import Compiled
from scanrewrite.tune._errors import TuneError
from scanrewrite.tune._jaxpr import kept_at_least
from scanrewrite.tune._measure import measure
from scanrewrite.tune._predict import anchor, bases, fill, prune
from scanrewrite.tune._progress import Steps
from scanrewrite.tune._report import SiteReport, format_bytes
from scanrewrite.tune._rows import site_report
from scanrewrite.tune._session import Session

#: A round's candidates, each with what compiling it gave, in the order compiled.
Results = list[tuple[Candidate, Compiled]]


def tune_site(session: Session, site: Site, steps: Steps) -> SiteReport:
    """The round of `site`: its report, with the pick (`_choose.site_report`). Raises
    `TuneError` if the original fails when timed."""
    where = f"{os.path.basename(site.path)}:{site.line}"
    listed, limit = session.candidates[site], session.limit
    spends = bool(listed.spend) and limit is not None
    first = anchor(listed.spend) if spends else None
    floors = _too_large(session, site, listed.spend) if spends else {}
    starts = [first, *bases(listed.spend, session.found.lengths[site])] if first is not None else []
    # The programs the predictions start from are compiled beside the site's own candidates:
    # one round of compiles fewer, each a minute or more on an accelerator.
    results = _compile(session, site, [*listed.tried, *(c for c in starts if c not in floors)], steps, where)
    skipped: dict[Candidate, str] = {}
    if spends:
        results, skipped = _spend(session, site, results, steps, where, floors)
    over = _over_budget(session, site, results)
    ok = [result for _, result in results if result.error is None and id(result) not in over]
    options = session.options
    timings = measure(
        session.program, [session.baseline, *ok], options.repeats, options.warmup,
        lambda: steps.advance(f"timing {where}"),
    )  # fmt: skip
    if isinstance(timings[0], str):
        raise TuneError(f"the function with {session.found.original} {timings[0]}")
    timing_of = {id(result): timing for result, timing in zip(ok, timings[1:])}
    report = site_report(session, site, results, over, timing_of, timings[0], skipped)
    steps.finish(f"{where} done")
    return report


def _compile(session: Session, site: Site, candidates: Sequence[Candidate], steps: Steps, where: str) -> Results:
    names = iter(candidates)
    compiled = session.program.compile_all(
        [session.trying(site, candidate) for candidate in candidates],
        session.options.compile_threads,
        lambda _: steps.advance(f"{where} {next(names)}"),
    )
    return list(zip(candidates, compiled))


def _measured(results: Results) -> dict[Candidate, int]:
    """The memory of each candidate compiled so far."""
    return {c: r.memory_bytes for c, r in results if r.memory_bytes is not None}


def _too_large(session: Session, site: Site, spending: list[Candidate]) -> dict[Candidate, int]:
    """The candidates with a policy on every step (no stored steps) whose program keeps more
    than the budget by `kept_at_least`, with that bound: their jaxprs traced, not compiled (at a
    Flax site such a program took 100 s and more to compile on a TPU v5e)."""
    found: dict[Candidate, int] = {}
    for base in bases(spending, session.found.lengths[site]):
        try:
            floor = kept_at_least(session.program.jaxpr(session.trying(site, base)))
        except Exception:  # compiling it reports the failure in its row
            continue
        if floor > session.limit:
            found[base] = floor
    return found


def _spend(
    session: Session, site: Site, results: Results, steps: Steps, where: str, floors: dict[Candidate, int]
) -> tuple[Results, dict[Candidate, str]]:
    """`results` with the candidates that spend memory compiled where predicted to fit and win
    (and, with `stores` auto, the stored counts predicted to fill the budget), and those left
    out with why. A policy on every step in `floors` (`_too_large`) is left out, and its stored
    counts are predicted from its bound as from its compiled memory."""
    listed, length, limit = session.candidates[site], session.found.lengths[site], session.limit
    skipped = {c: f"not compiled: {c} keeps at least {format_bytes(floor)}, over the budget" for c, floor in floors.items()}
    done = {c for c, _ in results} | set(skipped)  # a start that failed to compile is not predicted again
    chosen, predicted = prune([c for c in listed.spend if c not in done], {**_measured(results), **floors}, length, limit)
    skipped.update(predicted)
    results = results + _compile(session, site, chosen, steps, where)
    if session.options.stores is None:
        done = {c for c, _ in results}  # a count that failed to compile is not measured
        filling = [c for c in fill(_measured(results), length, limit) if c not in done]
        listed.spend += [c for c in filling if c not in listed.spend]
        for candidate in filling:
            skipped.pop(candidate, None)
        results = results + _compile(session, site, filling, steps, where)
    for _ in skipped:
        steps.advance(f"{where} predicted")
    return results, skipped


def _over_budget(session: Session, site: Site, results: Results) -> set[int]:
    """The results (by id) of the candidates that spend memory and are over the budget: not
    timed (a straight-line program over it may not even run), unless nothing fits."""
    limit = session.limit
    if not limit:
        return set()
    fits = any(r.error is None and r.memory_bytes is not None and r.memory_bytes <= limit for _, r in results)
    spend = session.candidates[site].spend
    return {
        id(r) for c, r in results
        if fits and c in spend and r.memory_bytes is not None and r.memory_bytes > limit
    }  # fmt: skip
