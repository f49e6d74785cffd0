"""Which imports an edit leaves unused, decided as libcst's `RemoveImportsVisitor` decides
it, but read off the scopes of the tree before the edit.

libcst's visitor analyses the scopes of the whole edited module again (and builds a
matcher visitor per scheduled callee); the rewrite knows what it replaces and what it
adds, so the scopes it already has answer the same question.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping

import libcst as cst
from libcst.metadata import GlobalScope, ImportAssignment, MetadataWrapper, Scope
from libcst.metadata.scope_provider import _gen_dotted_names

from scanrewrite.codemod._parsing import python_tree
from scanrewrite.codemod.imports._edits import ImportEdits
from scanrewrite.codemod.imports._string_names import Exports, StringAnnotationNames

__all__ = ["NodeCollector", "policy_uses", "unused_after_edit"]


def unused_after_edit(
    edits: ImportEdits,
    module: cst.Module,
    scopes: Mapping[cst.CSTNode, Scope | None],
    gone: list[cst.BaseExpression],
    new_uses: Collection[object] = (),
    code: str | None = None,
) -> dict[cst.ImportAlias, cst.Import | cst.ImportFrom]:
    """The import names that libcst's `GatherUnusedImportsVisitor` would find unused in
    `module` once the expressions in `gone` are replaced, among those whose removal is
    scheduled in `edits`, read off the scopes of `module` before the edit.

    `new_uses` are the scope assignments that the edit reads anew (``jax`` for a written
    checkpoint policy). A name stays in use as libcst has it: read elsewhere, listed in
    `__all__`, or named in a string annotation. `code` is `module.code`, where the caller has it.
    """
    scheduled = {
        name
        for module_name, obj, _ in edits.removed
        for name in ((module_name,) if obj is None else (obj,))
    }
    if not scheduled:
        return {}
    replaced: set[cst.CSTNode] = set()
    for expression in gone:
        expression.visit(NodeCollector(replaced))
    new_uses = set(new_uses)
    imports = {
        assignment.node
        for scope in {scope for scope in scopes.values() if scope is not None}
        for assignment in scope.assignments
        if isinstance(getattr(assignment, "node", None), (cst.Import, cst.ImportFrom))
    }

    # (Scopes analysed over some statements only know which bindings the others read.)
    elsewhere = getattr(scopes, "used_elsewhere", lambda assignment: False)

    def read(scope: Scope, name: str) -> bool:
        return any(
            isinstance(assignment, ImportAssignment)
            and (
                assignment in new_uses
                or elsewhere(assignment)
                or any(access.node not in replaced for access in assignment.references)
            )
            for assignment in scope[name]
        )

    unused: dict[cst.ImportAlias, cst.Import | cst.ImportFrom] = {}
    for node in imports:
        if isinstance(node.names, cst.ImportStar) or (
            isinstance(node, cst.ImportFrom) and (node.module is None or _module_value(node) == "__future__")
        ):
            continue
        scope = scopes.get(node)
        if scope is None:
            continue
        for alias in node.names:
            if alias.evaluated_name not in scheduled:
                continue
            if not any(read(scope, name) for name in _local_names(alias)):
                unused[alias] = node
    if unused:
        names = {name for alias in unused for name in _local_names(alias)}
        tree = getattr(scopes, "python_tree", None)
        exported, annotated = _named_in_strings(module, names, module.code if code is None else code, tree)
        # `__all__` names module-level names: it keeps no import in a function (as in ruff).
        unused = {
            alias: node
            for alias, node in unused.items()
            if not (annotated | (exported if isinstance(scopes.get(node), GlobalScope) else set()))
            & set(_local_names(alias))
        }
    return unused


def _module_value(node: cst.ImportFrom) -> object:
    return node.module.value if isinstance(node.module, cst.Name) else None


def _local_names(alias: cst.ImportAlias) -> list[str]:
    return [name for name, _ in _gen_dotted_names(alias.asname.name if alias.asname else alias.name)]


def _named_in_strings(
    module: cst.Module, names: set[str], code: str, tree: ast.Module | None = None
) -> tuple[set[str], set[str]]:
    """Those of `names` that libcst counts as used by `__all__`, and those it counts as used
    by a string annotation.

    Its visitors walk the whole module (the one for annotations with qualified names of
    every call and subscript), so they run only where one of `names` is written in a
    string that may be one of those. `tree` is `code` as Python's parser reads it, where
    the caller has it.
    """
    if not any(name in code for name in names) or not _may_name(code, names, tree):
        return set(), set()
    exports = Exports()
    module.visit(exports)
    annotations = StringAnnotationNames()
    MetadataWrapper(module, unsafe_skip_copy=True).visit(annotations)
    return names & exports.names, names & annotations.names


def _may_name(code: str, names: set[str], tree: ast.Module | None = None) -> bool:
    """Whether a string literal of `code` (whose tree `tree` is, if given) that libcst may read
    names from holds one of `names`: one in an annotation, in a call, or assigned (`__all__`);
    any of `code` where it does not parse with Python's parser. (One walk, which stops at the
    first such string: it may pass over the whole module.)"""
    tree = python_tree(code) if tree is None else tree
    if tree is None:
        return True
    stack: list[tuple[ast.AST, bool]] = [(statement, False) for statement in tree.body]
    while stack:
        node, read = stack.pop()
        kind = type(node)
        if kind is ast.Constant:
            if read and isinstance(node.value, str) and any(name in node.value for name in names):
                return True
            continue
        read = read or kind in _READ_WHOLE
        # An argument's annotation and a function's return annotation are read, not the rest.
        annotation = node.annotation if kind is ast.arg else getattr(node, "returns", None) if kind in _DEFINITIONS else None
        stack.extend((child, read or child is annotation) for child in ast.iter_child_nodes(node))
    return False


#: Statements and expressions whose strings libcst may read names from, wherever in them.
_READ_WHOLE = frozenset([ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Call])
_DEFINITIONS = frozenset([ast.FunctionDef, ast.AsyncFunctionDef])


def policy_uses(scopes: Mapping[cst.CSTNode, Scope | None], calls: Mapping[cst.CSTNode, list[cst.Arg]]) -> set[object]:
    """The bindings of `jax` that the checkpoint policies (``jax.checkpoint_policies.NAME``)
    among the arguments added to `calls` read (a runtime policy reads none)."""
    return {
        assignment
        for call, added in calls.items()
        if any(arg.keyword is not None and arg.keyword.value == "checkpoint" and _reads_jax(arg.value) for arg in added)
        for assignment in scopes[call]["jax"]
    }


def _reads_jax(value: cst.BaseExpression) -> bool:
    while isinstance(value, cst.Attribute):
        value = value.value
    return isinstance(value, cst.Name) and value.value == "jax"


class NodeCollector(cst.CSTVisitor):
    """Adds every node of the visited tree to a set (or, in visit order, to a dict's keys)."""

    def __init__(self, nodes: set[cst.CSTNode] | dict[cst.CSTNode, None]) -> None:
        super().__init__()
        self._nodes = nodes

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(self._nodes, dict):
            self._nodes[node] = None
        else:
            self._nodes.add(node)
        return True
