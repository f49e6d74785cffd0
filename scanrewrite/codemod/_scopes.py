"""libcst's scopes of a module, analysed only over the top-level statements that can matter.

libcst's `ScopeProvider` over a whole module costs about three parses. Every question the
transforms ask of it is about a few names: those an import binds to a known API or a module
above one (`jax`, `lax`, `scan`, `functools`, ...), the parts of those APIs' names, and the
names the statements that may hold a call read (a scanned function bound elsewhere).
`module_scopes` runs libcst's analysis over a module of only the top-level statements that
can change an answer, found with Python's own parser (ten times faster than libcst's):

- those that mention a part of a known API's name past its package (``lax``, ``scan``,
  ``checkpoint``, ...) or a name bound to a known API itself: they may hold a call;
- those that bind, at module level, a name that matters or a name a kept statement mentions
  (until no more are found), or that say ``global``;
- those that mention a name bound by a relevant import other than as a plain read of it:
  a read (a `Name` it binds nowhere, in any scope) is the one thing a statement can do with
  such a name without changing an answer, save whether the import is still used: those
  names are `Scopes.read_elsewhere`, which the unused-import analyses consult.

The other statements never reach libcst's analysis. A module that Python's parser does not
take, or that has a star import (which binds names no one can list), is analysed whole.
The node objects are those of `module`: the scopes answer for its nodes as libcst's would.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping

import libcst as cst
from libcst.metadata import GlobalScope, Scope

from scanrewrite.codemod._parsing import python_nodes, python_tree
from scanrewrite.codemod._splice import statement_groups, statement_start
from scanrewrite.codemod._walk import scope_metadata
from scanrewrite.targets import TARGETS
from scanrewrite.wrappers import PARTIAL, WRAPPERS

__all__ = ["Scopes", "module_scopes"]

#: Every qualified name a resolver of the transforms looks for.
_WANTED = frozenset(
    [
        *(target.qualified_name for target in TARGETS),
        *(target.replacement for target in TARGETS),
        *(wrapper.qualified_name for wrapper in WRAPPERS),
        PARTIAL,
        "flax.nnx.remat",
        "flax.linen.remat",
        "flax.linen.checkpoint",
    ]
)
#: The parts of those names: bound anywhere, they may change what a name resolves to.
_PARTS = frozenset(part for name in _WANTED for part in name.split("."))
#: The parts of the targets' names past their package: a statement that may call one (or
#: the runtime in its place) mentions one of them, or a name an import binds to one.
_TAILS = frozenset(
    part for target in TARGETS for name in (target.qualified_name, target.replacement) for part in name.split(".")[1:]
)
_WORD = re.compile(r"\w+")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class Scopes(Mapping[cst.CSTNode, "Scope | None"]):
    """What `wrapper.resolve(ScopeProvider)` gives for the nodes of the analysed statements
    (the module itself maps to its global scope); nodes of other statements are absent."""

    def __init__(
        self,
        scopes: Mapping[cst.CSTNode, Scope | None],
        module: cst.Module,
        read_elsewhere: frozenset[str] = frozenset(),
        analysed: cst.Module | None = None,
        python_tree: ast.Module | None = None,
        starts: Mapping[cst.CSTNode, int] | None = None,
    ) -> None:
        self._scopes = scopes
        self._module = module
        #: The module of the statements analysed (`module` itself, or one of some of its
        #: statements): a walk for what resolves need visit only it.
        self.analysed = module if analysed is None else analysed
        self._global = scopes.get(self.analysed)
        #: Names a statement left out of the analysis reads at module level: any global
        #: binding of one of them (an import) is used there.
        self.read_elsewhere = read_elsewhere
        #: The module's code as Python's parser reads it, where it was read.
        self.python_tree = python_tree
        #: The line each analysed top-level statement's code starts on (its leading blank
        #: lines and comments included), where known: `node_lines` counts from there.
        self.starts = starts or {}

    def __getitem__(self, node: cst.CSTNode) -> Scope | None:
        if node is self._module:
            return self._global
        return self._scopes[node]

    def __contains__(self, node: object) -> bool:
        return node is self._module or node in self._scopes

    def __iter__(self) -> Iterator[cst.CSTNode]:
        return iter(self._scopes)

    def __len__(self) -> int:
        return len(self._scopes)

    def with_scope(self, node: cst.CSTNode, scope: Scope | None) -> Scopes:
        """These scopes, with `node` (a node made up by the caller) in `scope`."""
        scopes = {**self._scopes, node: scope}
        return Scopes(scopes, self._module, self.read_elsewhere, self.analysed, self.python_tree, self.starts)

    def used_elsewhere(self, assignment: object) -> bool:
        """Whether a statement left out of the analysis reads the binding `assignment`."""
        name = getattr(assignment, "name", "")
        return isinstance(getattr(assignment, "scope", None), GlobalScope) and name.partition(".")[0] in self.read_elsewhere


def module_scopes(module: cst.Module, code: str, tree: ast.Module | None = None) -> Scopes:
    """The scopes of `module` (whose code is `code`, and `tree` as Python's parser reads it,
    where the caller has it), analysed over what can matter (see the module's docstring)."""
    tree = python_tree(code) if tree is None else tree
    kept = None if tree is None else _kept_statements(module, code, tree)
    if kept is None:
        return Scopes(scope_metadata(module), module, python_tree=tree)
    statements, read_elsewhere, starts = kept
    reduced = module.with_changes(body=statements)
    return Scopes(scope_metadata(reduced), module, read_elsewhere, reduced, tree, starts)


def _kept_statements(
    module: cst.Module, code: str, tree: ast.Module
) -> tuple[list[cst.CSTNode], frozenset[str], dict[cst.CSTNode, int]] | None:
    """The top-level statements of `module` (whose code is `code`, as Python's parser reads
    it `tree`) to analyse, the names the others read, and the line each analysed statement
    starts on; None where the whole module must be analysed."""
    groups = statement_groups(module, tree)
    if groups is None:
        return None
    # Line breaks as Python's tokenizer has them (`str.splitlines` also breaks at a form feed).
    lines = _LINE_BREAK.split(code)
    relevant = set(_PARTS)  # names that matter: bound to a known API, or parts of one
    direct = set(_TAILS)  # names whose mention means a known API may be named
    imported: set[str] = set()  # names a relevant import binds
    words = [_words(group, lines) for _, group in groups]
    # Only a statement that says `import` holds one: the others need no walk.
    holding = (statement for (_, group), word in zip(groups, words) if "import" in word for statement in group)
    for node in python_nodes(holding):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                bound, meaning = _binding(node, alias)
                if meaning is None or any(
                    wanted == meaning or wanted.startswith(meaning + ".") for wanted in _WANTED
                ):
                    relevant.add(bound)
                    imported.add(bound)
                    if meaning is None or any(
                        meaning in (target.qualified_name, target.replacement) for target in TARGETS
                    ):
                        direct.add(bound)
    keep = [bool(word & direct) or "global" in word for word in words]
    bindings: list[set[str] | None] = [None] * len(groups)
    reads: dict[int, set[str] | None] = {}
    wanted = set(relevant)
    changed = True
    while changed:
        for index in range(len(groups)):
            if keep[index]:
                wanted |= words[index]
        changed = False
        for index, (_, group) in enumerate(groups):
            if keep[index]:
                continue
            if bindings[index] is None:
                bindings[index] = {name for statement in group for name in _module_bindings(statement)}
            mentioned = words[index] & imported
            if mentioned and index not in reads:
                reads[index] = _plain_reads(group, mentioned)
            if bindings[index] & wanted or (mentioned and reads[index] is None):
                keep[index] = changed = True
    read_elsewhere = {name for index, names in reads.items() if not keep[index] for name in names or ()}
    statements = [statement for (statement, _), kept in zip(groups, keep) if kept]
    starts = {statement: statement_start(statement, group) for (statement, group), kept in zip(groups, keep) if kept}
    return statements, frozenset(read_elsewhere), starts


def _words(group: list[ast.stmt], lines: list[str]) -> set[str]:
    """The words written in the lines of `group` (names, attributes, words in strings)."""
    first = min(
        [statement.lineno for statement in group]
        + [decorator.lineno for statement in group for decorator in getattr(statement, "decorator_list", ())]
    )
    last = max(statement.end_lineno or statement.lineno for statement in group)
    return set(_WORD.findall("\n".join(lines[first - 1 : last])))


def _binding(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple[str, str | None]:
    """The name an import alias binds and the qualified name it binds it to (None for a
    relative import, which may bind anything)."""
    if isinstance(node, ast.Import):
        if alias.asname:
            return alias.asname, alias.name
        root = alias.name.partition(".")[0]
        return root, root
    if node.level or not node.module:
        return alias.asname or alias.name, None
    return alias.asname or alias.name, f"{node.module}.{alias.name}"


_DEFINITIONS = frozenset([ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef])
#: The nodes other than a `Name` that `_bound_here` finds names bound by.
_BINDERS = frozenset([ast.alias, ast.ExceptHandler, ast.MatchAs, ast.MatchStar, ast.MatchMapping, ast.arg, ast.Global, ast.Nonlocal])


def _module_bindings(node: ast.AST) -> Iterator[str]:
    """The names `node` may bind at module level (a superset: a comprehension's targets too)."""
    # Not into a def's, class's or lambda's body: it binds in a scope of its own.
    for found in python_nodes([node], bodies=False):
        kind = type(found)
        if kind in _DEFINITIONS:
            yield found.name
        if kind is not ast.arg:  # a parameter binds in its function's scope
            yield from _bound_here(found)


def _bound_here(node: ast.AST) -> Iterator[str]:
    """The names `node` itself binds (not its children)."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        yield node.id
    elif isinstance(node, ast.alias):
        yield node.asname or node.name.partition(".")[0]
    elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
        yield node.name
    elif isinstance(node, ast.MatchMapping) and node.rest:
        yield node.rest
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        yield from node.names


def _plain_reads(group: list[ast.stmt], names: set[str]) -> set[str] | None:
    """Those of `names` that `group` reads as a plain `Name`, if it binds none of them in any
    scope and writes none in a string (libcst reads names in a string annotation); else None.
    (Elsewhere a name is only a word: an attribute's, or a comment's.)"""
    read: set[str] = set()
    for node in python_nodes(group):  # (in any order: any one of the cases below decides)
        kind = type(node)  # (by type: this walks most of a module's statements)
        if kind is ast.Name:
            if node.id in names:
                if not isinstance(node.ctx, ast.Load):
                    return None
                read.add(node.id)
        elif kind is ast.Constant:
            if isinstance(node.value, str) and not names.isdisjoint(_WORD.findall(node.value)):
                return None
        elif kind in _DEFINITIONS:
            if node.name in names:
                return None
        elif kind in _BINDERS and any(bound in names for bound in _bound_here(node)):
            return None
    return read
