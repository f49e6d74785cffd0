"""`tune`: measure each rewritten site's candidates with the others held fixed, and pick."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import jax

from scanrewrite.runtime._override import Site
from scanrewrite.tune._measure import BASELINE, Config, Program
from scanrewrite.tune._report import Row, SiteReport, TuneReport
from scanrewrite.tune._select import (
    DEFAULT_KS,
    Budget,
    Candidate,
    Option,
    Timing,
    TuneError,
    candidates,
    choose,
    parse_ks,
    parse_policies,
)


class Progress(Protocol):
    """Told the number of steps once, then each step as it ends (a compile or a timed round)."""

    def begin(self, total: int) -> None: ...

    def advance(self, label: str) -> None: ...


class _Silent:
    def begin(self, total: int) -> None:
        pass

    def advance(self, label: str) -> None:
        pass


def _written(candidate: Candidate, written: Mapping[str, Any]) -> bool:
    unroll = written.get("unroll")
    return candidate.checkpoint is None and not isinstance(unroll, bool) and candidate.unroll == unroll


def _config(settings: Mapping[Site, Candidate], written: Mapping[Site, Mapping[str, Any]]) -> Config:
    """`settings` as a configuration: sorted, and without the sites left as written (so two
    requests for the same program are one compile)."""
    return tuple(sorted((site, c) for site, c in settings.items() if not _written(c, written[site])))


def tune(
    fn: Callable,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    checkpoints: str | Sequence[str] = (),
    repeats: int = 10,
    warmup: int = 1,
    memory_budget: str | int | float | Budget | None = None,
    progress: Progress | None = None,
) -> TuneReport:
    """Measure `unroll` (and optionally the checkpoint mode) at every rewritten call that
    `fn(*args, **kwargs)` traces, on jax's default device, and pick one per call site.

    **Arguments:**

    - `fn`, `args`, `kwargs`: the function to tune and its arguments, e.g. a training step
        returning loss and gradients. It is compiled whole with `jax.jit` for every
        configuration; array leaves of the arguments are its inputs, other leaves are held fixed.
    - `ks`: the chunk sizes to try at every site (the written `unroll` is always tried too).
    - `checkpoints`: checkpoint modes to try besides the written one, at `scan` sites
        (`eqxi_scan` has none): `"none"` (`checkpoint=False`), `"checkpoint"` (`True`), or names
        of `jax.checkpoint_policies`; each is tried with every k.
    - `repeats`: timed calls of each configuration, interleaved across the configurations
        measured together, after `warmup` untimed calls of each.
    - `memory_budget`: a limit on XLA's compiled temp memory of the whole function: bytes
        (`"2GiB"`, an int), or a fraction of lax.scan's (`"0.5x"`, `"50%"`).
    - `progress`: told the number of steps, then each step (see `Progress`).

    **Returns:**

    A `TuneReport`. Every number is also given as a ratio to the same function with every site
    run as the scan it replaced (`jax.lax.scan` / `equinox.internal.scan`), measured in the
    same run. Sites are tuned one at a time, in the order first traced: the sites before hold
    their picks, the sites after what they wrote. Each site's pick is the fastest candidate
    (median step time) within the budget; among those within the measured noise of it, the
    one with less temp memory. The picks are then measured once more together. A candidate
    that fails to compile or run is reported in its row (and in `errors`) and not picked.

    Raises `TuneError` if `fn` traces no rewritten call, or if the function fails as lax.scan.
    """
    progress = progress or _Silent()
    ks = parse_ks(list(ks))
    checkpoints = parse_policies(checkpoints)
    budget = memory_budget if isinstance(memory_budget, Budget) or memory_budget is None else Budget.parse(memory_budget)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise TuneError(f"`repeats` must be a positive int, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise TuneError(f"`warmup` must be a non-negative int, got {warmup!r}")

    program = Program(fn, args, kwargs or {})
    try:
        found = program.sites()
    except Exception as exc:
        raise TuneError(f"the function fails when traced: {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    if not found:
        raise TuneError(
            "the function traces no rewritten call (scanrewrite.runtime.scan or eqxi_scan); "
            "rewrite its scans with `scanrewrite` first"
        )
    tried = {
        site: candidates(
            ks, checkpoints, written=settings.get("unroll"), has_checkpoint="checkpoint" in settings
        )
        for site, settings in found.items()
    }
    progress.begin(2 + sum(map(len, tried.values())) + (len(found) + 1) * repeats)

    baseline = program.compile(BASELINE)
    progress.advance("lax.scan at every site")
    if baseline.error is not None:
        raise TuneError(f"the function with every site as lax.scan {baseline.error}")
    as_written = program.compile(())
    progress.advance("as written")
    base_row = lambda timing: Row(
        "lax.scan at every site", None, baseline.compile_s, baseline.temp_bytes, timing
    )
    limit = budget.limit(baseline.temp_bytes) if budget else None
    errors: list[str] = []
    picks: dict[Site, Candidate] = {}
    reports = []
    for site, settings in found.items():
        held = {other: picks.get(other) for other in found if other != site}
        compiled = []
        for candidate in tried[site]:
            config = _config(
                {**{s: c for s, c in held.items() if c is not None}, site: candidate}, found
            )
            compiled.append((candidate, config, program.compile(config)))
            progress.advance(f"{site.path.rsplit('/', 1)[-1]}:{site.line} {candidate}")
        ok = [entry for entry in compiled if entry[2].error is None]
        timings = program.time(
            [program.compile(BASELINE)] + [c for _, _, c in ok], repeats, warmup,
            lambda: progress.advance(f"timing {site.line}"),
        )
        if isinstance(timings[0], str):
            raise TuneError(f"the function with every site as lax.scan {timings[0]}")
        timing_of = {id(c): t for (_, _, c), t in zip(ok, timings[1:])}
        rows, options = [], []
        for candidate, config, result in compiled:
            timing = timing_of.get(id(result))
            error = result.error or (timing if isinstance(timing, str) else None)
            if error is not None:
                errors.append(f"{site}: {candidate}: {error}")
                timing = None
            row = Row(str(candidate), candidate, result.compile_s, result.temp_bytes, timing, error)
            if _written(candidate, settings):
                row.label += " (written)"
            rows.append(row)
            options.append(Option(candidate, timing, result.temp_bytes, error))
        if limit is not None:
            for row in rows:
                if row.error is None and row.temp_bytes is not None and row.temp_bytes > limit:
                    row.note = "over budget"
        chosen, reason = choose(options, limit)
        if chosen is not None:
            picks[site] = chosen.candidate
            rows[options.index(chosen)].note = "pick"
        reports.append(SiteReport(
            site, "scan" if "checkpoint" in settings else "eqxi_scan", dict(settings),
            base_row(timings[0]), rows, picks.get(site), reason,
        ))
        keep = [BASELINE, (), _config(picks, found)]
        program.forget(keep)

    final = _config(picks, found)
    whole_configs = [BASELINE, ()] + ([final] if final != () else [])
    entries = [program.compile(config) for config in whole_configs]
    timings = program.time(entries, repeats, warmup, lambda: progress.advance("whole program"))
    labels = ["lax.scan at every site", "as written", "every site at its pick"]
    if final == ():
        labels[1] = "as written = every site at its pick"
    whole = []
    for label, result, timing in zip(labels, entries, timings):
        error = result.error or (timing if isinstance(timing, str) else None)
        whole.append(Row(label, None, result.compile_s, result.temp_bytes,
                         None if error else timing, error))
    device = jax.devices()[0]
    return TuneReport(
        reports, whole, budget, limit, repeats, warmup,
        f"{device.platform} ({device.device_kind}), jax {jax.__version__}", errors,
    )
