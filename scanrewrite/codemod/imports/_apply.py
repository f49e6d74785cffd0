"""Import editing: the imports a rewrite adds and the ones it leaves unused.

Scheduled in an `ImportEdits` as libcst's `AddImportsVisitor` / `RemoveImportsVisitor` schedule
them, and made here as libcst would make them, with two changes: a removed import keeps the
blank lines and comments above it (`_removal`), and an added import adds only its own
line, where import sorters put it (`_placement`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import Scope

from scanrewrite.codemod.imports._edits import ImportEdits
from scanrewrite.codemod.imports._kept import alias_binds as _alias_binds
from scanrewrite.codemod.imports._kept import exports, kept_aliases
from scanrewrite.codemod.imports._placement import add_import, sort_key
from scanrewrite.codemod.imports._removal import ImportRemover
from scanrewrite.codemod.imports._unused import NodeCollector, schedule_removal

__all__ = ["apply_scheduled_imports", "schedule_import_removal", "unused_imports", "whole_lines"]


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


def apply_scheduled_imports(
    module: cst.Module,
    edits: ImportEdits,
    first_use: int | None = None,
    dropped: Collection[int] = (),
    first_party: Collection[str] = (),
    unused: Mapping[cst.ImportAlias, cst.Import | cst.ImportFrom] | None = None,
) -> cst.Module:
    """`module` with the import additions and removals `edits` schedules made.

    As libcst's `CodemodCommand.transform_module` would make them, except that removing an
    import keeps the blank lines and comments above it (libcst's `RemoveImportsVisitor`
    drops them) and an added ``import x`` goes where import sorters put it (see
    `_placement`), before the top-level statement at index `first_use`, adding only its
    own line and the blank lines a section needs. `dropped` are the indices of the import
    lines that will be removed; `first_party` the top-level names of the user's own packages.
    `unused` are the import names that are unused once the edit is made (`unused_after_edit`,
    read off the tree before it), the same objects in `module`: only those are removed.
    """
    dropped = set(dropped)
    for name in sorted(set(edits.added), key=sort_key):
        module, index = add_import(module, name, first_use, dropped, first_party)
        if index is not None:
            first_use = None if first_use is None else first_use + 1
            dropped = {i + 1 if i >= index else i for i in dropped}
    if edits.removed:
        unused = {} if unused is None else unused
        remover = ImportRemover(edits, unused)
        remover.only_top_level(module, list(unused.values()))
        module = module.visit(remover)
    return module
