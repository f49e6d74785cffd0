"""Which imports differ between a file and its rewrite (or revert), read with Python's parser.

What `-v` reports: compared name by name (``from jax import jit, lax`` becoming ``from jax
import jit`` loses ``from jax import lax``), anywhere in the file, so the answer holds for
whatever made the change: the rewrite, the revert or the tuner's write-back.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass

__all__ = ["ImportChanges", "import_changes"]

#: One imported name: (``from`` or ``import``, dots of a relative import, module, name, alias).
_Key = tuple[bool, int, str | None, str, str | None]


@dataclass(frozen=True)
class ImportChanges:
    """The imported names one file lost and gained, each as one import statement of its own
    (``from jax.lax import scan``, ``import scanrewrite.runtime``)."""

    #: (line in the file before, import), by line; in a notebook, "cell N:line L".
    removed: tuple[tuple[int | str, str], ...] = ()
    #: (line in the file after, import), by line.
    added: tuple[tuple[int | str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.removed or self.added)


def import_changes(before: bytes, after: bytes) -> ImportChanges:
    """The imported names that the source `before` has and `after` lacks (`removed`), and
    those `after` has and `before` lacks (`added`), counted: a name imported twice and once
    after is removed once. Source that does not parse raises `SyntaxError`."""
    old, new = _imports(before), _imports(after)
    return ImportChanges(_beyond(old, new), _beyond(new, old))


def _imports(code: bytes) -> dict[_Key, list[int]]:
    found: dict[_Key, list[int]] = defaultdict(list)
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            is_from = isinstance(node, ast.ImportFrom)
            level, module = (node.level, node.module) if is_from else (0, None)
            for alias in node.names:
                found[is_from, level, module, alias.name, alias.asname].append(alias.lineno)
    return found


def _beyond(these: dict[_Key, list[int]], others: dict[_Key, list[int]]) -> tuple[tuple[int, str], ...]:
    """(line, import) of each name `these` imports more often than `others` do."""
    extra = ((line, _spelled(key)) for key, lines in these.items() for line in sorted(lines)[len(others.get(key, ())) :])
    return tuple(sorted(extra))


def _spelled(key: _Key) -> str:
    is_from, level, module, name, asname = key
    imported = name if asname is None else f"{name} as {asname}"
    return f"from {'.' * level}{module or ''} import {imported}" if is_from else f"import {imported}"
