"""Where an added `import x` goes: where ruff's import sorting (`I001`, default settings)
and isort (profile black) would put it, without moving anything the user wrote.

The sorters cut a module's top-level imports into blocks (runs of import statements,
broken by any other statement) and lay each block out as sections (`__future__`, the
standard library, third-party, first-party, relative), one blank line between sections,
and within a section all `import x` lines, ordered by module name (case-insensitive,
numbers by value), before all `from x import y` lines; a comment above an import stays
with it (ruff puts a blank line above it). The runtime is a third-party package for the
user's project, so its import goes among the third-party `import x` lines beside
`import jax`, or, where the block has none, into a new section of its own after the
standard library and before first-party and relative imports.

First-party are the top-level names the caller passes: the sorters take the folders and
modules at the project root (and under `src/`), which the pure transform cannot see.
Without them, as the sorters do for a package they do not know, every absolute import
that is not the standard library counts as third-party.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Collection

import libcst as cst
from libcst.helpers import get_full_name_for_node

__all__ = ["add_import", "sort_key"]

_FUTURE, _STDLIB, _THIRD_PARTY, _FIRST_PARTY, _LOCAL = range(5)
_STDLIB_NAMES = frozenset(sys.stdlib_module_names)
_DIGITS = re.compile(r"\d+")
_Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement


def sort_key(module: str) -> str:
    """The sorters' order of module names: case-insensitive, digit runs by their value."""
    return _DIGITS.sub(lambda digits: digits.group().zfill(24), module.lower())


def add_import(
    module: cst.Module,
    name: str,
    first_use: int | None = None,
    dropped: Collection[int] = (),
    first_party: Collection[str] = (),
) -> tuple[cst.Module, int | None]:
    """`module` with ``import name`` added at module level, and the index in its body of
    the new line; `module` and None if a top-level line already imports exactly that.

    The new line goes before the top-level statement at index `first_use` (the first
    that uses it), however the imports are laid out. `dropped` are the indices of import
    lines about to be removed: a line added right before one takes the blank lines and
    comments above it, which would otherwise be left behind. `first_party` are the
    top-level names of the user's own packages.
    """
    body = list(module.body)
    if any(_imports_module(statement, name) for statement in body):
        return module, None
    limit = len(body) if first_use is None else first_use
    new = cst.parse_statement(f"import {name}", config=module.config_for_parsing)
    assert isinstance(new, cst.SimpleStatementLine)
    sections = {i: _section(statement, first_party) for i, statement in enumerate(body) if _is_import_line(statement)}
    wanted = _section(new, first_party)
    blocks = [block for block in _blocks(body) if block[0] < limit]
    block = next((block for block in blocks if any(sections[i] == wanted for i in block)), None)
    if block is None and blocks:
        block = blocks[0]
    if block is None:
        index = _insert_first(body, new)
    elif any(sections[i] == wanted for i in block):
        members = [i for i in block if sections[i] == wanted]
        index = _insert_in_section(body, members, new, sort_key(name), dropped)
    else:
        later = next((i for i in block if sections[i] > wanted), None)
        index = later if later is not None else block[-1] + 1
        body.insert(index, new.with_changes(leading_lines=(cst.EmptyLine(),)))
    return module.with_changes(body=body), index


def _insert_in_section(
    body: list[_Statement], members: list[int], new: cst.SimpleStatementLine, key: str, dropped: Collection[int]
) -> int:
    """Among the section's `import x` lines, in order; before its `from` lines."""
    plain = [i for i in members if _is_plain_import(body[i])]
    after = next((i for i in plain if sort_key(_first_name(body[i])) > key), None)
    if after is None and plain:
        body.insert(plain[-1] + 1, new.with_changes(leading_lines=()))
        return plain[-1] + 1
    if after is None:
        after = members[0]
    # Before the first import of a section, the new line takes the blank line before the
    # section along, and everything above an import about to go; comment lines directly
    # above a kept import describe it and stay there, after a blank line as the sorters
    # lay a commented import out.
    lines = list(body[after].leading_lines)
    above: list[cst.EmptyLine] = []
    if after in dropped:
        above, lines = lines, []
    elif after == members[0]:
        cut = len(lines)
        while cut and not _is_blank(lines[cut - 1]):
            cut -= 1
        above, lines = lines[:cut], [cst.EmptyLine(), *lines[cut:]] if cut < len(lines) else []
    body[after] = body[after].with_changes(leading_lines=lines)
    body.insert(after, new.with_changes(leading_lines=above))
    return after


def _insert_first(body: list[_Statement], new: cst.SimpleStatementLine) -> int:
    """A block of its own where a module without top-level imports would have one: after
    the docstring, with the blank lines the sorters put after a block."""
    index = 1 if body and _is_docstring(body[0]) else 0
    body.insert(index, new.with_changes(leading_lines=(cst.EmptyLine(),) if index else ()))
    if index + 1 < len(body):
        following = body[index + 1]
        wanted = 2 if _is_definition(following) else 1
        lines = list(following.leading_lines)
        blank = next((n for n, line in enumerate(lines) if not _is_blank(line)), len(lines))
        if blank != wanted:
            body[index + 1] = following.with_changes(leading_lines=[cst.EmptyLine()] * wanted + lines[blank:])
    return index


def _blocks(body: list[_Statement]) -> list[list[int]]:
    """The indices of each run of top-level import lines."""
    blocks: list[list[int]] = []
    for index, statement in enumerate(body):
        if not _is_import_line(statement):
            continue
        if blocks and blocks[-1][-1] == index - 1:
            blocks[-1].append(index)
        else:
            blocks.append([index])
    return blocks


def _section(statement: _Statement, first_party: Collection[str]) -> int:
    assert isinstance(statement, cst.SimpleStatementLine)
    node = statement.body[0]
    if isinstance(node, cst.ImportFrom):
        if node.relative:
            return _LOCAL
        assert node.module is not None
        name = get_full_name_for_node(node.module) or ""
        if name == "__future__":
            return _FUTURE
    else:
        assert isinstance(node, cst.Import)
        name = _first_name(statement)
    top = name.partition(".")[0]
    if top in first_party:
        return _FIRST_PARTY
    return _STDLIB if top in _STDLIB_NAMES else _THIRD_PARTY


def _first_name(statement: _Statement) -> str:
    assert isinstance(statement, cst.SimpleStatementLine)
    node = statement.body[0]
    assert isinstance(node, cst.Import)
    return get_full_name_for_node(node.names[0].name) or ""


def _is_import_line(statement: _Statement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(node, (cst.Import, cst.ImportFrom)) for node in statement.body
    )


def _is_plain_import(statement: _Statement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Import)


def _imports_module(statement: _Statement, name: str) -> bool:
    """Whether `statement` is an import line with ``import name`` (no alias) in it."""
    return _is_import_line(statement) and any(
        isinstance(node, cst.Import)
        and any(alias.asname is None and get_full_name_for_node(alias.name) == name for alias in node.names)
        for node in statement.body
    )


def _is_docstring(statement: _Statement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _is_definition(statement: _Statement) -> bool:
    return isinstance(statement, (cst.FunctionDef, cst.ClassDef))


def _is_blank(line: cst.EmptyLine) -> bool:
    return line.comment is None
