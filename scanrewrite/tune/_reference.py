"""Stage 3, the reference: the original compiled, shown to compute the same numbers each time
it is compiled, and, in a narrow float, how far rounding alone moves each output.

Every candidate is checked against the original's outputs (`Program.reference`) within
`Program.tolerance`, which this stage settles."""

from __future__ import annotations

from scanrewrite.tune import _rounding
from scanrewrite.tune._compile import BASELINE, Compiled, Config, Program
from scanrewrite.tune._errors import TuneError
from scanrewrite.tune._jaxpr import differing_site
from scanrewrite.tune._options import TuneOptions
from scanrewrite.tune._progress import Progress
from scanrewrite.tune._report import site_name
from scanrewrite.tune._sites import Found
from scanrewrite.tune._verify import Tolerance

_ROUNDING_NAMES = ["rounding: checkpointed scan at every site", "rounding: steps stored at every site"]


def rounding_references(found: Found) -> list[Config]:
    """The programs equal to the original up to rounding, compiled where the function computes
    in a narrow float (`_rounding.references`); none elsewhere."""
    return _rounding.references(found.calls, found.lengths) if found.narrow else []


def compile_reference(program: Program, found: Found, options: TuneOptions, progress: Progress) -> Compiled:
    """The original (every site as the scan it replaced) compiled and run, its outputs the
    reference; the program as written compiled beside it; and the tolerance of the check
    raised to what rounding moves each output by where the function computes in a narrow float.

    Raises `TuneError` if the original fails, or computes other numbers when compiled again
    (then nothing can be checked; the site is named where the jaxprs tell it).
    """
    # With several compiles at a time each compile time is one among several anyway, so only the
    # original is warmed up (its first compilation is also the check that it is deterministic),
    # and the program as written compiles beside it: two rounds of compiles fewer.
    first = program.warm_up([BASELINE] if options.compile_threads > 1 else [BASELINE, ()])
    references = rounding_references(found)
    # The programs that measure rounding compile beside them where compiles share the machine
    # (on a TPU each is a minute or more); one at a time, each compile time stays its own.
    beside = references if options.compile_threads > 1 else []
    labels = iter([found.original, "as written", *_ROUNDING_NAMES[: len(beside)]])
    baseline, *_ = program.compile_all(
        [BASELINE, (), *beside], options.compile_threads, lambda _: progress.advance(next(labels))
    )
    if baseline.error is not None:
        raise TuneError(f"the function with {found.original} {baseline.error}")
    unstable = program.check_original(baseline, first)
    if unstable is not None:
        site = differing_site(lambda: program.jaxpr(BASELINE), found.sites)
        where = f"the scan at {site_name(site)}" if site is not None else "the function"
        raise TuneError(
            f"{where} computes different numbers each time it is compiled, even as {found.original} "
            f"(max rel diff {unstable.max_rel_diff:.1e} between two compilations), so no candidate can be "
            "checked: look for values made at trace time (numpy random numbers, Python counters, caches)"
        )
    if references:
        names = iter(_ROUNDING_NAMES)
        told = (lambda _: None) if beside else (lambda _: progress.advance(next(names)))  # told once
        spread, noise = _rounding.measure(program, references, first, found.precision, options.compile_threads, told)
        program.tolerance = Tolerance(options.rtol, options.atol, spread, found.precision.name, noise)
    return baseline
