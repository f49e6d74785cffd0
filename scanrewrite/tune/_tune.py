"""`tune`: measure each rewritten site's candidates with the others held fixed, and pick."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from scanrewrite.runtime import Settings, Site, Sites, named_policy
from scanrewrite.targets import ALL_POLICIES
from scanrewrite.tune import _rounding
from scanrewrite.tune._jaxpr import differing_site, narrowest_float, scan_lengths
from scanrewrite.tune._measure import BASELINE, Compiled, Config, Program
from scanrewrite.tune._predict import anchor, bases, fill, prune
from scanrewrite.tune._progress import Progress, Silent, Steps, planned_steps
from scanrewrite.tune._report import Row, SiteReport, TuneReport, describe_built, original_label
from scanrewrite.tune._select import (
    DEFAULT_KS,
    DEFAULT_LEVELS,
    LEVELS_MIN_STEPS,
    ROLLED_SPENDING_POLICIES,
    SPENDING_APIS,
    Budget,
    Candidate,
    Option,
    TuneError,
    candidates,
    changes,
    choose,
    default_stores,
    parse_ks,
    parse_levels,
    parse_policies,
    parse_stores,
    spending,
    spending_policies,
)
from scanrewrite.tune._verify import Tolerance


def _written(candidate: Candidate, written: Settings) -> bool:
    return not candidate.original and not candidate.changes(written)


def _config(settings: Mapping[Site, Candidate], written: Mapping[Site, Settings]) -> Config:
    """`settings` as a configuration: sorted, and without the sites left as written (so two
    requests for the same program are one compile)."""
    return tuple(sorted((s for s in settings.items() if not _written(s[1], written[s[0]])), key=_order))


def _order(item: tuple[Site, Candidate]) -> tuple:
    site, candidate = item
    return site, str(candidate)


def _planned_lengths(calls: Sites) -> dict[Site, int]:
    """The steps of each site's loop as the runtime planned it, where it did. Flax's loop is
    traced in Flax's frames, none at the site's line, so `scan_lengths` does not find it."""
    return {site: plans[0].steps for site, plans in calls.plans.items() if plans}


def _mode(checkpoint: Any) -> bool | str | None:
    """The checkpoint mode a call wrote, as a `Settings` holds it: `True`, `False` or a policy's
    name (None if it is none of them)."""
    if isinstance(checkpoint, bool):
        return checkpoint
    return next((name for name in ALL_POLICIES if named_policy(name) is checkpoint), None)


def tune(
    fn: Callable,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    checkpoints: str | Sequence[str] = (),
    levels: str | Sequence[int | str] = DEFAULT_LEVELS,
    keep_rewrites: bool = False,
    repeats: int = 10,
    warmup: int = 1,
    memory_budget: str | int | float | Budget | None = None,
    stores: str | Sequence[int] = "auto",
    compile_threads: int = 1,
    rtol: float | None = None,
    atol: float | None = None,
    progress: Progress | None = None,
) -> TuneReport:
    """Measure `unroll` (and optionally the checkpoint mode and `levels`) at every rewritten
    call that `fn(*args, **kwargs)` traces, on jax's default device, check that each
    configuration computes the original's numbers, and pick one per call site.

    **Arguments:**

    - `fn`, `args`, `kwargs`: the function to tune and its arguments, e.g. a training step
        returning loss and gradients. It is compiled whole with `jax.jit` for every
        configuration; array leaves of the arguments are its inputs, other leaves are held fixed.
    - `ks`: the chunk sizes to try at every site (the written `unroll` is always tried too).
    - `checkpoints`: checkpoint modes to try besides the written one, at every site but
        `eqxi_scan` ones (which have none): `"none"` (`checkpoint=False`), `"checkpoint"`
        (`True`), or names of `jax.checkpoint_policies` or of the runtime's own; each is tried with
        every k.
    - `levels`: the `levels` to try besides the written one, at sites of at least 64 steps
        but `eqxi_scan` ones (which have none); each is tried with every k and checkpoint
        mode. `()` tries none.
    - `keep_rewrites`: do not try the original scan at each site (so the pick is always a
        setting of the rewritten call).
    - `repeats`: timed calls of each configuration, interleaved across the configurations
        measured together, after `warmup` untimed calls of each.
    - `memory_budget`: a limit on XLA's compiled temp memory of the whole function: bytes
        (`"2GiB"`, an int), a fraction of lax.scan's (`"0.5x"`, `"50%"`), or a bare number up
        to 1 (`0.8`), a fraction of the device's memory. With a budget, `scan`, `nnx_scan` and
        `linen_scan` sites also try the programs that spend memory for speed:
        `reductions_saveable` at every k, stored steps (`stores`), the runtime's
        dots-and-reductions policies and those named in `checkpoints` on every step
        (`unroll=N`), also with stored steps, and the for-loop's program (`store=N`); of those,
        only the ones predicted to fit and win are compiled (`scanrewrite.tune._predict`).
    - `stores`: the stored steps to try under a budget, with every k: `"auto"` (1 and a
        quarter, half and three quarters of each site's steps) or ints; `()` tries none, nor
        the for-loop's program: nothing that spends memory.
    - `compile_threads`: how many candidates XLA compiles at a time (each is traced alone).
        More cut the tuner's wall time where compiling dominates (straight-line programs on an
        accelerator), and make each reported compile time that of one among several.
    - `rtol`, `atol`: the tolerance within which outputs count as the original's, for every
        float leaf; None takes each dtype's default (see `scanrewrite.tune._verify`), raised
        where `fn` computes in a float narrower than 32 bits to what rounding moves each leaf
        by (see `scanrewrite.tune._rounding`).
    - `progress`: told the number of steps of each stage, then each step (see `Progress`).

    **Returns:**

    A `TuneReport`. Every number is also given as a ratio to the same function with every site
    run as the call it replaced (`jax.lax.scan`, `equinox.internal.scan`, ...), measured in the
    same run. Sites are tuned one at a time, in the order first traced: the sites before hold
    their picks, the sites after what they wrote. Each site's pick is the fastest candidate
    (median step time) within the budget; among those within the measured noise of it, the
    original scan if it is one (the rewrite stays only where it helps), else the one with
    less temp memory, then the one closest to the setting written (`_select.changes`). The
    picks are then measured once more together. A candidate that fails
    to compile or run, or whose outputs (values and whatever else `fn` returns, gradients
    included) differ from the original's, is reported in its row (and in `errors` or
    `differing`) and not picked.

    Raises `TuneError` if `fn` traces no rewritten call, if the function fails as lax.scan, or
    if two compilations of it as lax.scan compute different numbers (then nothing can be
    checked; the site is named where the jaxprs tell it).
    """
    started = time.perf_counter()
    progress = progress or Silent()
    ks = parse_ks(list(ks))
    store_counts = parse_stores(stores)
    checkpoints = parse_policies(checkpoints)
    levels = parse_levels(levels)
    budget = memory_budget if isinstance(memory_budget, (Budget, type(None))) else Budget.parse(memory_budget)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise TuneError(f"`repeats` must be a positive int, got {repeats!r}")
    if isinstance(compile_threads, bool) or not isinstance(compile_threads, int) or compile_threads < 1:
        raise TuneError(f"`compile_threads` must be a positive int, got {compile_threads!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise TuneError(f"`warmup` must be a non-negative int, got {warmup!r}")
    for name, value in (("rtol", rtol), ("atol", atol)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
            raise TuneError(f"`{name}` must be a non-negative number, got {value!r}")

    program = Program(fn, args, kwargs or {}, Tolerance(rtol, atol))
    try:
        calls = program.sites()
    except Exception as exc:
        raise TuneError(f"the function fails when traced: {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    found = {site: call.settings for site, call in calls.items()}
    if not found:
        raise TuneError(
            "the function traces no rewritten call (scanrewrite.runtime.scan, eqxi_scan, fori_loop, "
            "map, nnx_scan or linen_scan); rewrite its scans with `scanrewrite` first"
        )
    jaxpr = program.jaxpr(BASELINE) if levels or budget or rtol is None else None
    lengths = {**_planned_lengths(calls), **(scan_lengths(jaxpr, list(found)) if jaxpr is not None else {})}
    precision = narrowest_float(jaxpr) if rtol is None and jaxpr is not None else None
    # Rounding in a narrow float moves an output's last bits by more than its own dtype's rtol.
    narrow = precision is not None and jnp.finfo(precision).bits < 32
    references = _rounding.references(calls, lengths) if narrow else []
    spend: dict[Site, list[Candidate]] = {}
    tried = {}
    for site, settings in found.items():
        options = calls[site].api != "eqxi_scan"  # it has neither checkpoint nor levels
        tried[site] = candidates(
            ks,
            [mode for mode in checkpoints if mode != _mode(settings.checkpoint)],
            written=settings.unroll,
            has_checkpoint=options,
            levels=[depth for depth in levels if depth != settings.or_defaults().levels]
            if options and lengths.get(site, 0) >= LEVELS_MIN_STEPS else (),
            original=not keep_rewrites,
            checkpointed=settings.checkpoint is not False,
        )
        if budget is not None and calls[site].api in SPENDING_APIS:
            length = lengths.get(site)
            counts = default_stores(length) if store_counts is None else store_counts
            found_spending = spending(ks, counts, length, spending_policies(checkpoints), ROLLED_SPENDING_POLICIES)
            spend[site] = [c for c in found_spending if c not in tried[site]]
    plan = lambda site: planned_steps(tried[site], spend.get(site, ()), repeats, lengths.get(site))
    progress.begin(2 + len(references) + sum(map(plan, found)), "tuning")

    # With several compiles at a time each compile time is one among several anyway, so only the
    # original is warmed up (its first compilation is also the check that it is deterministic),
    # and the program as written compiles beside it: two rounds of compiles fewer.
    first = program.warm_up([BASELINE] if compile_threads > 1 else [BASELINE, ()])
    labels = iter(["lax.scan at every site", "as written"])
    baseline, _ = program.compile_all([BASELINE, ()], compile_threads, lambda _: progress.advance(next(labels)))
    if baseline.error is not None:
        raise TuneError(f"the function with every site as lax.scan {baseline.error}")
    unstable = program.check_original(baseline, first)
    if unstable is not None:
        site = differing_site(lambda: program.jaxpr(BASELINE), list(found))
        where = f"the scan at {_name(site)}" if site is not None else "the function"
        raise TuneError(
            f"{where} computes different numbers each time it is compiled, even as lax.scan at every site "
            f"(max rel diff {unstable.max_rel_diff:.1e} between two compilations), so no candidate can be "
            "checked: look for values made at trace time (numpy random numbers, Python counters, caches)"
        )
    if references:
        names = iter(["checkpointed scan at every site", "for-loop's program at every site"])
        spread = _rounding.measure(
            program, references, first, precision, compile_threads, lambda _: progress.advance(f"rounding: {next(names)}")
        )
        program.tolerance = Tolerance(rtol, atol, spread, precision.name)
    stats = jax.devices()[0].memory_stats() or {}  # None on the CPU
    limit = budget.limit(baseline.temp_bytes, stats.get("bytes_limit")) if budget else None
    picks: dict[Site, Candidate] = {}
    reports: dict[Site, SiteReport] = {}
    errors: dict[Site, list[tuple[Site, str]]] = {}
    differing: dict[Site, list[Row]] = {}

    def tune_site(site: Site, settings: Settings, steps: Steps) -> SiteReport:
        """One site's round: each candidate compiled with the other sites held at their picks
        (or as written), all timed interleaved with lax.scan at every site; the pick."""
        held = {other: picks[other] for other in found if other != site and other in picks}
        compiled: list[tuple[Candidate, Compiled]] = []
        where = f"{os.path.basename(site.path)}:{site.line}"

        def compile_these(candidates: Sequence[Candidate]) -> None:
            names = iter(candidates)
            results = program.compile_all(
                [_config({**held, site: candidate}, found) for candidate in candidates],
                compile_threads,
                lambda _: steps.advance(f"{where} {next(names)}"),
            )
            compiled.extend(zip(candidates, results))

        def measured() -> dict[Candidate, int]:
            """The temp memory of each candidate compiled so far."""
            return {c: r.temp_bytes for c, r in compiled if r.temp_bytes is not None}

        spends = bool(spend.get(site)) and limit is not None
        first = anchor(spend[site]) if spends else None
        starts = [first, *bases(spend[site], lengths[site])] if first is not None else []
        # The programs the predictions start from are compiled beside the site's own candidates:
        # one round of compiles fewer, each a minute or more on an accelerator.
        compile_these([*tried[site], *starts])
        skipped: dict[Candidate, str] = {}
        if spends:
            # A start that failed to compile is not predicted again.
            done = {c for c, _ in compiled}
            chosen, skipped = prune([c for c in spend[site] if c not in done], measured(), lengths[site], limit)
            compile_these(chosen)
            if store_counts is None:
                done = {c for c, _ in compiled}  # a count that failed to compile is not measured
                filling = [c for c in fill(measured(), lengths[site], limit) if c not in done]
                spend[site] += [c for c in filling if c not in spend[site]]
                for candidate in filling:
                    skipped.pop(candidate, None)
                compile_these(filling)
            for _ in skipped:
                steps.advance(f"{where} predicted")
        # A program that spends memory is timed only where it fits (straight-line programs
        # over the budget may not even run), unless nothing does.
        fits = any(r.error is None and r.temp_bytes is not None and r.temp_bytes <= limit for _, r in compiled) if limit else False
        over = {
            id(r) for c, r in compiled
            if fits and c in spend.get(site, ()) and r.temp_bytes is not None and r.temp_bytes > limit
        }  # fmt: skip
        ok = [result for _, result in compiled if result.error is None and id(result) not in over]
        timings = program.time(
            [baseline, *ok], repeats, warmup,
            lambda: steps.advance(f"timing {where}"),
        )
        if isinstance(timings[0], str):
            raise TuneError(f"the function with every site as lax.scan {timings[0]}")
        timing_of = {id(result): timing for result, timing in zip(ok, timings[1:])}
        rows, options, errors[site], differing[site] = [], [], [], []
        row_of: list[Row] = []  # the row of each option
        for candidate, result in compiled:
            built = describe_built(result.plans.get(site, ()))
            if id(result) in over:
                rows.append(Row(
                    str(candidate), candidate, result.compile_s, result.temp_bytes, note="over budget: not timed",
                    built=built,
                ))  # fmt: skip
                continue
            timing = timing_of.get(id(result))
            error = result.error or (timing if isinstance(timing, str) else None)
            if error is not None:
                errors[site].append((site, f"{candidate}: {error}"))
                timing = None
            label = original_label(calls[site].api) if candidate.original else str(candidate)
            row = Row(
                label, candidate, result.compile_s, result.temp_bytes, timing, error, comparison=result.comparison,
                built=built,
            )
            written = _written(candidate, settings)
            if written:
                row.label += " (written)"
            if row.differs:
                row.note = "differs"
                differing[site].append(row)
            elif error is None and limit is not None and result.temp_bytes is not None and result.temp_bytes > limit:
                row.note = "over budget"
            rows.append(row)
            row_of.append(row)
            options.append(
                Option(
                    candidate, timing, result.temp_bytes, error, differs=row.differs, written=written,
                    program=result.program, changes=changes(candidate, settings),
                )
            )
        rows += [Row(str(candidate), candidate, note=why) for candidate, why in skipped.items()]
        chosen, reason = choose(options, limit)
        if chosen is not None:
            picks[site] = chosen.candidate
            row_of[options.index(chosen)].note = "pick"
        base_row = Row(
            "lax.scan at every site", None, baseline.compile_s, baseline.temp_bytes, timings[0],
            comparison=baseline.comparison,
        )
        program.forget([BASELINE, (), _config(picks, found)])
        steps.finish(f"{where} done")
        return SiteReport(site, calls[site].api, settings, base_row, rows, picks.get(site), reason)

    for site, settings in found.items():
        reports[site] = tune_site(site, settings, Steps(progress, plan(site)))
    # A site tuned early was held to the budget with the sites after it still as written; if
    # nothing fitted then, it took the least memory. Now that every site has its pick, it is
    # tuned once more (configurations already compiled are not compiled again).
    again = [site for site, report in reports.items() if report.over_budget and len(found) > 1]
    if again:
        progress.begin(sum(map(plan, again)), "tuning again")
    for site in again:
        reports[site] = tune_site(site, found[site], Steps(progress, plan(site)))
        reports[site].reason += "; tuned again with every other site at its pick"
    errors_flat = [error for site in found for error in errors[site]]

    final = _config(picks, found)
    whole_configs = [BASELINE, ()] + ([final] if final != () else [])
    entries = [program.compile(config) for config in whole_configs]
    progress.begin(repeats, "whole program")
    timings = program.time(entries, repeats, warmup, lambda: progress.advance("timing every site at its pick"))
    labels = ["lax.scan at every site", "as written", "every site at its pick"]
    if final == ():
        labels[1] = "as written = every site at its pick"
    whole = []
    for label, result, timing in zip(labels, entries, timings):
        error = result.error or (timing if isinstance(timing, str) else None)
        comparison = baseline.comparison if result is baseline else result.comparison
        row = Row(label, None, result.compile_s, result.temp_bytes, None if error else timing, error, comparison=comparison)
        whole.append(row)
    differing_flat: list[tuple[Site | None, Row]] = [(site, row) for site in found for row in differing[site]]
    differing_flat += [(None, row) for row in whole[1:] if row.differs]
    device = jax.devices()[0]
    not_compiled = sum(row.note.startswith("not compiled") for report in reports.values() for row in report.rows)
    return TuneReport(
        list(reports.values()), whole, budget, limit, repeats, warmup,
        f"{device.platform} ({device.device_kind}), jax {jax.__version__}", errors_flat,
        differing_flat, program.tolerance, picks_agree=not whole[-1].differs,
        wall_s=time.perf_counter() - started, compiled=program.compiled_count, not_compiled=not_compiled,
        compile_threads=compile_threads,
    )


def _name(site: Site) -> str:
    from scanrewrite.files import display_path

    return f"{display_path(site.path)}:{site.line}"
