"""Jupyter notebooks: the rewrite of the code cells of an `.ipynb` file, byte for byte elsewhere.

`rewrite_notebook` is the notebook counterpart of `scanrewrite.codemod.rewrite`: bytes
in, `NotebookResult` out, no file I/O, no printing. The code cells are one program, as
the kernel runs them: they are joined into one module (IPython syntax masked, see
`_magics`), rewritten once, so that a call in one cell resolves through an import in
another and `import scanrewrite.runtime` is added once, and split back (`_program`).
Only the `source` of the cells that change is written back into the JSON text
(`_json`); outputs, metadata, ids, layout and escaping stay as they were.

nbformat (which validates the notebook) is imported only when a notebook is rewritten.
"""

from __future__ import annotations

import ast
import copy
import difflib
import json
import secrets
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import libcst

from scanrewrite.codemod import RewriteResult, SourceError, may_rewrite, rewrite
from scanrewrite.errors import InputError
from scanrewrite.notebook._json import JSONLayoutError, NotebookText
from scanrewrite.notebook._magics import Masked, mask, reference_call, unmask
from scanrewrite.notebook._program import Program, import_cell, place_import
from scanrewrite.options import Options, merged
from scanrewrite.targets import TARGETS

__all__ = ["CellChange", "NotebookError", "NotebookResult", "notebook_diff", "rewrite_notebook"]

#: The top-level packages of the APIs the rewrite knows: the cell that imports from one
#: of them is where the added import goes.
_PACKAGES = frozenset(target.qualified_name.partition(".")[0] for target in TARGETS)
#: The key of the extra cell that holds the names the unparsed cells use.
_KEEP = 1 << 30


class NotebookError(InputError):
    """A file that is not a notebook this tool can read: not JSON, or not nbformat 4. Its
    `line` is one of the JSON text."""


@dataclass(frozen=True)
class CellChange:
    """One code cell whose source the rewrite changes."""

    #: 1-based number of the cell among the notebook's code cells (as ruff counts them).
    cell: int
    before: str
    after: str


@dataclass(frozen=True)
class NotebookResult:
    """What `rewrite_notebook` did to one notebook."""

    #: The new notebook file, equal to the input outside the changed cells' sources.
    code: bytes
    changes: tuple[CellChange, ...]
    #: (code cell number, line within the cell, API) of each call rewritten.
    rewritten: tuple[tuple[int, int, str], ...]
    #: (code cell number, line within the cell, reason) of each call left as it was.
    skipped: tuple[tuple[int, int, str], ...]
    #: (code cell number, line within the cell or None, message) of each cell left alone
    #: because it cannot be parsed; the other cells are still rewritten.
    unparsed: tuple[tuple[int, int | None, str], ...]
    #: (code cell number, line within the cell, note, whether a per-step checkpoint is
    #: absorbed) of each rewritten call with a note (see `scanrewrite.codemod.Rewritten`).
    notes: tuple[tuple[int, int, str, bool], ...] = ()

    @property
    def changed(self) -> bool:
        """Whether any cell changed."""
        return bool(self.changes)


def rewrite_notebook(
    source: bytes,
    options: Options | None = None,
    /,
    *,
    transform: Callable[[bytes], RewriteResult] | None = None,
    **changes: Any,
) -> NotebookResult:
    """Rewrite every recognised scan call in the code cells of the notebook `source`.

    `options` (changed by keyword arguments) are those of `scanrewrite.codemod.rewrite`:
    `rewrite_notebook(source, unroll=8)`, or `rewrite_notebook(source, options)`.
    `transform`, if given, is used instead of that rewrite (`scanrewrite.codemod.revert`, say:
    the cells are joined, transformed and split back the same way); the options then only say
    the `targets`, whose calls may change. A notebook that is not UTF-8,
    not JSON, or not a valid nbformat 4 notebook raises `NotebookError`. A notebook whose
    kernel is not Python, and cells whose cell magic is not Python (`%%bash`), are left as
    they are; a code cell that cannot be parsed is left as it is and listed in `unparsed`.
    """
    options = merged(options, changes)
    notebook, document = _read(source)
    if not _is_python(document):
        return NotebookResult(source, (), (), (), ())
    numbers = {}
    for cell in notebook.cells:
        if cell.cell_type == "code":
            numbers[cell.index] = len(numbers) + 1
    everything = "".join(cell.source for cell in notebook.cells)
    salt = _salt(everything)
    prefix = f"__ipython_{salt}_"
    masked: dict[int, Masked] = {}
    unparsed: dict[int, tuple[int | None, str]] = {}
    for index in numbers:
        cell_masked = mask(notebook.cells[index].source, prefix)
        if cell_masked is None:
            continue  # %%bash and the like: not Python
        problem = _syntax_error(cell_masked.code)
        if problem is None:
            masked[index] = cell_masked
        elif notebook.cells[index].source.strip():
            unparsed[index] = problem
    sources = {cell.index: cell.source for cell in notebook.cells}
    if transform is None:
        def transform(code: bytes) -> RewriteResult:
            return rewrite(code, options)

    result, program = _rewrite_cells(masked, unparsed, sources, salt, transform, options.targets)
    if result is None or not result.changed:
        return NotebookResult(
            source, (), (), _calls(result, program, numbers, "skipped") if result else (), _unparsed(unparsed, numbers)
        )
    try:
        cells = program.split(result.code.decode("utf-8"))
        cells.pop(_KEEP, None)
        before = {index: masked[index].code for index in cells}
        target = import_cell([(index, masked[index].code) for index in cells], _PACKAGES)
        cells = place_import(before, cells, min(cells) if target is None else target, prefix)
        sources = {index: unmask(code, masked[index]) for index, code in cells.items()}
    except ValueError as exc:
        raise SourceError(f"cannot split the rewritten cells ({exc}); please report this") from None
    sources = {index: code for index, code in sources.items() if code != notebook.cells[index].source}
    code = notebook.with_sources(sources).encode("utf-8")
    _check(source, code, sources)
    changes = tuple(
        CellChange(numbers[index], notebook.cells[index].source, text) for index, text in sorted(sources.items())
    )
    return NotebookResult(
        code,
        changes,
        _calls(result, program, numbers, "rewritten"),
        _calls(result, program, numbers, "skipped"),
        _unparsed(unparsed, numbers),
        _calls(result, program, numbers, "notes"),
    )


def notebook_diff(changes: tuple[CellChange, ...], path: str) -> bytes:
    """A unified diff of the changed cells' sources, one per cell, headed `--- path:cell N` and
    `+++ path:cell N` (as ruff shows notebooks); not a diff of the JSON, and not for `git apply`."""
    out = []
    for change in changes:
        name = f"{path}:cell {change.cell}"
        before, after = _diff_lines(change.before), _diff_lines(change.after)
        out.extend(difflib.unified_diff(before, after, name, name))
    return "".join(out).encode("utf-8", "surrogateescape")


def _diff_lines(text: str) -> list[str]:
    # A cell's last line has no line break in Jupyter; that is no change worth a marker.
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    return lines


def _read(source: bytes) -> tuple[NotebookText, dict]:
    """The notebook's cells located in its text, and its parsed JSON; raises `NotebookError`."""
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = source.count(b"\n", 0, exc.start) + 1
        raise NotebookError(f"not a notebook: cannot decode as utf-8 ({exc.reason})", line) from None
    try:
        document = json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as exc:
        raise NotebookError(f"not a notebook: invalid JSON ({exc.msg})", exc.lineno) from None
    except RecursionError:
        raise NotebookError("not a notebook: JSON nested too deeply") from None
    version = document.get("nbformat") if isinstance(document, dict) else None
    if version != 4:
        found = "no nbformat version" if version is None else f"nbformat {version!r}"
        raise NotebookError(
            f"not an nbformat 4 notebook ({found}); convert it with `jupyter nbconvert --to notebook`"
        )
    problem = _shape_problem(document)
    if problem is not None:
        raise NotebookError(f"not a valid nbformat 4 notebook: {problem}")
    # Imported here: the command line loads it only when it meets a notebook.
    import nbformat

    try:
        with warnings.catch_warnings():
            # e.g. "cell is missing an id field": a note for nbformat's own writer, not ours.
            warnings.simplefilter("ignore")
            nbformat.validate(copy.deepcopy(document), version=4)
    except nbformat.ValidationError as exc:
        where = "/".join(str(part) for part in getattr(exc, "absolute_path", ()) or ())
        message = str(getattr(exc, "message", exc)).splitlines()[0]
        raise NotebookError(f"not a valid nbformat 4 notebook: {where + ': ' if where else ''}{message}") from None
    try:
        notebook = NotebookText.parse(text)
    except (JSONLayoutError, RecursionError) as exc:
        raise SourceError(f"cannot locate the cells in the JSON ({exc}); please report this") from None
    sources = [
        "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"] for cell in document["cells"]
    ]
    if sources != [cell.source for cell in notebook.cells]:
        raise SourceError("cannot locate the cells in the JSON; please report this")
    return notebook, document


_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}


def _shape_problem(document: dict) -> str | None:
    """What nbformat's validator takes for granted (it fails with a `TypeError` or `KeyError`
    on anything else), as a schema error; None if the notebook has that shape."""

    def wrong(where: str, value: object, wanted: str) -> str:
        return f"{where}: {_JSON_TYPES.get(type(value), 'a number')}, not {wanted}"

    if not isinstance(document.get("nbformat_minor", 0), int):
        return wrong("nbformat_minor", document["nbformat_minor"], "an integer")
    if "cells" not in document:
        return "'cells' is a required property"
    cells = document["cells"]
    if not isinstance(cells, list):
        return wrong("cells", cells, "an array")
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            return wrong(f"cells/{index}", cell, "an object")
        if not isinstance(cell.get("id", ""), str):
            return wrong(f"cells/{index}/id", cell["id"], "a string")
    return None


def _joined(document: dict) -> dict:
    for cell in document.get("cells", ()):
        if isinstance(cell.get("source"), list):
            cell["source"] = "".join(cell["source"])
    return document


def _check(source: bytes, code: bytes, sources: dict[int, str]) -> None:
    """Refuse a new notebook that differs from `source` in anything but the cells `sources` sets."""
    expected = _joined(json.loads(source.decode("utf-8").removeprefix("\ufeff")))
    for index, text in sources.items():
        expected["cells"][index]["source"] = text
    try:
        actual = _joined(json.loads(code.decode("utf-8").removeprefix("\ufeff")))
    except ValueError as exc:
        raise SourceError(f"the rewritten notebook is not valid JSON ({exc}); please report this") from None
    if actual != expected:
        raise SourceError("the rewritten notebook differs outside its cells' sources; please report this")


def _is_python(document: dict) -> bool:
    metadata = document.get("metadata") or {}
    language = (metadata.get("kernelspec") or {}).get("language") or (metadata.get("language_info") or {}).get("name")
    return language is None or str(language).lower() in ("python", "python3", "ipython")


def _salt(text: str) -> str:
    while True:
        salt = secrets.token_hex(4)
        if salt not in text:
            return salt


def _syntax_error(code: str) -> tuple[int | None, str] | None:
    """Why `code` does not parse as a cell (top-level `await` allowed), or None if it does."""
    try:
        compile(code, "<cell>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as exc:
        return exc.lineno, f"cannot parse: {exc.msg}"
    except ValueError as exc:  # a NUL byte
        return None, f"cannot parse: {exc}"
    return None


def _rewrite_cells(masked, unparsed, sources, salt, transform, targets):
    """Rewrite the joined cells; a cell the rewrite cannot parse moves to `unparsed` and the
    rest are rewritten again. Returns (result or None when nothing can change, program)."""
    while True:
        cells = [(index, masked[index].code) for index in sorted(masked)]
        if unparsed:
            # The names the cells left alone use: imports they need are then not removed.
            texts = [sources[index] for index in unparsed]
            cells.append((_KEEP, reference_call(f"__ipython_{salt}_keep__", texts) + "\n"))
        program = Program.join(cells, salt)
        code = program.code.encode("utf-8")
        if not masked or not may_rewrite(code, targets):
            return None, program
        try:
            result = transform(code)
        except SourceError as exc:
            where = program.locate(exc.line) if exc.line is not None else None
            if where is None or where[0] not in masked:
                # The joined module's line means nothing to the user: say no line.
                raise SourceError(exc.message) from None
            index, line = where
            unparsed[index] = (line, exc.message)
            del masked[index]
            continue
        if result.changed:
            # As for a file: a rewrite that does not parse is refused, never written.
            try:
                libcst.parse_module(result.code)
            except libcst.ParserSyntaxError as exc:
                raise SourceError(f"the rewritten cells do not parse ({exc.message}); please report this") from None
        return result, program


def _calls(result, program: Program, numbers: dict[int, int], kind: str) -> tuple:
    """The rewritten or skipped calls, or the rewritten calls' notes, by cell and line."""
    calls = []
    for call in result.rewritten if kind == "notes" else getattr(result, kind):
        index, line = program.locate(call.line) or (None, call.line)
        if index not in numbers:  # in the names kept for the cells left alone
            continue
        if kind == "notes":
            if call.note is not None:
                calls.append((numbers[index], line, call.note, call.absorbed is not None))
        else:
            calls.append((numbers[index], line, call.api if kind == "rewritten" else call.reason))
    return tuple(calls)


def _unparsed(unparsed: dict[int, tuple[int | None, str]], numbers: dict[int, int]) -> tuple:
    return tuple((numbers[index], line, message) for index, (line, message) in sorted(unparsed.items()))
