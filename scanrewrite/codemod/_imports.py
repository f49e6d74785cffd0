"""Import editing: the imports a rewrite adds and the ones it leaves unused.

Scheduled through libcst's `AddImportsVisitor` / `RemoveImportsVisitor` context, so that
`ScanRewriteCommand` behaves as any libcst codemod, and applied here with two changes to
libcst's visitors: a removed import keeps the blank lines and comments above it, and an
added import adds only its own line.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, GatherUnusedImportsVisitor, ImportItem, RemoveImportsVisitor
from libcst.helpers import get_full_name_for_node
from libcst.metadata import GlobalScope, MetadataWrapper, Scope

from scanrewrite.codemod._import_order import add_import, sort_key
from scanrewrite.codemod._import_uses import NodeCollector, schedule_removal
from scanrewrite.codemod._kept_imports import alias_binds as _alias_binds
from scanrewrite.codemod._kept_imports import exports, kept_aliases
from scanrewrite.codemod._matchers import NoMatcherSearch

__all__ = ["ImportPruner", "apply_scheduled_imports", "schedule_import_removal", "unused_imports", "whole_lines"]


def schedule_import_removal(
    context: CodemodContext,
    wrapper: MetadataWrapper,
    scopes: Mapping[cst.CSTNode, Scope | None],
    callees: list[cst.BaseExpression],
) -> set[int]:
    """Hand `RemoveImportsVisitor` the imports that only the replaced `callees` used, and
    return the indices of the top-level import lines it will remove whole.

    It removes an import only if nothing uses it any more; asking it only about
    imports with no other use in the original tree spares its whole-module pass in
    the common case where the import is still needed.
    """
    unused = unused_imports(scopes, callees)
    unused_names = {name for names in unused.values() for name in names}
    context = replace(context, wrapper=wrapper)
    scheduled: set[tuple[str, Scope | None]] = set()
    for callee in callees:
        # The same spelling in the same scope finds the same imports.
        name = get_full_name_for_node(callee)
        if (name, scopes[callee]) in scheduled or _root(callee) not in unused_names:
            continue
        schedule_removal(context, scopes, callee)
        if name is not None:
            scheduled.add((name, scopes[callee]))
    return whole_lines(wrapper.module, unused)


def unused_imports(
    scopes: Mapping[cst.CSTNode, Scope | None], gone: list[cst.BaseExpression]
) -> dict[cst.CSTNode, set[str]]:
    """The import nodes whose names only the expressions in `gone` read, and those names."""
    replaced: set[cst.CSTNode] = set()
    for expression in gone:
        expression.visit(NodeCollector(replaced))
    unused: dict[cst.CSTNode, set[str]] = {}
    # (Scopes analysed over some statements only know which bindings the others read.)
    elsewhere = getattr(scopes, "used_elsewhere", lambda assignment: False)
    for expression in gone:
        root = _root(expression)
        if root is None:
            continue
        for assignment in scopes[expression][root]:
            node = getattr(assignment, "node", None)
            # `import a.b` binds `a` and `a.b`, and the accesses are the latter's: all count.
            if not isinstance(node, (cst.Import, cst.ImportFrom)):
                continue
            bindings = [same for same in assignment.scope.assignments if getattr(same, "node", None) is node]
            if not any(elsewhere(same) for same in bindings) and all(
                access.node in replaced for same in bindings for access in same.references
            ):
                unused.setdefault(node, set()).add(root)
    return unused


def _root(expression: cst.BaseExpression) -> str | None:
    """The name an attribute chain starts with (``jax`` in ``jax.lax.scan``), if any."""
    while isinstance(expression, cst.Attribute):
        expression = expression.value
    return expression.value if isinstance(expression, cst.Name) else None


def _bound_names(node: cst.BaseSmallStatement) -> set[str]:
    """The names an import binds (``*`` for a star import, whose names are unknown)."""
    assert isinstance(node, (cst.Import, cst.ImportFrom))
    if isinstance(node.names, cst.ImportStar):
        return {"*"}
    return {_alias_binds(node, alias) for alias in node.names}


def whole_lines(module: cst.Module, unused: Mapping[cst.CSTNode, Collection[str]]) -> set[int]:
    """The indices of the top-level import lines that lose every name they import (none of
    them one the user marked to keep, `kept_aliases`)."""
    names = exports(module)
    return {
        index
        for index, statement in enumerate(module.body)
        if isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and statement.body[0] in unused
        and _bound_names(statement.body[0]) <= set(unused[statement.body[0]])
        and not kept_aliases(statement, statement.body[0], names)
    }


def apply_scheduled_imports(
    module: cst.Module,
    context: CodemodContext,
    first_use: int | None = None,
    dropped: Collection[int] = (),
    first_party: Collection[str] = (),
    unused: Mapping[cst.ImportAlias, cst.Import | cst.ImportFrom] | None = None,
) -> cst.Module:
    """`module` with the import additions and removals scheduled in `context` made.

    As `CodemodCommand.transform_module` would make them, except that removing an
    import keeps the blank lines and comments above it (libcst's
    `RemoveImportsVisitor` drops them) and an added ``import x`` goes where import
    sorters put it (see `_import_order`), before the top-level statement at index
    `first_use`, adding only its own line and the blank lines a section needs.
    `dropped` are the indices of the import lines that will be removed; `first_party`
    the top-level names of the user's own packages. `unused` are the import names that
    are unused once the edit is made (`unused_after_edit`, read off the tree before it),
    the same objects in `module`; None has libcst find them in `module`, at the cost of
    a scope analysis of the whole module.
    """
    items = context.scratch.get(AddImportsVisitor.CONTEXT_KEY, [])
    dropped = set(dropped)
    for name in sorted({item.module for item in items if _plain(item)}, key=sort_key):
        module, index = add_import(module, name, first_use, dropped, first_party)
        if index is not None:
            first_use = None if first_use is None else first_use + 1
            dropped = {i + 1 if i >= index else i for i in dropped}
    others = [item for item in items if not _plain(item)]
    if others:
        # Not scheduled by the rewrite, which adds only `import x`: as libcst would add
        # them, visited directly (`transform_module` would copy the tree for metadata
        # that `AddImportsVisitor` does not use).
        scratch = {**context.scratch, AddImportsVisitor.CONTEXT_KEY: others}
        module = module.visit(_AddImportsOnly(replace(context, scratch=scratch)))
    if RemoveImportsVisitor.CONTEXT_KEY in context.scratch:
        if unused is None:
            # As `transform_module`, without its deep copy of the tree: the only nodes
            # that occur twice in it are whitespace `append_args` reused, whose
            # metadata nobody reads.
            wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
            module = wrapper.visit(_RemoveImportsKeepingLines(replace(context, wrapper=wrapper)))
        else:
            remover = _RemoveImportsKeepingLines(context, unused=unused)
            remover.only_top_level(module, list(unused.values()))
            module = module.visit(remover)
    return module


def _plain(item: ImportItem) -> bool:
    """Whether `item` is a plain ``import x``."""
    return item.obj_name is None and item.alias is None and not item.relative


_Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement


class _AddImportsOnly(NoMatcherSearch, AddImportsVisitor):
    """`AddImportsVisitor` that adds the import lines and no blank line after them.

    It adds only `import x` lines, which go between module-level statements, so it
    does not descend below them.
    """

    def on_visit(self, node: cst.CSTNode) -> bool:
        return super().on_visit(node) and isinstance(node, cst.Module)

    def visit_Module(self, node: cst.Module) -> None:
        # It finds the imports already there in the first statement (a docstring) and
        # the import lines after it, but by visiting the whole module: show it only those.
        end = 1
        while end < len(node.body) and _is_import_line(node.body[end]):
            end += 1
        super().visit_Module(node.with_changes(body=node.body[: end + 1]))

    def _insert_empty_line(self, statements: list[_Statement]) -> list[_Statement]:
        return statements


def _is_import_line(statement: _Statement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], (cst.Import, cst.ImportFrom))
    )


class _KeepsLines:
    """For a transformer that removes import lines: it moves a removed line's leading blank
    lines and comments onto the statement after it (or the end of its block), so they stay
    where they were; with `collapse_blank_lines`, blank lines only are dropped where that
    statement starts with blank lines of its own."""

    def __init__(self, *args: object, collapse_blank_lines: bool = False) -> None:
        super().__init__(*args)
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


class _RemoveImportsKeepingLines(NoMatcherSearch, _KeepsMarked, _KeepsLines, RemoveImportsVisitor):
    """`RemoveImportsVisitor` that keeps the lines above a removed import (`_KeepsLines`) and
    the imports the user marked to keep (`_KeepsMarked`), and takes the unused import names it
    may remove as `unused`, where the caller knows them."""

    def __init__(
        self, context: CodemodContext, unused: Mapping[cst.ImportAlias, cst.Import | cst.ImportFrom] | None = None
    ) -> None:
        super().__init__(context)
        self._known_unused = unused

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            for alias in self._kept(node):
                self._unused_imports.pop(alias, None)
        # Imports are statements, so nothing inside an expression changes: skip the
        # bulk of the tree (its unused-import analysis still sees all of it).
        return super().on_visit(node) and not isinstance(node, cst.BaseExpression)

    def visit_Module(self, node: cst.Module) -> None:
        if self._known_unused is not None:
            self._unused_imports = dict(self._known_unused)
            return
        visitor = _GatherUnused(self.context)
        node.visit(visitor)
        self._unused_imports = dict(visitor.unused_imports)

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.ImportFrom | cst.RemovalSentinel:
        updated = super().leave_ImportFrom(original_node, updated_node)
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


class _GatherUnused(NoMatcherSearch, GatherUnusedImportsVisitor):
    """libcst's, but a name in `__all__` uses only a module-level import of it, as in ruff."""

    def is_in_use(self, scope: Scope, alias: cst.ImportAlias) -> bool:
        exported = self._exported_names
        if not isinstance(scope, GlobalScope):
            self._exported_names = set()
        try:
            return super().is_in_use(scope, alias)
        finally:
            self._exported_names = exported


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
