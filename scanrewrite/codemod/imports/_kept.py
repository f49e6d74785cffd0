"""The imports a user marked to keep, which neither the rewrite nor the revert removes, though
only the calls they replace used them: those ruff's F401 (unused import) never reports.

- A ``# noqa`` comment, bare or naming F401 (``# noqa: F401``, ``# noqa: E402, F401``), on
  the line of the name or on the first line of its import statement (for a parenthesised
  ``from m import (...)`` spread over lines).
- A redundant alias, the spelling of an explicit re-export: ``import a as a``,
  ``from m import b as b`` (not ``import a.b as b``).
- A name the module lists in ``__all__``: a list or tuple of string literals assigned
  (``=``, annotated) or added (``+=``) at its top level.
"""

from __future__ import annotations

import re
from collections.abc import Collection

import libcst as cst

__all__ = ["alias_binds", "exports", "kept_aliases"]

# As ruff reads a noqa: `noqa` in any case, then either codes after a colon (case-sensitive;
# none valid makes it no noqa at all) or anything else, which makes it a blanket noqa.
_NOQA = re.compile(r"#\s*(?i:noqa)(?P<colon>\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*)?)?")


def kept_aliases(
    statement: cst.SimpleStatementLine | cst.SimpleStatementSuite,
    node: cst.Import | cst.ImportFrom,
    exports: Collection[str],
) -> list[cst.ImportAlias]:
    """The aliases of import `node`, a statement of the line `statement` (or of the suite
    after ``if x:``), that the user marked to keep; `exports` are the names in the module's
    ``__all__`` (`exports`), for an import at module level."""
    if isinstance(node.names, cst.ImportStar):
        return []
    # The comment that ends each line of the statement, and the line each alias starts on.
    ends: list[cst.Comment | None] = []
    starts: list[int] = []

    def line_break(whitespace: cst.BaseParenthesizableWhitespace) -> None:
        if isinstance(whitespace, cst.ParenthesizedWhitespace):
            ends.append(whitespace.first_line.comment)

    if isinstance(node, cst.ImportFrom) and node.lpar is not None:
        line_break(node.lpar.whitespace_after)
    for alias in node.names:
        starts.append(len(ends))
        if isinstance(alias.comma, cst.Comma):
            line_break(alias.comma.whitespace_before)
            line_break(alias.comma.whitespace_after)
    if isinstance(node, cst.ImportFrom) and node.rpar is not None:
        line_break(node.rpar.whitespace_before)
    ends.append(statement.trailing_whitespace.comment)
    marked = [_noqa_f401(comment) for comment in ends]
    return [
        alias
        for alias, line in zip(node.names, starts, strict=True)
        if marked[0] or marked[line] or _redundant(alias) or alias_binds(node, alias) in exports
    ]


def _noqa_f401(comment: cst.Comment | None) -> bool:
    """Whether `comment` holds a noqa that covers F401."""
    for match in _NOQA.finditer(comment.value if comment is not None else ""):
        if not match["colon"]:
            return True
        if match["codes"] is not None and "F401" in re.split(r"[\s,]+", match["codes"]):
            return True
    return False


def _redundant(alias: cst.ImportAlias) -> bool:
    return (
        alias.asname is not None
        and isinstance(alias.name, cst.Name)
        and isinstance(alias.asname.name, cst.Name)
        and alias.asname.name.value == alias.name.value
    )


def alias_binds(node: cst.Import | cst.ImportFrom, alias: cst.ImportAlias) -> str:
    """The name one alias of an import binds: ``jax`` for ``import jax.numpy``."""
    if alias.asname is not None:
        return alias.evaluated_alias or ""
    return alias.evaluated_name.partition(".")[0] if isinstance(node, cst.Import) else alias.evaluated_name


def exports(module: cst.Module) -> frozenset[str]:
    """The names listed in `module`'s ``__all__`` (see the module's docstring)."""
    names = set()
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign):
                targets = [target.target for target in small.targets]
            elif isinstance(small, cst.AnnAssign) or (
                isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign)
            ):
                targets = [small.target]
            else:
                continue
            if any(isinstance(target, cst.Name) and target.value == "__all__" for target in targets) and isinstance(
                small.value, (cst.List, cst.Tuple)
            ):
                for element in small.value.elements:
                    if isinstance(element.value, cst.SimpleString | cst.ConcatenatedString):
                        value = element.value.evaluated_value
                        names.update([value] if isinstance(value, str) else [])
    return frozenset(names)
