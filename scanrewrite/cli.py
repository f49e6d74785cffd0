"""The `scanrewrite` command: click only.

Flags become a `Mode`, a `WriteBack` and a `Report` here, and nothing past this module
looks at a flag. The rewrite itself (and libcst) is imported only once there are files
to process, so `--help` and `--version` start at once; jax is never imported.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Callable, Iterable

import click
from click.core import ParameterSource

from scanrewrite import __version__
from scanrewrite.files import (
    DEFAULT_EXCLUDES,
    Discovery,
    Excludes,
    FileError,
    display_path,
    find_project_root,
    find_pyproject,
    first_party_names,
    formatter_line_length,
    read_config,
)
from scanrewrite.flags import with_flags
from scanrewrite.interrupts import ending_by_signal
from scanrewrite.mode import Mode, WriteBack
from scanrewrite.options import OPTIONS, Options
from scanrewrite.output import color_diff
from scanrewrite.report import FileResult, Report
from scanrewrite.targets import TARGETS

#: The options that belong to one invocation, which `[tool.scanrewrite]` cannot set: the mode
#: (`--check`, `--diff`, `--revert`), stdin and `--config` itself. It sets every other (`CONFIG_KEYS`).
PER_RUN = frozenset({"revert", "check", "diff", "cell_diff", "stdin_filename", "config"})


class ConfigError(click.ClickException):
    """A configuration file that cannot be used: exit 2, one line."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def _paths_for_root(paths: tuple[str, ...], stdin_filename: str | None) -> list[str]:
    """The paths whose common parent locates the project: stdin counts as its file name, or
    as the current folder."""
    return [(stdin_filename or ".") if path == "-" else path for path in paths]


def _read_pyproject(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Load `[tool.scanrewrite]` from `--config FILE`, else from the project's `pyproject.toml`,
    into click's `default_map`, so that options given on the command line win. The file read,
    or None where none was named and the project's has no `[tool.scanrewrite]` table."""
    named = value is not None
    if value is None:
        root = find_project_root(_paths_for_root(ctx.params.get("paths", ()), ctx.params.get("stdin_filename")))
        found = find_pyproject(root)
        if found is None:
            return None
        value = str(found)
    where = display_path(value)
    try:
        table = read_config(value)
    except FileError as exc:
        raise ConfigError(f"{where}{'' if exc.line is None else f':{exc.line}'}: {exc.message}") from None
    if not table and not named:
        return None  # `-v` would name a file that configures nothing
    params = {param.name: param for param in ctx.command.params}
    defaults = {}
    for key, setting in table.items():
        name = CONFIG_KEYS.get(key)
        if name is None:
            close = difflib.get_close_matches(key.replace("_", "-"), CONFIG_KEYS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            click.echo(f"warning: {where}: unknown key '{key}' in [tool.scanrewrite]{hint}", err=True)
            continue
        option = params[name]
        is_flag = getattr(option, "is_flag", False)
        if getattr(option, "count", False) and isinstance(setting, bool):
            setting = int(setting)  # `verbose = true` is -v; `verbose = 2`, -vv
        try:
            if isinstance(setting, bool) != is_flag:
                raise click.BadParameter(f"expected {'true or false' if is_flag else 'a value, not true/false'}")
            option.process_value(ctx, setting)
        except click.BadParameter as exc:
            raise ConfigError(f"{where}: [tool.scanrewrite] {key}: {exc.message}") from None
        defaults[name] = setting
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


def _compile(ctx: click.Context, param: click.Parameter, value: str | None) -> re.Pattern[str] | None:
    """A regular expression option; a multi-line one (from TOML) is read as verbose."""
    if value is None:
        return None
    try:
        return re.compile(value, re.VERBOSE if "\n" in value else 0)
    except re.error as exc:
        raise click.BadParameter(f"not a valid regular expression: {exc}") from None


def _either(ctx: click.Context, first: str, second: str, a: object, b: object) -> tuple[object, object]:
    """Resolve two options that exclude each other: the one from the command line wins over
    the one from the configuration; both from the same place is a usage error."""
    if not (a and b):
        return a, b
    source_a, source_b = ctx.get_parameter_source(first), ctx.get_parameter_source(second)
    if source_a == source_b:
        flag_a, flag_b = (f"--{name.replace('_', '-')}" for name in (first, second))
        raise click.UsageError(f"{flag_a} and {flag_b} cannot be used together")
    a_wins = source_a == ParameterSource.COMMANDLINE
    return (a, None) if a_wins else (None, b)


#: `function` with the flags of every option in `scanrewrite.options.OPTIONS`, in the table's order.
_rewrite_flags = with_flags(OPTIONS)


def _options(ctx: click.Context, flags: dict[str, object]) -> dict[str, object]:
    """The options that the flags (from the command line or the configuration) set: option
    name -> value. Of two flags of one option, the one from the command line wins over the one
    from the configuration; both from the same place is a usage error."""
    values = {}
    for option in OPTIONS:
        given = [flag for flag in option.flags if flags[flag.dest] not in (None, False)]
        if len(given) == 2:
            first, second = given
            kept, _ = _either(ctx, first.dest, second.dest, flags[first.dest], flags[second.dest])
            given = [first if kept else second]
        for flag in given:
            values[option.name] = flags[flag.dest] if flag.constant is None else flag.constant
    return values


def _listed(names: Iterable[str]) -> str:
    """`a, b and c`."""
    *first, last = names
    return f"{', '.join(first)} and {last}" if first else last


def _write_stdout(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(path_type=str), is_eager=True, metavar="[PATHS]...")
@_rewrite_flags
@click.option(
    "--revert",
    is_flag=True,
    help="Undo the rewrite: turn scanrewrite.runtime calls back into the "
    + _listed(target.qualified_name for target in TARGETS)
    + " calls they replaced (dropping unroll=, checkpoint= and levels=).",
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if any file would change.")
@click.option(
    "--diff", is_flag=True, help="Write nothing; print a unified diff of each change to stdout (a patch for git apply)."
)
@click.option(
    "--cell-diff",
    is_flag=True,
    help="As --diff, but show a notebook's change cell by cell, as ruff and black do (readable; not a patch).",
)
@click.option(
    "--stdin-filename",
    is_eager=True,
    help="The name of the file read from '-', for the configuration, excludes and messages.",
)
@click.option(
    "--exclude",
    callback=_compile,
    help="Regular expression of root-relative paths to leave out, replacing the default "
    f"({DEFAULT_EXCLUDES}).",
)
@click.option("--extend-exclude", callback=_compile, help="Like --exclude, but added to the default instead of replacing it.")
@click.option(
    "--force-exclude",
    is_flag=True,
    help="Apply the excludes and .gitignore to files named explicitly too (for pre-commit).",
)
@click.option(
    "-j", "--jobs", type=click.IntRange(min=1), help="Processes that parse files [default: the number of CPUs]."
)
@click.option("-q", "--quiet", is_flag=True, help="Print errors only.")
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="Print one line per call rewritten or skipped, and why; -vv also each file left unchanged and each path "
    "left out.",
)
@click.option(
    "--color/--no-color", default=None, help="Colour the diff and messages [default: on a terminal, unless NO_COLOR is set]."
)
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=str),
    is_eager=True,
    callback=_read_pyproject,
    help="Read [tool.scanrewrite] from this TOML file instead of the project's pyproject.toml.",
)
@click.version_option(__version__, "--version", prog_name="scanrewrite", message="%(prog)s %(version)s")
@click.pass_context
def main(
    ctx: click.Context,
    paths: tuple[str, ...],
    revert: bool,
    check: bool,
    diff: bool,
    cell_diff: bool,
    stdin_filename: str | None,
    exclude: re.Pattern[str] | None,
    extend_exclude: re.Pattern[str] | None,
    force_exclude: bool,
    jobs: int | None,
    quiet: bool,
    verbose: int,
    color: bool | None,
    config: str | None,
    **flags: object,
) -> None:
    """Rewrite the jax.lax.scan and equinox.internal.scan calls in PATHS (files or folders,
    or '-' for stdin) into chunked, checkpointed scans with an unrolled body (with --targets,
    also jax.lax.fori_loop and jax.lax.map calls, and Flax's nnx.scan and nn.scan); with --revert, turn them
    back.

    Exit status: 0 nothing to do or all written, 1 --check found files that would change,
    2 an error (a file that cannot be read, decoded, parsed or written; a bad option).
    """
    values = _options(ctx, flags)
    quiet, verbose = _either(ctx, "quiet", "verbose", quiet, verbose)
    if "-" in paths and len(paths) > 1:
        raise click.BadArgumentUsage("'-' (stdin) cannot be combined with other paths")
    if stdin_filename is not None and "-" not in paths:
        raise click.BadOptionUsage("stdin_filename", "--stdin-filename needs '-' among the paths")

    if revert:
        for flag in (flag for option in OPTIONS if not option.reverts for flag in option.flags):
            if ctx.get_parameter_source(flag.dest) == ParameterSource.COMMANDLINE:
                raise click.UsageError(f"--revert and --{flag.name} cannot be used together")
    write_back = WriteBack.from_configuration(check=check, diff=diff, cell_diff=cell_diff)
    no_color = color is None and bool(os.environ.get("NO_COLOR"))
    report = Report(
        check=check,
        diff=diff or cell_diff,
        verbose=verbose or 0,
        quiet=bool(quiet),
        color=False if no_color else color,
        reverting=revert,
    )
    diff_color = color if color is not None else not no_color and sys.stdout.isatty()
    if not paths:
        if not quiet:
            click.echo("no paths given; nothing to do", err=True)
        ctx.exit(0)

    root = find_project_root(_paths_for_root(paths, stdin_filename))
    if "line_length" not in values:
        values["line_length"] = formatter_line_length(root)
    # The added import goes where import sorters put it, before the project's own packages.
    mode = Mode(Options(**values, first_party=first_party_names(root)), revert=revert, imports=bool(verbose))
    if verbose:
        where = display_path(config) if config else "none"
        click.echo(f"project root: {display_path(root)}; configuration: {where}", err=True)
    discovery = Discovery(
        root,
        Excludes(exclude or re.compile(DEFAULT_EXCLUDES), extend_exclude),
        force_exclude,
        on_ignored=report.ignored,
        on_error=lambda path, error: report.record(FileResult(path, error=error.entry)),
        # As black and ruff do, a path named on the command line that is left out is no
        # error (pre-commit names excluded files too); but it is never left out silently.
        on_named_ignored=lambda path, why: report.ignored(path, why, named=True),
    )

    def emit(result: FileResult) -> None:
        if result.diff is not None:
            _write_stdout(color_diff(result.diff) if diff_color else result.diff)
        report.record(result)

    # Ctrl-C and SIGTERM end the run at once (a file being written is written whole).
    with ending_by_signal():
        if paths == ("-",):
            _process_stdin(stdin_filename, discovery, mode, write_back, report, emit)
        else:
            sources = discovery.collect(paths)
            if sources:
                # Imported here: it loads the rewrite and libcst, which --help does not need.
                from scanrewrite.concurrency import cpu_count, process_many

                process_many(sources, mode, write_back, jobs or cpu_count(), emit)
    report.dependencies(find_pyproject(root))
    report.summary()
    ctx.exit(report.return_code)


def _process_stdin(
    name: str | None,
    discovery: Discovery,
    mode: Mode,
    write_back: WriteBack,
    report: Report,
    emit: Callable[[FileResult], None],
) -> None:
    """Rewrite stdin; in place mode writes the result (or the input, if excluded) to stdout."""
    from scanrewrite.per_file import rewrite_bytes, screen

    original = sys.stdin.buffer.read()
    display = display_path(name) if name else "<stdin>"
    why = discovery.excluded(name) if name else None
    if why:
        report.ignored(display, why)
        if write_back.writes:
            _write_stdout(original)
        return
    result = screen(original, display, mode)
    code = original
    if result is None:
        result, code = rewrite_bytes(original, display, mode, write_back)
    if write_back.writes and result.error is None:
        _write_stdout(code)
    emit(result)


#: The keys `[tool.scanrewrite]` may set: each option's long name -> its click parameter.
CONFIG_KEYS = {
    next(name for name in param.opts if name.startswith("--"))[2:]: param.name
    for param in main.params
    if isinstance(param, click.Option) and param.expose_value and param.name not in PER_RUN
}
