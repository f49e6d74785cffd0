"""Import editing: the imports a rewrite adds and the ones it leaves unused.

Scheduled through libcst's `AddImportsVisitor` / `RemoveImportsVisitor` context, so that
`ScanRewriteCommand` behaves as any libcst codemod, and applied here with two changes to
libcst's visitors: a removed import keeps the blank lines and comments above it, and an
added import adds only its own line.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, ImportItem, RemoveImportsVisitor
from libcst.helpers import get_full_name_for_node
from libcst.metadata import MetadataWrapper, Scope

from scanrewrite.codemod._import_order import add_import, sort_key

__all__ = ["apply_scheduled_imports", "schedule_import_removal"]


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
    replaced: set[cst.CSTNode] = set()
    for callee in callees:
        callee.visit(_NodeCollector(replaced))
    context = replace(context, wrapper=wrapper)
    scheduled: set[tuple[str, Scope | None]] = set()
    unused: dict[cst.CSTNode, set[str]] = {}  # import node -> names only the callees used
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
        imports = [
            assignment.node
            for assignment in scopes[root][root.value]
            if isinstance(getattr(assignment, "node", None), (cst.Import, cst.ImportFrom))
            and all(access.node in replaced for access in assignment.references)
        ]
        if imports:
            RemoveImportsVisitor.remove_unused_import_by_node(context, callee)
            if name is not None:
                scheduled.add((name, scopes[callee]))
            for node in imports:
                unused.setdefault(node, set()).add(root.value)
    return {
        index
        for index, statement in enumerate(wrapper.module.body)
        if isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and statement.body[0] in unused
        and _bound_names(statement.body[0]) <= unused[statement.body[0]]
    }


def _bound_names(node: cst.BaseSmallStatement) -> set[str]:
    """The names an import binds (``*`` for a star import, whose names are unknown)."""
    assert isinstance(node, (cst.Import, cst.ImportFrom))
    if isinstance(node.names, cst.ImportStar):
        return {"*"}
    if isinstance(node, cst.Import):
        return {alias.evaluated_alias or alias.evaluated_name.partition(".")[0] for alias in node.names}
    return {alias.evaluated_alias or alias.evaluated_name for alias in node.names}


def apply_scheduled_imports(
    module: cst.Module,
    context: CodemodContext,
    first_use: int | None = None,
    dropped: Collection[int] = (),
    first_party: Collection[str] = (),
    collapse_blank_lines: bool = False,
) -> cst.Module:
    """`module` with the import additions and removals scheduled in `context` made.

    As `CodemodCommand.transform_module` would make them, except that removing an
    import keeps the blank lines and comments above it (libcst's
    `RemoveImportsVisitor` drops them) and an added ``import x`` goes where import
    sorters put it (see `_import_order`), before the top-level statement at index
    `first_use`, adding only its own line and the blank lines a section needs.
    `dropped` are the indices of the import lines that will be removed; `first_party`
    the top-level names of the user's own packages. With `collapse_blank_lines`, the blank
    lines above a removed line are dropped where the next statement starts with blank lines
    of its own (an import section of one line gone, as the sorters leave it).
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
        # As `transform_module`, without its deep copy of the tree: the only nodes
        # that occur twice in it are whitespace `append_args` reused, whose
        # metadata nobody reads.
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        module = wrapper.visit(_RemoveImportsKeepingLines(replace(context, wrapper=wrapper), collapse_blank_lines))
    return module


def _plain(item: ImportItem) -> bool:
    """Whether `item` is a plain ``import x``."""
    return item.obj_name is None and item.alias is None and not item.relative


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

    def __init__(self, context: CodemodContext, collapse_blank_lines: bool = False) -> None:
        super().__init__(context)
        self._collapse = collapse_blank_lines
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


def _blank(lines: list[cst.EmptyLine]) -> bool:
    return all(line.comment is None for line in lines)


class _NodeCollector(cst.CSTVisitor):
    """Adds every node of the visited tree to a set."""

    def __init__(self, nodes: set[cst.CSTNode]) -> None:
        super().__init__()
        self._nodes = nodes

    def on_visit(self, node: cst.CSTNode) -> bool:
        self._nodes.add(node)
        return True
