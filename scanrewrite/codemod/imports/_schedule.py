"""Which imports a rewrite schedules for removal: those that only the calls it replaces read,
named as libcst's `RemoveImportsVisitor.remove_unused_import_by_node` names them, and the
top-level import lines that go whole.

Scheduled is not removed: `_unused` decides which scheduled names nothing reads after the
edit, and `_removal` removes only those.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import libcst as cst
from libcst.helpers import get_absolute_module_from_package_for_import, get_full_name_for_node
from libcst.metadata import Assignment, Scope

from scanrewrite.codemod.imports._edits import ImportEdits
from scanrewrite.codemod.imports._kept import alias_binds as _alias_binds
from scanrewrite.codemod.imports._kept import exports, kept_aliases
from scanrewrite.codemod.imports._unused import NodeCollector

__all__ = ["schedule_import_removal", "schedule_removal", "unused_imports", "whole_lines"]


def schedule_import_removal(
    edits: ImportEdits,
    module: cst.Module,
    scopes: Mapping[cst.CSTNode, Scope | None],
    callees: list[cst.BaseExpression],
) -> set[int]:
    """Schedule in `edits` the removal of the imports of `module` that only the replaced
    `callees` used, and return the indices of the top-level import lines that go whole.

    An import is removed only if nothing uses it any more; scheduling only imports with
    no other use in the original tree spares the check in the common case where the
    import is still needed.
    """
    unused = unused_imports(scopes, callees)
    unused_names = {name for names in unused.values() for name in names}
    scheduled: set[tuple[str, Scope | None]] = set()
    for callee in callees:
        # The same spelling in the same scope finds the same imports.
        name = get_full_name_for_node(callee)
        if (name, scopes[callee]) in scheduled or _root(callee) not in unused_names:
            continue
        schedule_removal(edits, scopes, callee)
        if name is not None:
            scheduled.add((name, scopes[callee]))
    return whole_lines(module, unused)


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
            # `import a.b` binds `a` and `a.b`, and the accesses are the latter's: all count; the
            # other names of `from a import b, c` do not.
            if not isinstance(node, (cst.Import, cst.ImportFrom)):
                continue
            bindings = [
                same
                for same in assignment.scope.assignments
                if getattr(same, "node", None) is node and (same.name == root or same.name.startswith(f"{root}."))
            ]
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


def schedule_removal(edits: ImportEdits, scopes: Mapping[cst.CSTNode, Scope | None], callee: cst.BaseExpression) -> None:
    """What libcst's `RemoveImportsVisitor.remove_unused_import_by_node(context, callee)` does:
    schedule (in `edits`) the removal of every import that binds a name or attribute in
    `callee`, in its scope or one around it."""
    nodes: dict[cst.CSTNode, None] = {}  # in the order libcst's visitor meets them
    callee.visit(NodeCollector(nodes))
    for node in (node for node in nodes if isinstance(node, (cst.Name, cst.Attribute))):
        local_name = get_full_name_for_node(node)
        scope = scopes.get(node)
        if local_name is None or scope is None:
            continue
        while True:
            for assignment in scope.assignments[node] or set():
                imported = getattr(assignment, "node", None)
                if isinstance(assignment, Assignment) and isinstance(imported, (cst.Import, cst.ImportFrom)):
                    _schedule_aliases(edits, local_name, imported)
            if scope is scope.parent:
                break
            scope = scope.parent


def _schedule_aliases(edits: ImportEdits, local_name: str, node: cst.Import | cst.ImportFrom) -> None:
    """Schedule the names of `node` that `local_name` reads (as libcst's `RemovedNodeVisitor`)."""
    if isinstance(node.names, cst.ImportStar):
        return
    module = None
    if isinstance(node, cst.ImportFrom):
        module = get_absolute_module_from_package_for_import(edits.package, node)
        if module is None:
            raise ValueError("Cannot look up absolute module from relative import!")
    for alias in node.names:
        prefix = alias.evaluated_name if alias.evaluated_alias is None else alias.evaluated_alias
        if local_name == prefix or local_name.startswith(f"{prefix}."):
            if module is None:
                edits.remove(alias.evaluated_name, asname=alias.evaluated_alias)
            else:
                edits.remove(module, obj=alias.evaluated_name, asname=alias.evaluated_alias)
