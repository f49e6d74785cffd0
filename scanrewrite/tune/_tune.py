"""`tune`: measure each rewritten site's candidates with the others held fixed, and pick.

A pipeline of stages, each in the module its name says:

1. find the sites (`_sites`);
2. list the candidates (`_candidates`);
3. compile and check the reference, the original (`_reference`, `_rounding`);
4. site by site, a round (`_round`): compile (`_compile`), predict what spends memory
   (`_predict`), measure (`_measure`), verify (`_verify`), choose (`_rows`, `_choose`);
5. the whole program at its picks (`_whole`);
6. write back, which is the command's (`_writeback`).

The stages share one `Session` (`_session`), which only the rounds' picks change; the options
are one `TuneOptions` (`_options`).
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from scanrewrite.tune._candidates import list_candidates
from scanrewrite.tune._compile import Compiled, Program
from scanrewrite.tune._options import TUNE_OPTIONS, TuneOptions, merged
from scanrewrite.tune._progress import Progress, Silent, Steps
from scanrewrite.tune._reference import compile_reference, rounding_references
from scanrewrite.tune._report import SiteReport, TuneReport
from scanrewrite.tune._round import tune_site
from scanrewrite.tune._session import Session
from scanrewrite.tune._sites import find_sites
from scanrewrite.tune._verify import Tolerance
from scanrewrite.tune._whole import measure_whole, tune_report


def tune(
    fn: Callable,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    options: TuneOptions | None = None,
    *,
    progress: Progress | None = None,
    **changes: Any,
) -> TuneReport:
    """Measure `unroll` (and optionally the checkpoint mode, `levels` and, under a memory
    budget, what spends memory for speed) at every rewritten call that `fn(*args, **kwargs)`
    traces, on jax's default device, check that each configuration computes the original's
    numbers, and pick one per call site.

    **Arguments:**

    - `fn`, `args`, `kwargs`: the function to tune and its arguments, e.g. a training step
        returning loss and gradients. It is compiled whole with `jax.jit` for every
        configuration; array leaves of the arguments are its inputs, other leaves are held fixed.
    - `options`: a [`TuneOptions`][scanrewrite.tune.TuneOptions] (what to try, how long to
        measure, how closely to check); its defaults if None.
    - `progress`: told the number of steps of each stage, then each step (see `Progress`).
    - `**changes`: options by name, `tune(fn, args, ks=(1, 4), memory_budget="2GiB")`.

    **Returns:**

    A `TuneReport`, every number also a ratio to the function with every site run as the call
    it replaced, measured in the same run. Sites are tuned in the order first traced, those
    before holding their picks, those after what they wrote; a pick is the fastest candidate
    within the budget (ties within noise: the original scan, else the least memory, then the
    setting closest to what is written; see `docs/tuning.md`), and the picks are measured once
    more together. A candidate that fails, or whose outputs (gradients included) differ from the
    original's, is reported in its row (and in `errors` or `differing`) and not picked.

    Raises `TuneError` for an option that is not valid, if `fn` traces no rewritten call, if the
    function fails as lax.scan, or if two compilations of it as lax.scan compute different
    numbers (then nothing can be checked; the site is named where the jaxprs tell it); and
    `TypeError` for a change that names no option.
    """
    started = time.perf_counter()
    options = merged(options, changes)
    progress = progress or Silent()
    program = Program(fn, args, kwargs or {}, Tolerance(options.rtol, options.atol))
    found = find_sites(program, options)
    candidates = list_candidates(found, options)
    planned = sum(each.planned_steps(options.repeats, found.lengths.get(site)) for site, each in candidates.items())
    progress.begin(2 + len(rounding_references(found)) + planned, "tuning")
    baseline = compile_reference(program, found, options, progress)
    session = Session(program, options, found, candidates, baseline, _limit(options, baseline))
    reports = {site: _round(session, site, progress) for site in found.sites}  # in order: picks accumulate
    # A site tuned early was held to the budget with the sites after it still as written; if
    # nothing fitted then, it took the least memory. Now that every site has its pick, it is
    # tuned once more (configurations already compiled are not compiled again).
    again = [site for site, report in reports.items() if report.over_budget and len(reports) > 1]
    if again:
        progress.begin(sum(map(session.planned_steps, again)), "tuning again")
    for site in again:
        reports[site] = _round(session, site, progress)
        reports[site].reason += "; tuned again with every other site at its pick"
    return tune_report(session, list(reports.values()), measure_whole(session, progress), started)


def _signature() -> inspect.Signature:
    """`tune`'s signature with each option a keyword of its own, its default `TuneOptions`'
    (what `help(tune)` and an editor show): made from the table, as the command's flags are."""
    fixed = [p for p in inspect.signature(tune).parameters.values() if p.kind is not p.VAR_KEYWORD]
    types = {field.name: field.type for field in dataclasses.fields(TuneOptions)}
    named = [
        inspect.Parameter(each.name, inspect.Parameter.KEYWORD_ONLY, default=each.default, annotation=types[each.name])
        for each in TUNE_OPTIONS
    ]
    return inspect.signature(tune).replace(parameters=[*fixed, *named])


tune.__signature__ = _signature()  # type: ignore[attr-defined]


def _round(session: Session, site, progress: Progress) -> SiteReport:
    report = tune_site(session, site, Steps(progress, session.planned_steps(site)))
    session.keep(report)
    return report


def _limit(options: TuneOptions, baseline: Compiled) -> int | None:
    """The memory budget in bytes: a fraction of the original's memory (`_compile.judged_bytes`), or of the device's."""
    if options.memory_budget is None:
        return None
    stats = jax.devices()[0].memory_stats() or {}  # None on the CPU
    return options.memory_budget.limit(baseline.memory_bytes, stats.get("bytes_limit"))
