"""Removing imports: the import lines and names a transform leaves unused go, the blank lines
and comments above them stay, and so do the imports the user marked to keep.

`ImportRemover` makes the removals an `ImportEdits` schedules, deciding each as libcst's
`RemoveImportsVisitor` does: its `leave_Import` and `leave_ImportFrom` are adapted from
libcst/codemod/visitors/_remove_imports.py (LibCST 1.9, Copyright (c) Meta Platforms, Inc. and
affiliates, MIT license), so that the result is the same without importing `libcst.codemod`
(and with it `libcst.matchers`, whose import costs more than parsing a 1,000-line file).
`ImportPruner` removes the names its caller knows are unused, for the revert.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import libcst as cst
from libcst.helpers import get_absolute_module_from_package_for_import

from scanrewrite.codemod.imports._edits import ImportEdits
from scanrewrite.codemod.imports._kept import alias_binds as _alias_binds
from scanrewrite.codemod.imports._kept import exports, kept_aliases

__all__ = ["ImportPruner", "ImportRemover"]

_Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement


class _KeepsLines:
    """For a transformer that removes import lines: it moves a removed line's leading blank
    lines and comments onto the statement after it (or the end of its block), so they stay
    where they were; with `collapse_blank_lines`, blank lines only are dropped where that
    statement starts with blank lines of its own."""

    def __init__(self, *, collapse_blank_lines: bool = False) -> None:
        super().__init__()
        self._collapse = collapse_blank_lines
        self._pending: list[cst.EmptyLine] = []
        self._receivers: dict[cst.CSTNode, list[cst.EmptyLine]] = {}
        #: The statements that may hold an import to remove (None: any may).
        self._within: set[cst.CSTNode] | None = None

    def only_top_level(self, module: cst.Module, imports: Collection[cst.CSTNode]) -> None:
        """Descend only into the top-level lines of `module` that hold one of `imports`,
        if every one of them is on such a line: the rest of the tree keeps its lines."""
        lines = {
            statement
            for statement in module.body
            if isinstance(statement, cst.SimpleStatementLine) and any(small in imports for small in statement.body)
        }
        found = sum(small in imports for line in lines for small in line.body)
        self._within = lines if found == len(set(imports)) else None

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._pending and isinstance(node, _Statement):
            self._receivers[node] = self._pending
            self._pending = []
        descend = super().on_visit(node)
        return descend and (self._within is None or not isinstance(node, _Statement) or node in self._within)

    def on_leave(
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        updated = super().on_leave(original_node, updated_node)
        lines = self._receivers.pop(original_node, None)
        if lines is not None:
            removed = isinstance(updated, cst.SimpleStatementLine) and not updated.body
            if isinstance(updated, _Statement) and not removed:
                own = updated.leading_lines
                if not (self._collapse and _blank(lines) and own and own[0].comment is None):
                    updated = updated.with_changes(leading_lines=[*lines, *own])
            else:
                self._pending = [*lines, *self._pending]
        if (
            isinstance(original_node, cst.SimpleStatementLine)
            and isinstance(updated, cst.SimpleStatementLine)
            and not updated.body
        ):
            self._pending.extend(original_node.leading_lines)
        elif self._pending and isinstance(updated, (cst.IndentedBlock, cst.Module)):
            if self._collapse and _blank(self._pending):
                self._pending = []
            updated = updated.with_changes(footer=[*self._pending, *updated.footer])
            self._pending = []
        return updated


class _KeepsMarked:
    """For a transformer that removes imports: `_kept(node)` are the aliases of the import
    `node` the user marked to keep (`kept_aliases`), which it must not remove."""

    _exports: frozenset[str] = frozenset()
    _statement: cst.SimpleStatementLine | cst.SimpleStatementSuite | None = None
    #: How many functions and classes deep the visit is: `__all__` names module-level names.
    _depth = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Module):
            self._exports = exports(node)
        elif isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            self._statement = node
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self._depth += 1
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> object:
        if isinstance(original_node, (cst.FunctionDef, cst.ClassDef)):
            self._depth -= 1
        return super().on_leave(original_node, updated_node)

    def _kept(self, node: cst.Import | cst.ImportFrom) -> list[cst.ImportAlias]:
        assert self._statement is not None
        return kept_aliases(self._statement, node, self._exports if self._depth == 0 else ())


class ImportPruner(_KeepsMarked, _KeepsLines, cst.CSTTransformer):
    """A transformer that removes the names of `unused_imports` from their imports (the
    whole line when none is left), keeping the lines above it (`_KeepsLines`) and the
    imports the user marked to keep (`_KeepsMarked`).

    Without libcst's `RemoveImportsVisitor`, whose own unused-import analysis of the whole
    module costs several times the transform: the caller knows what is unused.
    """

    def __init__(self, unused: Mapping[cst.CSTNode, Collection[str]], collapse_blank_lines: bool = False) -> None:
        super().__init__(collapse_blank_lines=collapse_blank_lines)
        self._unused = unused

    def on_visit(self, node: cst.CSTNode) -> bool:
        return super().on_visit(node) and not isinstance(node, cst.BaseExpression)

    def leave_Import(
        self, original_node: cst.Import, updated_node: cst.Import
    ) -> cst.Import | cst.RemovalSentinel:
        return self._prune(original_node, updated_node)

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.ImportFrom | cst.RemovalSentinel:
        return self._prune(original_node, updated_node)

    def _prune(self, original_node, updated_node):
        unused = self._unused.get(original_node)
        if not unused or isinstance(updated_node.names, cst.ImportStar):
            return updated_node
        unused = set(unused) - {_alias_binds(original_node, alias) for alias in self._kept(original_node)}
        names = [alias for alias in updated_node.names if _alias_binds(updated_node, alias) not in unused]
        if not names:
            return cst.RemovalSentinel.REMOVE
        if len(names) < len(updated_node.names):
            names[-1] = names[-1].with_changes(comma=updated_node.names[-1].comma)
        return updated_node.with_changes(names=names)


def _blank(lines: list[cst.EmptyLine]) -> bool:
    return all(line.comment is None for line in lines)


class ImportRemover(_KeepsMarked, _KeepsLines, cst.CSTTransformer):
    """Removes the imports that `edits` schedules for removal, each only if it is among
    `unused` (the import names nothing uses once the edit is made, `unused_after_edit`, the
    same objects as in the visited tree), keeping the lines above a removed import
    (`_KeepsLines`) and the imports the user marked to keep (`_KeepsMarked`).

    Which names go, and how a shortened import is written, are libcst's `RemoveImportsVisitor`'s,
    but for one change: an import that ended in a comma ends in its old last name's.
    """

    def __init__(self, edits: ImportEdits, unused: Mapping[cst.ImportAlias, cst.Import | cst.ImportFrom]) -> None:
        super().__init__()
        self._package = edits.package
        self._unused_module_imports = {module: alias for module, obj, alias in edits.removed if obj is None}
        self._unused_obj_imports: dict[str, set[tuple[str, str | None]]] = {}
        for module, obj, alias in edits.removed:
            if obj is not None:
                self._unused_obj_imports.setdefault(module, set()).add((obj, alias))
        self._unused_imports = dict(unused)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            for alias in self._kept(node):
                self._unused_imports.pop(alias, None)
        # Imports are statements, so nothing inside an expression changes.
        return super().on_visit(node) and not isinstance(node, cst.BaseExpression)

    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import) -> cst.Import | cst.RemovalSentinel:
        names_to_keep = []
        for import_alias in original_node.names:
            if (
                import_alias.evaluated_name not in self._unused_module_imports
                or import_alias.evaluated_alias != self._unused_module_imports[import_alias.evaluated_name]
                or import_alias not in self._unused_imports
            ):
                names_to_keep.append(import_alias)
        # (libcst's comparison, of a list with the node's sequence, kept as it is.)
        if names_to_keep == original_node.names:
            return updated_node
        if not names_to_keep:
            return cst.RemovalSentinel.REMOVE
        if names_to_keep[-1] != original_node.names[-1]:
            names_to_keep = [*names_to_keep[:-1], names_to_keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
        return updated_node.with_changes(names=names_to_keep)

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.ImportFrom | cst.RemovalSentinel:
        updated = self._remove_from(original_node, updated_node)
        # libcst drops the comma after the new last name, and with it the line break before
        # `)`: an import that ended in a comma ends in its old last name's, as `ImportPruner`'s.
        if (
            isinstance(updated, cst.ImportFrom)
            and isinstance(original_node.names, Sequence)
            and isinstance(original_node.names[-1].comma, cst.Comma)
            and isinstance(updated.names, Sequence)
            and not isinstance(updated.names[-1].comma, cst.Comma)
        ):
            last = updated.names[-1].with_changes(comma=original_node.names[-1].comma)
            updated = updated.with_changes(names=[*updated.names[:-1], last])
        return updated

    def _remove_from(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.ImportFrom | cst.RemovalSentinel:
        """libcst's `RemoveImportsVisitor.leave_ImportFrom`."""
        names = original_node.names
        if isinstance(names, cst.ImportStar):
            return updated_node
        module_name = get_absolute_module_from_package_for_import(self._package, updated_node)
        if module_name is None or module_name not in self._unused_obj_imports:
            return updated_node
        updates = self._process_importfrom_aliases(updated_node, names, module_name)
        names_to_keep = updates["names"]
        if names_to_keep == names:
            return updated_node
        if not names_to_keep:
            return cst.RemovalSentinel.REMOVE
        if names_to_keep[-1] != names[-1]:
            names_to_keep = [*names_to_keep[:-1], names_to_keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
        updates["names"] = names_to_keep
        return updated_node.with_changes(**updates)

    def _process_importfrom_aliases(
        self, updated_node: cst.ImportFrom, names: Iterable[cst.ImportAlias], module_name: str
    ) -> dict[str, Any]:
        """libcst's: the names to keep, and the comments of a removed name moved onto the
        name before it (or the parenthesis)."""
        updates: dict[str, Any] = {}
        names_to_keep: list[cst.ImportAlias] = []
        objects_to_remove = self._unused_obj_imports[module_name]
        for import_alias in names:
            if (import_alias.evaluated_name, import_alias.evaluated_alias) not in objects_to_remove or (
                import_alias not in self._unused_imports
            ):
                names_to_keep.append(import_alias)
                continue
            # Only where a comma follows: otherwise the whole statement goes.
            comma = import_alias.comma
            if isinstance(comma, cst.Comma):
                if names_to_keep:
                    prev = names_to_keep[-1]
                    if isinstance(prev.comma, cst.Comma):
                        prev = prev.with_deep_changes(
                            prev.comma,
                            whitespace_after=_merge_whitespace_after(prev.comma.whitespace_after, comma.whitespace_after),
                        )
                    else:
                        prev = prev.with_changes(comma=comma)
                    names_to_keep[-1] = prev
                else:
                    lpar = updated_node.lpar
                    if isinstance(lpar, cst.LeftParen):
                        updates["lpar"] = lpar.with_changes(
                            whitespace_after=_merge_whitespace_after(lpar.whitespace_after, comma.whitespace_after)
                        )
        updates["names"] = names_to_keep
        return updates


def _merge_whitespace_after(
    left: cst.BaseParenthesizableWhitespace, right: cst.BaseParenthesizableWhitespace
) -> cst.BaseParenthesizableWhitespace:
    """libcst's: the whitespace after a removed name's comma keeps its comments."""
    if not isinstance(right, cst.ParenthesizedWhitespace):
        return left
    if not isinstance(left, cst.ParenthesizedWhitespace):
        return right
    return left.with_changes(empty_lines=tuple(line for line in right.empty_lines if line.comment is not None))
