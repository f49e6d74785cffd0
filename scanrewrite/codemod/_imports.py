"""Import editing: the imports a rewrite adds and the ones it leaves unused.

Scheduled through libcst's `AddImportsVisitor` / `RemoveImportsVisitor` context, so that
`ScanRewriteCommand` behaves as any libcst codemod, and applied here with two changes to
libcst's visitors: a removed import keeps the blank lines and comments above it, and an
added import adds only its own line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.helpers import get_full_name_for_node
from libcst.metadata import MetadataWrapper, Scope

__all__ = ["apply_scheduled_imports", "schedule_import_removal"]


def schedule_import_removal(
    context: CodemodContext,
    wrapper: MetadataWrapper,
    scopes: Mapping[cst.CSTNode, Scope | None],
    callees: list[cst.BaseExpression],
) -> None:
    """Hand `RemoveImportsVisitor` the imports that only the replaced `callees` used.

    It removes an import only if nothing uses it any more; asking it only about
    imports with no other use in the original tree spares its whole-module pass in
    the common case where the import is still needed.
    """
    replaced: set[cst.CSTNode] = set()
    for callee in callees:
        callee.visit(_NodeCollector(replaced))
    context = replace(context, wrapper=wrapper)
    scheduled: set[tuple[str, Scope | None]] = set()
    for callee in callees:
        # The same spelling in the same scope finds the same imports.
        name = get_full_name_for_node(callee)
        if name is not None and (name, scopes[callee]) in scheduled:
            continue
        root = callee
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name):
            continue
        if any(
            isinstance(getattr(assignment, "node", None), (cst.Import, cst.ImportFrom))
            and all(access.node in replaced for access in assignment.references)
            for assignment in scopes[root][root.value]
        ):
            RemoveImportsVisitor.remove_unused_import_by_node(context, callee)
            if name is not None:
                scheduled.add((name, scopes[callee]))


def apply_scheduled_imports(module: cst.Module, context: CodemodContext) -> cst.Module:
    """`module` with the import additions and removals scheduled in `context` made.

    As `CodemodCommand.transform_module` would make them, except that removing an
    import keeps the blank lines and comments above it (libcst's
    `RemoveImportsVisitor` drops them) and adding one adds only its own line
    (libcst's `AddImportsVisitor` also adds a blank line after the import block
    when there is none).
    """
    if AddImportsVisitor.CONTEXT_KEY in context.scratch:
        # Visited directly: `transform_module` would copy the tree for metadata
        # that `AddImportsVisitor` does not use.
        module = module.visit(_AddImportsOnly(context))
    if RemoveImportsVisitor.CONTEXT_KEY in context.scratch:
        # As `transform_module`, without its deep copy of the tree: the only nodes
        # that occur twice in it are whitespace `append_args` reused, whose
        # metadata nobody reads.
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        module = wrapper.visit(_RemoveImportsKeepingLines(replace(context, wrapper=wrapper)))
    return module


_Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement


class _AddImportsOnly(AddImportsVisitor):
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


class _RemoveImportsKeepingLines(RemoveImportsVisitor):
    """`RemoveImportsVisitor` that moves a removed line's leading blank lines and comments
    onto the statement after it (or the end of its block), so they stay where they were."""

    def __init__(self, context: CodemodContext) -> None:
        super().__init__(context)
        self._pending: list[cst.EmptyLine] = []
        self._receivers: dict[cst.CSTNode, list[cst.EmptyLine]] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._pending and isinstance(node, _Statement):
            self._receivers[node] = self._pending
            self._pending = []
        # Imports are statements, so nothing inside an expression changes: skip the
        # bulk of the tree (its unused-import analysis still sees all of it).
        return super().on_visit(node) and not isinstance(node, cst.BaseExpression)

    def on_leave(
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        updated = super().on_leave(original_node, updated_node)
        lines = self._receivers.pop(original_node, None)
        if lines is not None:
            if isinstance(updated, _Statement):
                updated = updated.with_changes(leading_lines=[*lines, *updated.leading_lines])
            else:
                self._pending = [*lines, *self._pending]
        if (
            isinstance(original_node, cst.SimpleStatementLine)
            and isinstance(updated, cst.SimpleStatementLine)
            and not updated.body
        ):
            self._pending.extend(original_node.leading_lines)
        elif self._pending and isinstance(updated, (cst.IndentedBlock, cst.Module)):
            updated = updated.with_changes(footer=[*self._pending, *updated.footer])
            self._pending = []
        return updated



class _NodeCollector(cst.CSTVisitor):
    """Adds every node of the visited tree to a set."""

    def __init__(self, nodes: set[cst.CSTNode]) -> None:
        super().__init__()
        self._nodes = nodes

    def on_visit(self, node: cst.CSTNode) -> bool:
        self._nodes.add(node)
        return True

