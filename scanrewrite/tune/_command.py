"""The `scanrewrite-tune` command: click only.

`scanrewrite-tune FILE.py:FACTORY` measures, prints the tables, and with `--diff`, `--write`
or `--check` shows, writes or checks the picks in the source. Exit codes as `scanrewrite`'s:
0 done, 1 `--check` found a site off its pick, 2 an error (one line each on stderr).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

import click

from scanrewrite.files import display_path
from scanrewrite.output import color_diff
from scanrewrite.targets import RUNTIME_POLICIES
from scanrewrite.tune._select import (
    DEFAULT_KS,
    DEFAULT_LEVELS,
    Budget,
    TuneError,
    parse_levels,
    parse_policies,
    parse_stores,
)

if TYPE_CHECKING:
    from scanrewrite.runtime import Site
    from scanrewrite.tune._writeback import FileChange

#: Where jax and equinox come from: the extra that rewritten programs need too.
INSTALL_HINT = "pip install 'scanrewrite[runtime]'"


class _Bar:
    """`Progress` on stderr through click's progress bar (drawn only on a terminal), a bar per
    stage, or with `lines` a line per step with the seconds since the start: a log of a run cut
    short then says how far it got, and where the time went."""

    def __init__(self, enabled: bool, lines: bool = False) -> None:
        self.enabled, self.lines = enabled, lines
        self.bar = None
        self.stage, self.done, self.total, self.start = "tuning", 0, 0, time.perf_counter()

    def begin(self, total: int, stage: str = "tuning") -> None:
        self.close()
        self.stage, self.done, self.total = stage, 0, total
        if self.enabled and not self.lines:
            self.bar = click.progressbar(
                length=total, label=stage, file=sys.stderr, show_pos=True, item_show_func=lambda item: item
            )
            self.bar.__enter__()

    def advance(self, label: str, steps: int = 1) -> None:
        if self.lines:
            self.done += steps
            elapsed = time.perf_counter() - self.start
            click.echo(f"{self.stage} {self.done}/{self.total}: {label} ({elapsed:.0f} s)", err=True)
        elif self.bar is not None:
            self.bar.update(steps, label)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def _ints(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated positive ints, got {value!r}") from None
    if not ks or min(ks) < 1:
        raise click.BadParameter(f"expected comma-separated positive ints, got {value!r}")
    return ks


def _parsed(parse):
    def callback(ctx: click.Context, param: click.Parameter, value):
        if value is None:
            return None
        try:
            return parse(value)
        except TuneError as exc:
            raise click.BadParameter(str(exc)) from None

    return callback


def _site_name(site: Site) -> str:
    return f"{display_path(site.path)}:{site.line}"


def _write_stdout(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("target", metavar="FILE.py:FACTORY")
@click.option(
    "--ks", default=",".join(map(str, DEFAULT_KS)), show_default=True, callback=_ints,
    help="Chunk sizes to try at each site, comma-separated (the written unroll is tried too).",
)
@click.option("--repeats", type=click.IntRange(min=1), default=10, show_default=True,
              help="Timed calls of each configuration, interleaved, after the warm-up.")
@click.option("--warmup", type=click.IntRange(min=0), default=1, show_default=True,
              help="Untimed calls of each configuration before timing.")
@click.option("--memory-budget", callback=_parsed(Budget.parse),
              help="Limit on compiled temp memory: bytes ('12GiB', '500MB'), a fraction of lax.scan's "
              "('0.5x', '50%') or of the device's memory ('0.8'). Then scan sites also try reductions_saveable at "
              "each k, stored steps, the runtime's dots-and-reductions policies (and --policies) on every step, and "
              "the for-loop's program, compiling only those predicted to fit and win.")
@click.option("--stores", default="auto", show_default=True, callback=_parsed(parse_stores),
              help="With --memory-budget: stored steps to try with each k, comma-separated, or 'auto' "
              "(1 and a quarter, half and three quarters of each site's steps); '' tries none, nor the for-loop's "
              "program.")
@click.option("--policies", default="", callback=_parsed(parse_policies),
              help="Checkpoint modes to try too, comma-separated: none (checkpoint=False), checkpoint, "
              f"jax.checkpoint_policies names, or the runtime's own ({', '.join(RUNTIME_POLICIES)}).")
@click.option("--levels", "levels", default=",".join(map(str, DEFAULT_LEVELS)), show_default=True,
              callback=_parsed(parse_levels),
              help="levels= to try too at sites of at least 64 steps (not eqxi.scan ones), comma-separated "
              "('1' tries no other).")
@click.option("--keep-rewrites", is_flag=True,
              help="Never pick the original scan at a site (by default a site where it is as fast, within "
              "the budget, is reverted to it).")
@click.option("--compile-threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Programs XLA compiles at a time: more cut the tuner's wall time where compiling dominates "
              "(straight-line programs on an accelerator), and make each compile time one among several.")
@click.option("--rtol", type=click.FloatRange(min=0), default=None,
              help="Relative tolerance of the check that each configuration computes the original's numbers "
              "[default: by dtype, 1e-4 for float32, 1e-9 for float64].")
@click.option("--atol", type=click.FloatRange(min=0), default=None,
              help="Absolute tolerance of that check [default: the dtype's smallest normal number].")
@click.option("--diff", is_flag=True,
              help="Print the unified diff that writes each site's pick (tables go to stderr).")
@click.option("--write", is_flag=True, help="Write the picks into the source.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if a site's written settings are off its pick.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar; errors and the tables only.")
@click.option("-v", "--verbose", is_flag=True,
              help="A line per step instead of the bar, with the seconds since the start (for logs).")
@click.option("--color/--no-color", default=None,
              help="Colour the diff [default: on a terminal, unless NO_COLOR is set].")
def main(target, ks, repeats, warmup, memory_budget, stores, policies, levels, keep_rewrites, compile_threads, rtol,
         atol, diff, write, check, quiet, verbose, color) -> None:
    """Measure unroll (and checkpoint modes, levels) at each rewritten scan call that
    FACTORY's function traces, on this machine's default jax device, check that each
    configuration computes the original's numbers, and pick the fastest within the memory
    budget; where the original scan is as fast, pick it.

    FACTORY, a function in FILE.py, returns (fn, args) or (fn, args, kwargs), e.g. a training
    step returning loss and gradients and its inputs. Exit codes: 0 done, 1 --check found a
    site off its pick, 2 an error (a candidate that failed or computes different numbers
    included).
    """
    if write and check:
        raise click.UsageError("--write and --check cannot be used together")
    if quiet and verbose:
        raise click.UsageError("--quiet and --verbose cannot be used together")
    options = dict(
        ks=ks, checkpoints=policies, levels=levels, keep_rewrites=keep_rewrites, repeats=repeats, warmup=warmup,
        memory_budget=memory_budget, stores="auto" if stores is None else stores, compile_threads=compile_threads,
        rtol=rtol, atol=atol,
    )
    sys.exit(_run(target, options, diff, write, check, _Bar(enabled=not quiet, lines=verbose), color))


def _error(message: str) -> None:
    click.echo(f"error: {message}", err=True)


def _run(target, options, diff, write, check, bar: _Bar, color) -> int:
    try:
        from scanrewrite.tune._tune import tune
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in ("jax", "jaxlib", "equinox", "numpy"):
            raise
        _error(f"scanrewrite-tune runs your program with jax, and {exc.name} is not installed: {INSTALL_HINT}")
        return 2
    from scanrewrite.tune._factory import load

    try:
        fn, args, kwargs = load(target)
        report = tune(fn, args, kwargs, progress=bar, **options)
    except TuneError as exc:
        bar.close()
        _error(str(exc))
        return 2
    bar.close()
    status = 0
    click.echo(report.table(_site_name), err=diff)
    for site, message in report.errors:
        _error(f"{_site_name(site)}: {message}")
        status = 2
    for site, row in report.differing:
        where = _site_name(site) if site is not None else "the whole program"
        _error(f"{where}: {row.label.removesuffix(' (written)')} computes different numbers (max rel diff {row.comparison.max_rel_diff:.1e})")
        status = 2
    if not report.picks_agree:
        _error("the picks together compute different numbers: nothing is written")
    off_sites = [site for site in report.sites if site.pick is not None and _off(site.pick, site.written)]
    summary = f"{_plural(len(report.sites), 'site')} tuned, {len(off_sites)} with a pick other than what is written"
    if not (diff or write or check):
        click.echo(summary + (" (--diff shows the change, --write makes it)" if off_sites else ""), err=True)
        return status
    from scanrewrite.tune._writeback import plan

    diff_color = color if color is not None else not os.environ.get("NO_COLOR") and sys.stdout.isatty()
    off = 0
    for change in plan(report.picks):
        for line, note in change.notes:
            click.echo(f"{change.display}:{line}: not written: {note}", err=True)
        if change.error is not None:
            line, message = change.error
            _error(f"{change.display}{'' if line is None else f':{line}'}: {message}")
            status = 2
            continue
        if not change.changed:
            continue
        off += 1
        if diff:
            _write_stdout(color_diff(change.diff()) if diff_color else change.diff())
        if write:
            change.write()
            if change.error is not None:
                _error(f"{change.display}: {change.error[1]}")
                status = 2
            else:
                _imports(change, "removed", "added")
                click.echo(f"wrote the picks into {change.display}", err=True)
        elif check:
            _imports(change, "would remove", "would add")
            click.echo(f"would write the picks into {change.display}", err=True)
    verb = "written" if write else "would be written"
    click.echo(f"{summary}; {_plural(off, 'file')} {verb}" if off else summary, err=True)
    if check and off and status == 0:
        return 1
    return status


def _imports(change: FileChange, removed: str, added: str) -> None:
    """Say each import the write-back of `change` removes and adds, as `scanrewrite -v` does: a
    scan written back is spelled through `import jax` where the rewrite removed the import it had
    (`from jax.lax import scan`)."""
    if change.imports is None:
        return
    for verb, changed in ((removed, change.imports.removed), (added, change.imports.added)):
        for line, statement in changed:
            click.echo(f"{change.display}:{line}: {verb} {statement!r}", err=True)


def _off(pick, written) -> bool:
    """Whether writing `pick` changes the call, which wrote `written`."""
    return pick.original or bool(pick.changes(written))


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
