"""How a reverted call names its API again, and the import that needs (see `_revert`).

Through the most specific import in reach of the call (`scan` from ``from jax.lax import
scan``, else `lax.scan` from ``from jax import lax``, else `jax.lax.scan` from ``import
jax``); where none is left, the name goes into the file's module-level ``from jax import ...``
line, in the sorters' order and the line's own layout, else ``import jax`` is added.

Only an import that has surely run when the call runs can spell it: one in the straight-line
body of its scope (not under ``if TYPE_CHECKING:``, in a ``try``, a loop or any other branch),
and above the call unless the call waits in a function until later.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import FunctionScope, Scope

from scanrewrite.codemod.imports import sort_key
from scanrewrite.codemod._parsing import top_level_indices
from scanrewrite.targets import Target

__all__ = ["Spellings"]


def _bound_by(node: cst.Import | cst.ImportFrom) -> list[tuple[str, str]]:
    """(name, what it names) for each name the import binds: ``import jax.numpy`` binds
    ``jax`` to `jax`; ``from jax import lax as L``, ``L`` to `jax.lax`. None for a star or
    relative import."""
    if isinstance(node, cst.Import):
        bound = []
        for alias in node.names:
            full = get_full_name_for_node(alias.name) or ""
            if alias.asname is not None:
                bound.append((alias.evaluated_alias or "", full))
            else:
                bound.append((full.partition(".")[0], full.partition(".")[0]))
        return bound
    if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
        return []
    module = get_full_name_for_node(node.module)
    return [(alias.evaluated_alias or alias.evaluated_name, f"{module}.{alias.evaluated_name}") for alias in node.names]


class Spellings:
    """How each reverted call names its API, and the imports that needs."""

    def __init__(
        self,
        module: cst.Module,
        scopes: Mapping[cst.CSTNode, Scope | None],
        line_length: int,
        calls: Collection[cst.Call],
        holders: Collection[cst.CSTNode] | None = None,
        top_level: Mapping[cst.CSTNode, cst.CSTNode] | None = None,
    ) -> None:
        self._module = module
        self._scopes = scopes
        self._line_length = line_length
        #: Each call's top-level statement's index in the module's body (`top_level`, where
        #: the caller knows each call's top-level statement, spares a walk).
        if top_level is not None and all(call in top_level for call in calls):
            index = {statement: position for position, statement in enumerate(module.body)}
            self.statement_of = {call: index[top_level[call]] for call in calls}
        else:
            self.statement_of = top_level_indices(module, calls)
        imports = _Imports(calls, holders)
        # Scopes analysed over some statements only (`Scopes.analysed`) know the imports of
        # those alone, and hold every import that binds a known API: the others need no walk.
        getattr(scopes, "analysed", module).visit(imports)
        #: Every (name, what it names) an import in the analysed statements binds, in file order.
        self._bindings = list(dict.fromkeys(pair for node in imports.found for pair in _bound_by(node)))
        #: Each import and call's place in file order; the imports that surely run have one.
        self._order = imports.order
        #: Top-level packages to add ``import NAME`` for.
        self.import_top: list[str] = []
        #: The names the chosen spellings start with.
        self.roots: set[str] = set()
        #: Index in the module's body of a ``from X import ...`` line -> names to add to it.
        self._additions: dict[int, list[str]] = {}

    def _means(self, call: cst.Call, name: str, *, surely: bool = True) -> str | None:
        """What `name` names at `call`: the one thing its imports bind it to; None if it is
        unbound there or bound to anything else, or, where `surely`, if no import that binds
        it has surely run when the call does."""
        scope: Scope | None = self._scopes.get(call)
        if scope is None:
            return None
        meanings = set()
        run = False
        for assignment in scope[name]:
            imported = getattr(assignment, "node", None)
            if not isinstance(imported, (cst.Import, cst.ImportFrom)):
                return None
            meanings.update(meaning for bound, meaning in _bound_by(imported) if bound == name)
            run = run or self._has_run(imported, assignment.scope, call, scope)
        return meanings.pop() if len(meanings) == 1 and (run or not surely) else None

    def _has_run(self, imported: cst.CSTNode, bound_in: Scope, call: cst.Call, scope: Scope) -> bool:
        """Whether the import `imported`, binding in `bound_in`, has surely run when `call`
        (in `scope`) runs: it is on its scope's straight-line path, and above the call or
        in a scope a function between them leaves behind before the call can run."""
        if imported not in self._order:
            return False
        while scope is not bound_in and scope is not scope.parent:
            if isinstance(scope, FunctionScope):
                return True
            scope = scope.parent
        return self._order[imported] < self._order[call]

    def _unbound(self, node: cst.CSTNode, name: str) -> bool:
        scope = self._scopes.get(node)
        module_scope = self._scopes.get(self._module)
        return scope is not None and not scope[name] and (module_scope is None or not module_scope[name])

    def choose(self, call: cst.Call, target: Target) -> str | None:
        """The callee's text for `call`, scheduling the import it needs; None if none works."""
        spelling = self._choose(call, target)
        if spelling is not None:
            self.roots.add(spelling.partition(".")[0])
        return spelling

    def _choose(self, call: cst.Call, target: Target) -> str | None:
        qualified = target.qualified_name
        reachable = [
            (name, meaning)
            for name, meaning in self._bindings
            if (qualified == meaning or qualified.startswith(meaning + ".")) and self._means(call, name) == meaning
        ]
        if reachable:
            name, meaning = max(reachable, key=lambda pair: len(pair[1]))
            return name + qualified[len(meaning) :]
        addition = self._from_import(call, qualified)
        if addition is not None:
            index, package, name = addition
            names = self._additions.setdefault(index, [])
            if name not in names:
                names.append(name)
            return name + qualified[len(f"{package}.{name}") :]
        top = qualified.partition(".")[0]
        # A name that only an import of `top` binds, if not surely, is `top` wherever bound:
        # a plain ``import top`` beside it makes the call sure.
        if not self._unbound(call, top) and self._means(call, top, surely=False) != top:
            return None
        if top not in self.import_top:
            self.import_top.append(top)
        return qualified

    def _from_import(self, call: cst.Call, qualified: str) -> tuple[int, str, str] | None:
        """(index of a module-level ``from P import ...`` line before `call`, P, the name to
        add to it) for the most specific package P above `qualified` the file imports names
        from, where the name is free and the line would still fit; None if there is none."""
        parts = qualified.split(".")
        first = self.statement_of.get(call, len(self._module.body))
        for depth in range(len(parts) - 1, 0, -1):
            package, name = ".".join(parts[:depth]), parts[depth]
            if not self._unbound(call, name):
                continue
            for index, statement in enumerate(self._module.body[:first]):
                node = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
                if (
                    isinstance(node, cst.ImportFrom)
                    and not node.relative
                    and not isinstance(node.names, cst.ImportStar)
                    and node.module is not None
                    and get_full_name_for_node(node.module) == package
                    and self._fits(statement, name)
                ):
                    return index, package, name
        return None

    def _fits(self, statement: cst.SimpleStatementLine, name: str) -> bool:
        node = statement.body[0]
        assert isinstance(node, cst.ImportFrom)
        if node.lpar is not None:
            return True
        return len(_code(_with_name(statement, name)).splitlines()[-1]) <= self._line_length

    def extend_from_imports(self, module: cst.Module) -> cst.Module:
        """`module` (this one, its top-level statements in place) with the names scheduled
        by `choose` added to its ``from`` lines."""
        if not self._additions:
            return module
        body = list(module.body)
        for index, names in self._additions.items():
            for name in names:
                body[index] = _with_name(body[index], name)
        return module.with_changes(body=body)


#: Statements whose bodies may not run, or not to the end, when the statement does. A
#: ``with`` body runs whenever its statement does, and a function or class body starts a
#: straight-line path of its own; a ``try`` is a branch unless each handler ends in `raise` or `sys.exit`.
_BRANCHES = (cst.If, cst.Try, cst.TryStar, cst.For, cst.While, cst.Match, cst.ExceptHandler, cst.ExceptStarHandler)


def _branches(node: cst.CSTNode) -> bool:
    if isinstance(node, (cst.Try, cst.TryStar)):
        return not node.handlers or not all(_ends_in_raise(handler.body) for handler in node.handlers)
    return isinstance(node, _BRANCHES)


#: Calls that end the program, as `raise` ends a handler.
_EXITS = frozenset({"sys.exit", "exit", "quit", "os._exit"})


def _ends_in_raise(body: cst.BaseSuite) -> bool:
    last = body.body[-1] if isinstance(body, cst.IndentedBlock) else body
    if not isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return False
    statement = last.body[-1]
    if isinstance(statement, cst.Raise):
        return True
    return (
        isinstance(statement, cst.Expr)
        and isinstance(statement.value, cst.Call)
        and get_full_name_for_node(statement.value.func) in _EXITS
    )


class _Imports(cst.CSTVisitor):
    """Collects every import in file order (`found`), and numbers, in file order, the
    given calls and the imports on their scope's straight-line path (`order`)."""

    def __init__(self, calls: Collection[cst.Call], holders: Collection[cst.CSTNode] | None = None) -> None:
        super().__init__()
        self._calls = set(calls)
        #: The nodes that hold the calls (None: any may); no other expression holds either.
        self._holders = holders
        self.found: list[cst.Import | cst.ImportFrom] = []
        self.order: dict[cst.CSTNode, int] = {}
        #: Per scope entered, how many branches deep the visit is in it.
        self._depth = [0]

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self._depth.append(0)
        elif _branches(node):
            self._depth[-1] += 1
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            self.found.append(node)
            if self._depth[-1] == 0:
                self.order[node] = len(self.order)
            return False
        if node in self._calls:
            self.order[node] = len(self.order)
        # An expression holds no import (a statement), so only one that holds a call counts.
        return self._holders is None or not isinstance(node, cst.BaseExpression) or node in self._holders

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, (cst.FunctionDef, cst.ClassDef)):
            self._depth.pop()
        elif _branches(original_node):
            self._depth[-1] -= 1


def _name_key(name: str) -> tuple[int, str]:
    """The sorters' order of the names in a ``from`` import: constants, classes, the rest."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, sort_key(name)


def _with_name(statement: cst.SimpleStatementLine, name: str) -> cst.SimpleStatementLine:
    """``from P import a, c`` as ``from P import a, NAME, c``, in the sorters' order and
    the line's own layout."""
    node = statement.body[0]
    assert isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar)
    names = list(node.names)
    position = next((i for i, alias in enumerate(names) if _name_key(alias.evaluated_name) > _name_key(name)), len(names))
    if len(names) > 1:
        separator = names[max(position - 1, 0)].comma if position < len(names) else names[-2].comma
    elif node.lpar is not None:
        separator = cst.Comma(whitespace_after=node.lpar.whitespace_after)
    else:
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    # A comment that ends a name's line (a `# noqa: F401`) stays with that name.
    new = cst.ImportAlias(name=cst.Name(name), comma=_line_end(separator, None))
    if position == len(names):
        new = new.with_changes(comma=_line_end(names[-1].comma, None))
        names[-1] = names[-1].with_changes(comma=_line_end(separator, _first_line(names[-1].comma)))
    names.insert(position, new)
    return statement.with_changes(body=[node.with_changes(names=names)])


def _first_line(comma: cst.Comma | cst.MaybeSentinel) -> cst.TrailingWhitespace | None:
    """The end of the line that `comma` ends, if it ends one."""
    after = comma.whitespace_after if isinstance(comma, cst.Comma) else None
    return after.first_line if isinstance(after, cst.ParenthesizedWhitespace) else None


def _line_end(comma: cst.Comma | cst.MaybeSentinel, end: cst.TrailingWhitespace | None) -> cst.Comma | cst.MaybeSentinel:
    """`comma` with `end` (None: no comment) as the end of the line it ends, if it ends one."""
    first = _first_line(comma)
    if first is None:
        return comma
    assert isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)
    end = end or cst.TrailingWhitespace(newline=first.newline)
    return comma.with_changes(whitespace_after=comma.whitespace_after.with_changes(first_line=end))


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)
