"""The code cells of a notebook as one program: joined into one module, split back.

Each cell is preceded by a marker comment line naming it, `# %% <salt> <k>`, with a salt
that occurs nowhere in the notebook, so the split finds the cells again whatever the
rewrite did between the markers (a comment line is never moved or changed by it).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_IMPORT = "import scanrewrite.runtime"


@dataclass(frozen=True)
class Program:
    """Cells joined into one module."""

    #: The module's text.
    code: str
    #: The salt in the marker lines.
    salt: str
    #: Per joined cell: (the cell's key, the module's line number of the cell's first line).
    starts: tuple[tuple[int, int], ...]
    #: Keys of the cells to which the join added a final line break.
    completed: frozenset[int]
    #: The line break of the markers, and of the lines the rewrite adds: the cells' first.
    newline: str

    @classmethod
    def join(cls, cells: list[tuple[int, str]], salt: str) -> Program:
        """Join `cells`, pairs of (key, Python source), in order."""
        newline = next((_newline(code) for _, code in cells if re.search(r"[\r\n]", code)), "\n")
        pieces = []
        starts = []
        completed = set()
        line = 1
        for key, code in cells:
            pieces.append(f"# %% {salt} {key}{newline}")
            line += 1
            starts.append((key, line))
            if code and not code.endswith(("\n", "\r")):
                code += newline
                completed.add(key)
            pieces.append(code)
            line += len(re.findall(r"\r\n|\r|\n", code))
        return cls("".join(pieces), salt, tuple(starts), frozenset(completed), newline)

    def locate(self, line: int) -> tuple[int, int] | None:
        """(cell key, line within the cell) of line `line` of the module; None on a marker."""
        for key, start in reversed(self.starts):
            if line >= start:
                return key, line - start + 1
            if line == start - 1:
                return None
        return None

    def split(self, code: str) -> dict[int, str]:
        """The cells of `code`, this program rewritten, by key.

        Raises `ValueError` if the markers are not all there, once, in order.
        """
        marker = re.compile(rf"# %% {re.escape(self.salt)} (\d+){self.newline}")
        found = list(marker.finditer(code))
        keys = [int(match.group(1)) for match in found]
        if keys != [key for key, _ in self.starts] or (found and found[0].start() != 0):
            raise ValueError("the cell markers did not survive the rewrite")
        cells = {}
        for match, after in zip(found, [*found[1:], None], strict=True):
            key = int(match.group(1))
            text = code[match.end() : after.start() if after else len(code)]
            if key in self.completed and text.endswith(self.newline):
                text = text[: -len(self.newline)]
            cells[key] = text
        return cells


def import_cell(cells: list[tuple[int, str]], packages: frozenset[str]) -> int | None:
    """The key of the cell where a user puts the added import: the first cell that imports
    from one of `packages` at its top level, else the first that imports anything, else None."""
    anything = None
    for key, code in cells:
        modules = _top_level_imports(code)
        if any(module.partition(".")[0] in packages for module in modules):
            return key
        if modules and anything is None:
            anything = key
    return anything


def place_import(before: dict[int, str], after: dict[int, str], target: int, masks: str) -> dict[int, str]:
    """`after` with `import scanrewrite.runtime`, if the rewrite added it to a cell other than
    `target`, moved into `target`, after the imports at its top (or at its start).

    The cells are Python, IPython lines masked by names that start with `masks`."""
    added = [key for key in after if _count(after[key]) > _count(before.get(key, ""))]
    if not added or added == [target] or target not in after:
        return after
    moved = dict(after)
    for key in added:
        lines = moved[key].splitlines(keepends=True)
        index = next(i for i, line in reversed(list(enumerate(lines))) if line.rstrip("\r\n") == _IMPORT)
        del lines[index]
        # The blank lines a sorter wants after an import section go with the import.
        while index < len(lines) and not lines[index].strip() and _blanks(lines) > _blanks(before.get(key, "")):
            del lines[index]
        moved[key] = "".join(lines)
    lines = moved[target].splitlines(keepends=True)
    end = _end_of_top_imports(moved[target], masks)
    newline = _newline(moved[target])
    if end < len(lines) or lines and lines[-1].endswith(("\n", "\r")):
        lines.insert(end, _IMPORT + newline)
    else:
        # At the end of a cell whose last line (as Jupyter keeps it) has no line break.
        if lines:
            lines[-1] += newline
        lines.append(_IMPORT)
    moved[target] = "".join(lines)
    return moved


def _blanks(code: str | list[str]) -> int:
    lines = code.splitlines() if isinstance(code, str) else code
    return sum(1 for line in lines if not line.strip())


def _count(code: str) -> int:
    return sum(1 for line in code.splitlines() if line == _IMPORT)


def _newline(code: str) -> str:
    match = re.search(r"\r\n|\r|\n", code)
    return match.group() if match else "\n"


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _top_level_imports(code: str) -> list[str]:
    tree = _parse(code)
    modules = []
    for node in tree.body if tree else ():
        if isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.append(node.module)
    return modules


def _end_of_top_imports(code: str, masks: str) -> int:
    """The line after the last import of the imports a cell starts with (past a docstring and
    masked IPython lines); 0 if it starts with none."""
    tree = _parse(code)
    end = 0
    for index, node in enumerate(tree.body if tree else ()):
        value = node.value if isinstance(node, ast.Expr) else None
        is_docstring = index == 0 and isinstance(value, ast.Constant) and isinstance(value.value, str)
        callee = value.func if isinstance(value, ast.Call) else None
        is_masked = isinstance(callee, ast.Name) and callee.id.startswith(masks)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            end = node.end_lineno or end
        elif not (is_docstring or is_masked):
            break
    return end
