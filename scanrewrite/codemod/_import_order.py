"""Where an added `import x` goes: where ruff's import sorting (`I001`, default settings)
and isort (profile black) would put it, without moving anything the user wrote.

The sorters cut a module's top-level imports into blocks (runs of import statements,
broken by any other statement) and lay each block out as sections (`__future__`, the
standard library, third-party, first-party, relative), one blank line between sections,
and within a section all `import x` lines, ordered by module name (case-insensitive,
numbers by value), before all `from x import y` lines. The runtime is a third-party
package for the user's project, so its import goes among the third-party `import x`
lines beside `import jax`, or, where the block has none, into a new section of its own
after the standard library and before relative imports.

What is not known here is the user's first-party packages: as the sorters do when they
are not told, any absolute import that is not the standard library counts as
third-party, and the first blank-line group holding one is the third-party section (so a
blank line inside the third-party section, which the sorters keep above a comment, ends it
here too).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Collection

import libcst as cst
from libcst.helpers import get_full_name_for_node

__all__ = ["add_import", "sort_key"]

_FUTURE, _STDLIB, _THIRD_PARTY, _LOCAL = range(4)
_STDLIB_NAMES = frozenset(sys.stdlib_module_names)
_DIGITS = re.compile(r"\d+")
_Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement


def sort_key(module: str) -> str:
    """The sorters' order of module names: case-insensitive, digit runs by their value."""
    return _DIGITS.sub(lambda digits: digits.group().zfill(24), module.lower())


def add_import(
    module: cst.Module, name: str, first_use: int | None = None, dropped: Collection[int] = ()
) -> tuple[cst.Module, int | None]:
    """`module` with ``import name`` added at module level, and the index in its body of
    the new line; `module` and None if a top-level line already imports exactly that.

    The new line goes before the top-level statement at index `first_use` (the first
    that uses it), however the imports are laid out. `dropped` are the indices of import
    lines about to be removed: a line added right before one takes the blank lines and
    comments above it, which would otherwise be left behind.
    """
    body = list(module.body)
    if any(_imports_module(statement, name) for statement in body):
        return module, None
    limit = len(body) if first_use is None else first_use
    new = cst.parse_statement(f"import {name}", config=module.config_for_parsing)
    assert isinstance(new, cst.SimpleStatementLine)
    blocks = [block for block in _blocks(body) if block[0] < limit]
    block = next((block for block in blocks if any(_section(body[i]) == _THIRD_PARTY for i in block)), None)
    if block is None and blocks:
        block = blocks[0]
    if block is None:
        index = _insert_first(body, new)
    elif any(_section(body[i]) == _THIRD_PARTY for i in block):
        index = _insert_in_section(body, _third_party_group(body, block), new, sort_key(name), dropped)
    else:
        index = _insert_section(body, block, new)
    return module.with_changes(body=body), index


def _insert_in_section(
    body: list[_Statement], group: list[int], new: cst.SimpleStatementLine, key: str, dropped: Collection[int]
) -> int:
    """Among the group's third-party `import x` lines, in order; before its `from` lines."""
    plain = [i for i in group if _section(body[i]) == _THIRD_PARTY and _is_plain_import(body[i])]
    after = next((i for i in plain if sort_key(_first_name(body[i])) > key), None)
    if after is None and plain:
        body.insert(plain[-1] + 1, new.with_changes(leading_lines=()))
        return plain[-1] + 1
    if after is None:
        after = next(i for i in group if _section(body[i]) == _THIRD_PARTY)
    # The first import of a section takes the lines above it (the blank line before the
    # section, a comment naming it) along; a comment above any other import belongs to it.
    lines = list(body[after].leading_lines)
    first = after == group[0] or _section(body[after - 1]) != _THIRD_PARTY
    cut = len(lines) if first or after in dropped else 0
    body[after] = body[after].with_changes(leading_lines=lines[cut:])
    body.insert(after, new.with_changes(leading_lines=lines[:cut]))
    return after


def _insert_section(body: list[_Statement], block: list[int], new: cst.SimpleStatementLine) -> int:
    """A section of its own: after the future and standard-library imports, before
    relative ones, a blank line between it and the others."""
    local = next((i for i in block if _section(body[i]) == _LOCAL), None)
    index = local if local is not None else block[-1] + 1
    body.insert(index, new.with_changes(leading_lines=(cst.EmptyLine(),)))
    return index


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


def _third_party_group(body: list[_Statement], block: list[int]) -> list[int]:
    """The first blank-line-separated group of `block` holding a third-party import."""
    groups: list[list[int]] = []
    for index in block:
        if not groups or any(_is_blank(line) for line in body[index].leading_lines):
            groups.append([])
        groups[-1].append(index)
    return next(group for group in groups if any(_section(body[i]) == _THIRD_PARTY for i in group))


def _section(statement: _Statement) -> int:
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
    return _STDLIB if name.partition(".")[0] in _STDLIB_NAMES else _THIRD_PARTY


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
