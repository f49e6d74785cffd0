"""The `scanrewrite-tune` command: click only.

`scanrewrite-tune FILE.py:FACTORY` measures, prints the tables, and with `--diff`, `--write`
or `--check` shows, writes or checks the picks in the source. Exit codes as `scanrewrite`'s:
0 done, 1 `--check` found a site off its pick, 2 an error (one line each on stderr).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, NamedTuple

import click

from scanrewrite.flags import with_flags
from scanrewrite.output import color_diff
from scanrewrite.tune._errors import TuneError
from scanrewrite.tune._options import TUNE_OPTIONS, TuneOptions, from_flags

if TYPE_CHECKING:
    from scanrewrite.tune._report import TuneReport
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


class Output(NamedTuple):
    """What the command does with the picks: `--diff`, `--write`, `--check`, and `--color`
    (None: on a terminal, unless NO_COLOR is set)."""

    diff: bool = False
    write: bool = False
    check: bool = False
    color: bool | None = None


def _write_stdout(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("target", metavar="FILE.py:FACTORY")
@with_flags(TUNE_OPTIONS)
@click.option("--diff", is_flag=True,
              help="Print the unified diff that writes each site's pick (tables go to stderr).")
@click.option("--write", is_flag=True, help="Write the picks into the source.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if a site's written settings are off its pick.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar; errors and the tables only.")
@click.option("-v", "--verbose", is_flag=True,
              help="A line per step instead of the bar, with the seconds since the start (for logs).")
@click.option("--color/--no-color", default=None,
              help="Colour the diff [default: on a terminal, unless NO_COLOR is set].")
def main(target, diff, write, check, quiet, verbose, color, **flags) -> None:
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
    out = Output(diff=diff, write=write, check=check, color=color)
    sys.exit(_run(target, from_flags(flags), out, _Bar(enabled=not quiet, lines=verbose)))


def _error(message: str) -> None:
    click.echo(f"error: {message}", err=True)


def _run(target: str, options: TuneOptions, out: Output, bar: _Bar) -> int:
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
        report = tune(fn, args, kwargs, options, progress=bar)
    except TuneError as exc:
        bar.close()
        _error(str(exc))
        return 2
    bar.close()
    status = _show(report, out)
    off_sites = [site for site in report.sites if site.pick is not None and not site.pick.as_written(site.written)]
    summary = f"{_plural(len(report.sites), 'site')} tuned, {len(off_sites)} with a pick other than what is written"
    if not (out.diff or out.write or out.check):
        click.echo(summary + (" (--diff shows the change, --write makes it)" if off_sites else ""), err=True)
        return status
    off, written = _write_back(report, out)
    verb = "written" if out.write else "would be written"
    click.echo(f"{summary}; {_plural(off, 'file')} {verb}" if off else summary, err=True)
    status = max(status, written)
    if out.check and off and status == 0:
        return 1
    return status


def _show(report: TuneReport, out: Output) -> int:
    """Print the tables (on stderr where stdout takes the diff), and an error line for each
    candidate that failed or computes other numbers; 2 if there is one, else 0."""
    from scanrewrite.tune._report import (
        site_name,  # imports what measured: jax is installed
    )

    status = 0
    click.echo(report.table(site_name), err=out.diff)
    for site, message in report.errors:
        _error(f"{site_name(site)}: {message}")
        status = 2
    for site, row in report.differing:
        where = site_name(site) if site is not None else "the whole program"
        diff = row.comparison.max_rel_diff
        _error(f"{where}: {row.label.removesuffix(' (written)')} computes different numbers (max rel diff {diff:.1e})")
        status = 2
    if not report.picks_agree:
        _error("the picks together compute different numbers: nothing is written")
    return status


def _write_back(report: TuneReport, out: Output) -> tuple[int, int]:
    """Show, write or check the picks in each file, as `out` asks: the number of files off their
    picks, and 2 if one could not be read, parsed or written (else 0)."""
    from scanrewrite.tune._writeback import plan

    color = out.color if out.color is not None else not os.environ.get("NO_COLOR") and sys.stdout.isatty()
    off = status = 0
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
        if out.diff:
            _write_stdout(color_diff(change.diff()) if color else change.diff())
        if out.write:
            change.write()
            if change.error is not None:
                _error(f"{change.display}: {change.error[1]}")
                status = 2
            else:
                _imports(change, "removed", "added")
                click.echo(f"wrote the picks into {change.display}", err=True)
        elif out.check:
            _imports(change, "would remove", "would add")
            click.echo(f"would write the picks into {change.display}", err=True)
    return off, status


def _imports(change: FileChange, removed: str, added: str) -> None:
    """Say each import the write-back of `change` removes and adds, as `scanrewrite -v` does: a
    scan written back is spelled through `import jax` where the rewrite removed the import it had
    (`from jax.lax import scan`)."""
    if change.imports is None:
        return
    for verb, changed in ((removed, change.imports.removed), (added, change.imports.added)):
        for line, statement in changed:
            click.echo(f"{change.display}:{line}: {verb} {statement!r}", err=True)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
