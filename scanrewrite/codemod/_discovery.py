"""Call-site discovery: which names in a module resolve to a known API, and where.

`may_rewrite` screens raw bytes before anything is parsed; `Resolver` resolves a name
or attribute to a `Target` through libcst's scope analysis (an import must bind it, so
a local `scan` or `lax` never counts); `Survey` walks a module and collects the calls
and other references that resolve; `call_pragma` is the pragma that applies to a call.
"""

from __future__ import annotations

import ast
import bisect
import functools
from collections.abc import Callable, Collection, Mapping
from typing import Generic, NamedTuple, TypeVar

import libcst as cst
from libcst.metadata import QualifiedNameSource, Scope

from scanrewrite.codemod._parsing import python_tree
from scanrewrite.pragmas import Pragma
from scanrewrite.targets import DEFAULT_TARGETS, Target, select

__all__ = ["NodeIndex", "Resolver", "Survey", "binds_package", "call_pragma", "may_rewrite", "read_pragmas", "take_survey"]


class _Spelling(NamedTuple):
    """What every spelling of a selection's targets contains."""

    #: The last names of the targets ("scan", "fori_loop", ...).
    last_names: frozenset[str]
    #: Per target, the bytes its spelling contains: its last name and its top package.
    spelled: tuple[tuple[bytes, bytes], ...]
    #: What an import must bind for a name to resolve to a target: the target itself, its
    #: module, or a package above it ("jax", "jax.lax", "jax.lax.scan", ...).
    bindings: frozenset[str]


@functools.cache
def _spelling(names: str | tuple[str, ...]) -> _Spelling:
    targets = select(names)
    return _Spelling(
        frozenset(target.qualified_name.rpartition(".")[2] for target in targets),
        tuple(
            (target.qualified_name.rpartition(".")[2].encode(), target.qualified_name.partition(".")[0].encode())
            for target in targets
        ),
        frozenset(
            target.qualified_name.rsplit(".", depth)[0]
            for target in targets
            for depth in range(target.qualified_name.count(".") + 1)
        ),
    )


def may_rewrite(source: bytes, targets: str | Collection[str] = DEFAULT_TARGETS) -> bool:
    """False only if `rewrite(source, targets=targets)` certainly has nothing to rewrite or
    report.

    A shortcut past libcst's metadata for the many files that never name a target:
    resolving a name to `jax.lax.scan` needs an import that binds the target, its module
    or a package above it (`jax`, `jax.lax`, ...) and the identifier `scan` somewhere
    (a name, an attribute or an imported name). Checked with Python's own parser, ten
    times faster than libcst's; source it rejects may change (the rewrite reports it), and
    so may source with a pragma, which is reported even where nothing resolves.
    """
    if b"scanrewrite" in source:
        return True
    return _may_rewrite(source, targets if isinstance(targets, str) else tuple(targets))


# The command line asks before it calls `rewrite`, which asks again: the last answers are kept.
@functools.lru_cache(maxsize=2)
def _may_rewrite(source: bytes, targets: str | tuple[str, ...]) -> bool:
    spelling = _spelling(targets)
    if not any(last in source and package in source for last, package in spelling.spelled):
        return False
    tree = python_tree(source)
    if tree is None:
        return True
    imports = names = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            # `import jax.numpy` binds `jax`; `import jax.lax as L` binds `jax.lax`.
            imports = imports or any(
                (alias.name if alias.asname else alias.name.partition(".")[0]) in spelling.bindings
                for alias in node.names
            )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                bound = node.module if alias.name == "*" else f"{node.module}.{alias.name}"
                imports = imports or bound in spelling.bindings
                names = names or alias.name in spelling.last_names
        elif isinstance(node, ast.Attribute):
            names = names or node.attr in spelling.last_names
        elif isinstance(node, ast.Name):
            names = names or node.id in spelling.last_names
        if imports and names:
            return True
    return False



_T = TypeVar("_T")


class Resolver(Generic[_T]):
    """Resolves names and attributes in one module to the targets they name.

    `names` maps each qualified name to find (``"jax.lax.scan"`` for the rewrite,
    ``"scanrewrite.runtime.scan"`` for the write-back, ``"jax.checkpoint"`` for a
    wrapper) to its target. Only a name bound by an import, or an attribute spelled like
    a wanted last name, is looked up at all: the qualified-name lookup is the costly part.
    """

    def __init__(self, scopes: Mapping[cst.CSTNode, Scope | None], names: Mapping[str, _T]) -> None:
        self.scopes = scopes
        self._names = names
        self._last_names = frozenset(name.rpartition(".")[2] for name in names)
        #: Local names bound by an import somewhere in the module.
        self._imported = {
            assignment.name.partition(".")[0]
            for scope in set(scopes.values())
            if scope is not None
            for assignment in scope.assignments
            if isinstance(getattr(assignment, "node", None), (cst.Import, cst.ImportFrom))
        }

    def resolve(self, node: cst.BaseExpression) -> _T | str | None:
        """The target `node` names; a reason string when it may also name something else."""
        if isinstance(node, cst.Name):
            if node.value not in self._imported:
                return None
        elif not (isinstance(node, cst.Attribute) and node.attr.value in self._last_names):
            return None
        # What `QualifiedNameProvider` would give `node`, for this one node.
        scope = self.scopes.get(node)
        qualified = scope.get_qualified_names_for(node) if scope is not None else set()
        # A local class `jax` with a nested class `lax` is also "jax.lax.scan", but not
        # imported: only an import makes it jax's.
        imported = {q.name for q in qualified if q.source is QualifiedNameSource.IMPORT}
        names = {q.name for q in qualified}
        for name, target in self._names.items():
            if name in imported:
                if len(names) > 1:
                    return f"callee may be something other than {name}"
                hidden = _hidden_root(node, scope)
                return target if hidden is None else f"the name `{hidden}` is bound to something else here"
        return None

    def module_name_usable(self, node: cst.CSTNode, name: str) -> bool:
        """Whether the name `name` at `node` is unbound or bound only by `import name[.sub]`,
        so that a module-level `import name...` makes it mean that package."""
        assignments = self.scopes[node][name]
        return all(binds_package(assignment, name) for assignment in assignments)


def call_pragma(pragmas: Mapping[int, Pragma], first: int, last: int) -> Pragma:
    """The pragma that applies to a call on lines `first` to `last`.

    A pragma counts on the call's first line or its last (closing-bracket) line, never on
    a line in between: those belong to its arguments, and a pragma for a nested call there
    must not leak out to this one.
    """
    pragma = pragmas.get(first, Pragma())
    if last != first:
        pragma = pragma.merge(pragmas.get(last, Pragma()))
    return pragma


#: The node types a `NodeIndex` notes, and those whose extent it notes (libcst's node
#: classes are final: a node's exact type is one of these or not).
_INDEXED = frozenset([cst.Call, cst.FunctionDef, cst.Assign, cst.AnnAssign, cst.Lambda])
_EXTENDED = frozenset([cst.FunctionDef, cst.Lambda])


class NodeIndex:
    """What a walk of a module in libcst's order learns for `_checkpoints`: the order of its
    calls, defs and name assignment targets, the value assigned to each such target, and
    which found nodes lie inside each def and lambda. Relative order within a subtree is
    the same as in a walk of that subtree alone."""

    def __init__(self) -> None:
        #: Each call, def and name target of an assignment, by the order it is visited in.
        self.order: dict[cst.CSTNode, int] = {}
        #: The value assigned to each name target in `order`.
        self.values: dict[cst.CSTNode, cst.BaseExpression] = {}
        #: The preorder numbers of the first and the last node of each def and lambda.
        self.extents: dict[cst.CSTNode, tuple[int, int]] = {}
        #: The preorder number of each found call and reference.
        self.found_at: dict[cst.CSTNode, int] = {}

    def enter(self, node: cst.CSTNode, number: int) -> None:
        """Note `node`, visited `number`th."""
        if isinstance(node, (cst.Call, cst.FunctionDef)):
            self.order[node] = len(self.order)
        elif isinstance(node, cst.Assign):
            for target in node.targets:
                self._bind(target.target, node.value)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self._bind(node.target, node.value)
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            self.extents[node] = (number, number)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.order[target] = len(self.order)
            self.values[target] = value

    def inside(self, function: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        """The found nodes within the def or lambda `function`, in the order they are visited."""
        start, end = self.extents[function]
        # Found nodes are numbered as they are entered, so `found_at` is in preorder.
        numbers = list(self.found_at.values())
        nodes = list(self.found_at)
        return tuple(nodes[bisect.bisect_left(numbers, start) : bisect.bisect_right(numbers, end)])


class Survey(cst.CSTVisitor):
    """The calls and the other references that resolve to a target, in the order they
    are reported: a reference when it is visited, a call when it is left."""

    def __init__(self, resolve: Callable[[cst.BaseExpression], Target | str | None], index: bool = False) -> None:
        super().__init__()
        self._resolve = resolve
        self._callees: dict[cst.BaseExpression, Target | str] = {}
        #: (call, its target or why it is ambiguous), (reference, its target).
        self.found: list[tuple[cst.Call | cst.Name | cst.Attribute, Target | str]] = []
        #: The nodes that hold a found one (the module, statements, blocks, ...): what a
        #: transform of the found nodes must descend into.
        self.holders: set[cst.CSTNode] = set()
        #: The top-level statement that holds each found node.
        self.top_level: dict[cst.CSTNode, cst.CSTNode] = {}
        self._path: list[cst.CSTNode] = []
        #: With `index`, what `NodeIndex` promises, read on this same walk (a walk of its own
        #: costs about as much as parsing the statements it walks).
        self.index = NodeIndex() if index else None
        #: How many nodes were visited so far (the preorder number of the node being visited).
        self._visited = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        self._path.append(node)
        self._visited += 1
        # By exact type: this runs for every node of the statements walked.
        if self.index is not None and type(node) in _INDEXED:
            self.index.enter(node, self._visited)
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        super().on_leave(original_node)
        self._path.pop()
        if self.index is not None and type(original_node) in _EXTENDED:
            start, _ = self.index.extents[original_node]
            self.index.extents[original_node] = (start, self._visited)

    def _found(self, node: cst.Call | cst.Name | cst.Attribute, resolved: Target | str) -> None:
        self.found.append((node, resolved))
        if self.index is not None and not isinstance(node, cst.Call):
            self.index.found_at[node] = self._visited
        self.holders.update(self._path)
        if len(self._path) > 1 and isinstance(self._path[0], cst.Module):
            self.top_level[node] = self._path[1]

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        resolved = self._resolve(node.func)
        if resolved is not None:
            self._callees[node.func] = resolved
            if self.index is not None:
                # Found when it is left, a call has its place where it is entered.
                self.index.found_at[node] = self._visited

    def leave_Call(self, original_node: cst.Call) -> None:
        resolved = self._callees.get(original_node.func)
        if resolved is not None:
            self._found(original_node, resolved)

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._reference(node)

    def _reference(self, node: cst.Name | cst.Attribute) -> None:
        if node in self._callees:
            return
        resolved = self._resolve(node)
        if isinstance(resolved, Target):
            self._found(node, resolved)



def take_survey(
    module: cst.Module, scopes: Mapping[cst.CSTNode, Scope | None], resolve: Callable, index: bool = False
) -> Survey:
    """The `Survey` of `module` with `resolve`, walking only the statements `scopes` analysed
    (`Scopes.analysed`): no other holds a name that resolves. With `index`, its `index` is
    the `NodeIndex` of those statements."""
    found = Survey(resolve, index)
    getattr(scopes, "analysed", module).visit(found)
    found.holders.add(module)
    return found


def _hidden_root(node: cst.BaseExpression, scope: Scope) -> str | None:
    """The name `node` starts with if something other than an import binds it where `node` is:
    libcst finds `jax.lax` of ``import jax.lax`` past a parameter `jax` that hides it."""
    root = node
    while isinstance(root, cst.Attribute):
        root = root.value
    if root is node or not isinstance(root, cst.Name):
        return None
    bound = scope[root.value]
    if bound and not any(isinstance(getattr(a, "node", None), (cst.Import, cst.ImportFrom)) for a in bound):
        return root.value
    return None


def binds_package(assignment: object, package: str) -> bool:
    """Whether a scope assignment of the name `package` is `import package[.sub]`."""
    node = getattr(assignment, "node", None)
    if not isinstance(node, cst.Import):
        return False
    for alias in node.names:
        name, asname = alias.evaluated_name, alias.evaluated_alias
        if asname is None and name.split(".")[0] == package:
            return True
        if asname == package and name == package:
            return True
    return False



def read_pragmas(
    comments: list[tuple[cst.Comment, Pragma]], lines: Mapping[cst.CSTNode, tuple[int, int]]
) -> tuple[dict[int, Pragma], int | None]:
    """The pragmas by line (several on one line merged), and the line of the first
    `skip-file` pragma, if any (the pragmas after it are not read)."""
    pragmas: dict[int, Pragma] = {}
    for comment, pragma in comments:
        line = lines[comment][0]
        if pragma.skip_file:
            return pragmas, line
        pragmas[line] = pragmas[line].merge(pragma) if line in pragmas else pragma
    return pragmas, None
