"""The work on one file: screening its bytes, the transform, the check of its result, the write.

Reading, the decoding check and the cheap byte check (`scan`, ...) happen in the calling
process (`read_task`); only the files that may hold a scan call become a `Task`, which
`rewrite_task` works on, in a worker process or here (see `scanrewrite.concurrency`). There,
the codemod's `may_rewrite` (Python's own parser, many times faster than libcst) rules out
the files that import none of the known APIs, and only the rest go through the rewrite. Each
file ends as a `FileResult`, errors included, so one bad file never stops the others.
"""

from __future__ import annotations

import ast
import functools
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst

from scanrewrite.codemod import ImportChanges, RewriteResult, SourceError, import_changes, may_rewrite, rewrite
from scanrewrite.files import FileError, Source, check_decodable, is_notebook, read_source, write_file
from scanrewrite.interrupts import deferred
from scanrewrite.mode import Mode, WriteBack
from scanrewrite.output import unified_diff
from scanrewrite.report import Changed, FileResult
from scanrewrite.targets import select

if TYPE_CHECKING:
    from scanrewrite.notebook import NotebookResult


@functools.cache
def needles(targets: tuple[str, ...]) -> tuple[bytes, ...]:
    """A call of a target has the target's last name (`scan`, `fori_loop`, `map`) in its
    spelling or in the import that aliases it, and a pragma has `scanrewrite`, so a file
    with none of these bytes cannot change and is not parsed."""
    last_names = (target.qualified_name.rpartition(".")[2].encode() for target in select(targets))
    return (b"scanrewrite", *dict.fromkeys(last_names))


def transform(mode: Mode) -> Callable[[bytes], RewriteResult]:
    """The pure transform `mode` asks for: `scanrewrite.codemod.rewrite` with its options, or
    `scanrewrite.codemod.revert`."""
    if mode.revert:
        from scanrewrite.codemod import revert  # (imported only for a revert)

        return lambda source: revert(source, mode.options)
    return lambda source: rewrite(source, mode.options)


def rewrite_checked(source: bytes, mode: Mode) -> RewriteResult:
    """The transform of `source` that `mode` asks for, refusing a changed result that does
    not parse.

    Raises `SourceError` for source that cannot be parsed and for such a result.
    """
    result = transform(mode)(source)
    if result.changed:
        # Python's own parser, many times faster than libcst's, is the judge of what runs.
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # e.g. invalid escapes, which the input had
                compile(result.code, "<rewritten>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as exc:
            raise SourceError(f"the rewritten code does not parse ({exc.msg}); please report this", exc.lineno) from None
        except (ValueError, RecursionError, MemoryError):
            _parses_with_libcst(result.code)  # (code Python's parser cannot take, libcst judges)
    return result


def _parses_with_libcst(code: bytes) -> None:
    try:
        libcst.parse_module(code)
    except libcst.ParserSyntaxError as exc:
        raise SourceError(f"the rewritten code does not parse ({exc.message}); please report this", exc.raw_line) from None


def screen(original: bytes, display: str, mode: Mode) -> FileResult | None:
    """The result of a file that needs no parsing: one that does not decode, or holds none
    of the `needles` of `mode`'s targets. None for a file that must be parsed."""
    try:
        check_decodable(original)
    except FileError as exc:
        return FileResult(display, error=exc.entry)
    return None if any(needle in original for needle in needles(mode.options.targets)) else FileResult(display)


def rewrite_bytes(original: bytes, display: str, mode: Mode, write_back: WriteBack) -> tuple[FileResult, bytes]:
    """Rewrite `original`, which passed `screen`, without writing anything.

    Returns the result, with its diff when `write_back` shows one, and the new code
    (`original` itself when nothing changes or it fails).
    """
    if is_notebook(display):
        return _rewrite_notebook_bytes(original, display, mode, write_back)
    try:
        if not may_rewrite(original, mode.options.targets):
            return FileResult(display), original
        result = rewrite_checked(original, mode)
        imports, unrestored = _import_report(original, result.code, mode) if result.changed else (None, None)
    except SourceError as exc:
        return FileResult(display, error=exc.entry), original
    except Exception as exc:  # noqa: BLE001 - a bug met in one file must not stop the others
        return FileResult(display, error=(None, f"internal error: {type(exc).__name__}: {exc}")), original
    diff = unified_diff(original, result.code, display) if result.changed and write_back.shows_diff else None
    return (
        FileResult(
            display,
            Changed.YES if result.changed else Changed.NO,
            tuple(call.line for call in result.rewritten),
            tuple((call.line, call.reason) for call in result.skipped),
            diff,
            notes=tuple((call.line, call.note) for call in result.rewritten if call.note is not None),
            absorbed=tuple(call.line for call in result.rewritten if call.absorbed),
            apis=tuple(dict.fromkeys(call.api for call in result.rewritten)),
            imports=imports,
            unrestored=unrestored,
        ),
        result.code,
    )


def _import_report(original: bytes, code: bytes, mode: Mode) -> tuple[ImportChanges | None, ImportChanges | None]:
    """What `mode`'s transform of `original` into `code` changed in the imports, and, for a
    rewrite that removed one, which imports of `original` a revert of `code` would not restore
    (`removed`) and what it would write instead (`added`); (None, None) unless `mode.imports`."""
    if not mode.imports:
        return None, None
    changes = import_changes(original, code)
    if mode.revert or not changes.removed:
        return changes, None
    from scanrewrite.codemod import revert  # (imported only for a revert)

    return changes, import_changes(original, revert(code, mode.options).code) or None


def _rewrite_notebook_bytes(
    original: bytes, display: str, mode: Mode, write_back: WriteBack
) -> tuple[FileResult, bytes]:
    """`rewrite_bytes` for a Jupyter notebook: calls and errors are located as `cell N:line L`."""
    # Imported for notebooks only, as the pool below for more than one job: a run on a few
    # files spends much of its time importing.
    from scanrewrite.notebook import NotebookError, notebook_diff, rewrite_notebook

    try:
        result = rewrite_notebook(original, mode.options, transform=transform(mode))
        imports, unrestored = _cell_import_report(result, mode) if result.changed else (None, None)
    except (NotebookError, SourceError) as exc:
        return FileResult(display, error=exc.entry), original
    except Exception as exc:  # noqa: BLE001 - a bug met in one file must not stop the others
        return FileResult(display, error=(None, f"internal error: {type(exc).__name__}: {exc}")), original
    diff = None
    if result.changed and write_back.diffs_cells:
        diff = notebook_diff(result.changes, display)
    elif result.changed and write_back.shows_diff:
        # A patch of the JSON text, which `git apply` takes; the cells' diff only reads better.
        diff = unified_diff(original, result.code, display)
    return (
        FileResult(
            display,
            Changed.YES if result.changed else Changed.NO,
            tuple(f"cell {cell}:line {line}" for cell, line, _ in result.rewritten),
            tuple((f"cell {cell}:line {line}", reason) for cell, line, reason in result.skipped),
            diff,
            notes=tuple((f"cell {cell}:line {line}", note) for cell, line, note, _ in result.notes),
            absorbed=tuple(f"cell {cell}:line {line}" for cell, line, _, absorbed in result.notes if absorbed),
            cell_errors=tuple(
                (f"cell {cell}" if line is None else f"cell {cell}:line {line}", f"{message} (cell left as it is)")
                for cell, line, message in result.unparsed
            ),
            apis=tuple(dict.fromkeys(api for _, _, api in result.rewritten)),
            imports=imports,
            unrestored=unrestored,
        ),
        result.code,
    )


def _cell_import_report(result: NotebookResult, mode: Mode) -> tuple[ImportChanges | None, ImportChanges | None]:
    """`_import_report` for a notebook's changed cells, located as `cell N:line L`."""
    if not mode.imports:
        return None, None
    from scanrewrite.codemod import revert  # (imported only for a revert, as the notebook support)
    from scanrewrite.notebook import rewrite_notebook

    changes = _cell_imports((change.cell, change.before, change.after) for change in result.changes)
    if mode.revert or not changes.removed:
        return changes, None
    back = rewrite_notebook(result.code, mode.options, transform=lambda source: revert(source, mode.options))
    before = {change.cell: change.before for change in result.changes}
    cells = ((change.cell, before[change.cell], change.after) for change in back.changes if change.cell in before)
    lost = _cell_imports(cells)
    return changes, lost or None


def _cell_imports(cells: Iterable[tuple[int, str, str]]) -> ImportChanges:
    """The import changes of each (cell number, source before, source after), IPython lines
    masked; a cell that does not parse even so has none."""
    from scanrewrite.notebook._magics import mask

    removed: list[tuple[int | str, str]] = []
    added: list[tuple[int | str, str]] = []
    for cell, before, after in cells:
        old, new = (mask(source, f"__scanrewrite_{cell}_") for source in (before, after))
        if old is None or new is None:
            continue
        try:
            changes = import_changes(old.code.encode(), new.code.encode())
        except SyntaxError:
            continue
        removed.extend((f"cell {cell}:line {line}", statement) for line, statement in changes.removed)
        added.extend((f"cell {cell}:line {line}", statement) for line, statement in changes.added)
    return ImportChanges(tuple(removed), tuple(added))


@dataclass(frozen=True)
class Task:
    """A file that may need rewriting, with the bytes read from it."""

    source: Source
    original: bytes


def rewrite_task(task: Task, mode: Mode, write_back: WriteBack) -> tuple[FileResult, bytes | None]:
    """The work on one file that a worker does: its result, and the new code to write
    (None when nothing is to be written). Writes nothing."""
    result, code = rewrite_bytes(task.original, task.source.display, mode, write_back)
    return result, code if result.changed is Changed.YES and write_back.writes else None


def finish(task: Task, result: FileResult, code: bytes | None) -> FileResult:
    """Write `code` (if any) over the file; a signal that comes meanwhile waits for the end."""
    if code is None:
        return result
    try:
        with deferred():
            write_file(task.source.path, code, task.original)
    except FileError as exc:
        return FileResult(result.display, error=exc.entry)
    return result


def process_file(task: Task, mode: Mode, write_back: WriteBack) -> FileResult:
    """Rewrite one file and, if `write_back` writes and it changed, replace it on disk."""
    return finish(task, *rewrite_task(task, mode, write_back))


def read_task(source: Source, mode: Mode) -> FileResult | Task:
    """The file's bytes as a task, or its result if it cannot change or cannot be read."""
    try:
        original = read_source(source.path)
    except FileError as exc:
        return FileResult(source.display, error=exc.entry)
    return screen(original, source.display, mode) or Task(source, original)
