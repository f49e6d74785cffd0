"""Scans applied rather than called, and the per-step Flax remat inside them.

Any scan may be bound with `functools.partial` and called later, as samplers write their loop
(`jax.jit(functools.partial(jax.lax.scan, one_step))(state, keys)`); `nnx.scan` is as often a
decorator as a call: bare (`@nnx.scan`), with its options (`@nnx.scan(in_axes=...)`, a call the
table already rewrites) or bound with `functools.partial(nnx.scan, in_axes=...)`. In a
`functools.partial`, the scan is swapped for its replacement and the new options are appended
to the partial (a keyword the later call passes wins over it, as the original's would); a bare
`nnx.scan` decorator becomes `@scanrewrite.runtime.nnx_scan(unroll=k)` (which returns the same
decorator). Both are planned here from the references the survey found, and replaced by
`_rewrite._ReplaceCalls`.

A scanned function wrapped in `nnx.remat`, `nn.remat` or `nn.checkpoint` (as the first
argument, or as the decorator right under the scan) is a per-step checkpoint that the runtime
takes over (`runtime._flax_absorb`, whatever its `static_argnums` or `policy`): it gets the
same `-v` note as a `jax.checkpoint` does.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, Scope, ScopeProvider

from scanrewrite.codemod._arguments import append_args
from scanrewrite.codemod._discovery import Resolver
from scanrewrite.layout import relayout
from scanrewrite.targets import Target

__all__ = ["Applied", "find_flax", "relayout_decorator", "replace_applied", "reverted_decorator", "runtime_partials"]

#: Flax's per-step checkpoints, by qualified name.
FLAX_REMATS = ("flax.nnx.remat", "flax.linen.remat", "flax.linen.checkpoint")
_PARTIAL = "functools.partial"
# What the resolver maps a found name to (a plain string would read as an ambiguity's reason).
_NAMED = "named"


def flax_resolver(scopes: Mapping[cst.CSTNode, Scope | None]) -> Resolver:
    """A resolver of `functools.partial` and the Flax remats, to `("named", qualified name)`."""
    return Resolver(scopes, {name: (_NAMED, name) for name in (_PARTIAL, *FLAX_REMATS)})


@dataclass(frozen=True)
class Applied:
    """A scan reference used as a decorator (`site` is the `cst.Decorator`) or bound by a
    `functools.partial` (`site` is that call)."""

    reference: cst.Name | cst.Attribute
    site: cst.Decorator | cst.Call
    #: The call the new arguments are planned against (the partial's other arguments).
    as_call: cst.Call
    #: The per-step Flax checkpoint under it, if any.
    remat: str | None = None


def flax_remat(expression: cst.BaseExpression | None, resolver: Resolver) -> str | None:
    """The qualified name of the Flax remat `expression` is or calls, else None."""
    if isinstance(expression, cst.Call):
        expression = expression.func
    if expression is None:
        return None
    found = resolver.resolve(expression)
    return found[1] if isinstance(found, tuple) and found[1] in FLAX_REMATS else None


def body_remat(call: cst.Call, target: Target, resolver: Resolver) -> str | None:
    """The Flax remat around the function (or module class) a Flax scan call scans, if any."""
    if not target.qualified_name.startswith("flax."):
        return None
    first = next((arg for arg in call.args if arg.keyword is None and not arg.star), None)
    named = next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == target.body), None)
    arg = first or named
    return flax_remat(arg.value, resolver) if arg is not None and isinstance(arg.value, cst.Call) else None


class _Finder(cst.CSTVisitor):
    def __init__(
        self,
        references: Mapping[cst.CSTNode, object],
        partial: Resolver,
        remats: Resolver,
        decorators: Collection[cst.CSTNode] = frozenset(),
    ) -> None:
        #: The references a `functools.partial` may bind, and those that may be a decorator.
        self.references, self.decorators = references, decorators
        self.partial = partial
        self.remats = remats
        self.found: dict[cst.CSTNode, Applied] = {}
        #: `@nnx.scan(...)` decorators (calls) with a Flax remat right under them.
        self.calls: set[cst.CSTNode] = set()
        self.call_remats: dict[cst.CSTNode, str] = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        decorators = node.decorators
        for index, decorator in enumerate(decorators):
            under = decorators[index + 1].decorator if index + 1 < len(decorators) else None
            remat = flax_remat(under, self.remats)
            if decorator.decorator in self.calls and remat is not None:
                self.call_remats[decorator.decorator] = remat
            if decorator.decorator in self.decorators:
                call = cst.Call(func=decorator.decorator)
                self.found[decorator.decorator] = Applied(decorator.decorator, decorator, call, remat)

    def visit_Call(self, node: cst.Call) -> None:
        if not node.args or node.args[0].keyword is not None or node.args[0].star:
            return
        reference = node.args[0].value
        if reference in self.references and self.partial.resolve(node.func) == (_NAMED, _PARTIAL):
            call = cst.Call(func=reference, args=node.args[1:])
            self.found[reference] = Applied(reference, node, call)


def find_applied(
    module: cst.Module, scopes: Mapping[cst.CSTNode, Scope | None], found: Sequence[tuple[cst.CSTNode, object]]
) -> tuple[dict[cst.CSTNode, Applied], dict[cst.CSTNode, str]]:
    """The references among `found` that are applied (bound by a `functools.partial`, or a
    selected `nnx.scan` as a decorator), by reference; and the `@nnx.scan(...)` decorator calls
    with a Flax remat right under them, to its name."""
    references = {node: True for node, target in found if isinstance(target, Target) and not isinstance(node, cst.Call)}
    nnx = {node for node, target in found if isinstance(target, Target) and target.qualified_name == "flax.nnx.scan"}
    if not references and not nnx:
        return {}, {}
    resolver = flax_resolver(scopes)
    finder = _Finder(references, resolver, resolver, {node for node in nnx if node in references})
    finder.calls = {node for node in nnx if isinstance(node, cst.Call)}
    module.visit(finder)
    return finder.found, finder.call_remats


def find_flax(
    module: cst.Module, scopes: Mapping[cst.CSTNode, Scope | None], found: Sequence[tuple[cst.CSTNode, object]]
) -> tuple[dict[cst.CSTNode, Applied], dict[cst.CSTNode, str]]:
    """`find_applied`'s applied scans, and the per-step Flax remat of every selected Flax scan:
    by its call, by the decorator call with the remat right under it, or by the call an
    applied scan stands for."""
    applied, remats = find_applied(module, scopes, found)
    remats.update({use.as_call: use.remat for use in applied.values() if use.remat is not None})
    resolver = flax_resolver(scopes)
    for node, target in found:
        remat = body_remat(node, target, resolver) if isinstance(node, cst.Call) and isinstance(target, Target) else None
        if remat is not None:
            remats[node] = remat
    return applied, remats


def replace_applied(
    original: cst.CSTNode, updated: cst.CSTNode, planned: tuple[Target, list[cst.Arg]]
) -> cst.CSTNode:
    """`updated` (a decorator or a `functools.partial` call) with its scan replaced."""
    target, new_args = planned
    replacement = cst.parse_expression(target.replacement)
    if isinstance(updated, cst.Decorator):
        return updated.with_changes(decorator=cst.Call(func=replacement, args=append_args(cst.Call(replacement), new_args)))
    assert isinstance(updated, cst.Call)
    first = updated.args[0].with_changes(value=replacement)
    return updated.with_changes(args=append_args(updated.with_changes(args=(first, *updated.args[1:])), new_args))


def relayout_decorator(
    original: cst.Decorator, updated: cst.Decorator, indent: str, line_length: int, module: cst.Module
) -> cst.Decorator:
    """`updated` laid out as the formatters lay out a decorator (an expression statement one
    `@` narrower), if `original` is laid out as they would."""

    def statement(decorator: cst.Decorator) -> cst.SimpleStatementLine:
        return cst.SimpleStatementLine([cst.Expr(decorator.decorator)], trailing_whitespace=decorator.trailing_whitespace)

    laid_out = relayout(statement(original), statement(updated), indent, line_length - 1, module)
    expression = laid_out.body[0]
    assert isinstance(expression, cst.Expr)
    return updated.with_changes(decorator=expression.value, trailing_whitespace=laid_out.trailing_whitespace)


def runtime_partials(module: cst.Module, calls: object) -> dict[cst.Call, Target]:
    """The `functools.partial(scanrewrite.runtime.scan, ...)` calls in `module` (of any runtime
    scan), added to `calls` (a `_writeback.RuntimeCalls`) as runtime calls of their own, for
    the revert and the write-back, by their first line and (`calls.applied`) by the first line
    of each call that applies them, where the runtime names the site."""
    from scanrewrite.codemod._discovery import Survey
    from scanrewrite.codemod._parsing import node_lines

    survey = Survey(calls.resolver.resolve)
    module.visit(survey)
    references = {node: target for node, target in survey.found if not isinstance(node, cst.Call)}
    if not references:
        return {}
    finder = _Finder(references, flax_resolver(calls.scopes), flax_resolver(calls.scopes))
    module.visit(finder)
    partials = {use.site: references[use.reference] for use in finder.found.values() if isinstance(use.site, cst.Call)}
    calls.lines.update(node_lines(module, set(partials)))
    for partial, target in partials.items():
        calls.by_line.setdefault(calls.lines[partial][0], []).append((partial, target))
        calls.targets[partial] = target
    applying = _applications(module, list(partials), calls.scopes) if partials else {}
    for call, (first, _) in node_lines(module, set(applying)).items():
        calls.applied.setdefault(first, []).extend((partial, partials[partial]) for partial in applying[call])
    calls.partials.update(partials)
    return partials


def _applications(
    module: cst.Module, partials: list[cst.Call], scopes: Mapping[cst.CSTNode, Scope | None]
) -> dict[cst.Call, list[cst.Call]]:
    """The calls that apply each of `partials`, to the partials each applies: those whose
    called expression holds the partial (`partial(...)(x)`, `jax.jit(partial(...))(x)`) or a
    name bound to what holds it (`run(x)` after `run = jax.jit(partial(...))`).

    Python names such a call's first line as the line running, and so does the runtime when
    it names the site of the scan a partial runs (`runtime._override.call_site`)."""
    holders: dict[cst.CSTNode, cst.Call] = {partial: partial for partial in partials}
    while True:
        walk = _Applications(holders)
        module.visit(walk)
        more = {}
        if walk.bound and getattr(scopes, "analysed", module) is not module:
            # The survey analysed only some statements; a bound partial may be called in others.
            scopes = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)
        for target, partial in walk.bound.items():
            scope = scopes.get(target)
            for assignment in scope.assignments[target.value] if scope is not None else ():
                if getattr(assignment, "node", None) is target:
                    more.update({access.node: partial for access in assignment.references})
        if more.keys() <= holders.keys():
            return {call: sorted(found, key=partials.index) for call, found in walk.found.items()}
        holders.update(more)


class _Applications(cst.CSTVisitor):
    """Where `holders` (nodes that hold a partial: it, or a name read) stand in a called
    expression or in the value assigned to a name."""

    def __init__(self, holders: Mapping[cst.CSTNode, cst.Call]) -> None:
        self.holders = holders
        #: The calls whose called expression the walk is in, and the assignments whose value.
        self.called: list[cst.Call] = []
        self.assigned: list[cst.Assign] = []
        self.found: dict[cst.Call, set[cst.Call]] = {}
        #: The target of an assignment (`run = ...`) whose value holds a partial, to it.
        self.bound: dict[cst.Name, cst.Call] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        partial = self.holders.get(node)
        if partial is not None:
            for call in self.called:
                self.found.setdefault(call, set()).add(partial)
            for assign in self.assigned:
                if len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
                    self.bound[assign.targets[0].target] = partial
        return super().on_visit(node)

    def visit_Call_func(self, node: cst.Call) -> None:
        self.called.append(node)

    def leave_Call_func(self, node: cst.Call) -> None:
        self.called.pop()

    def visit_Assign_value(self, node: cst.Assign) -> None:
        self.assigned.append(node)

    def leave_Assign_value(self, node: cst.Assign) -> None:
        self.assigned.pop()


def reverted_decorator(original: cst.Decorator, updated: cst.Decorator) -> cst.Decorator:
    """`@nnx.scan` again where the revert left `@nnx.scan()` of a call that had arguments
    (the rewrite of a bare decorator)."""
    before, after = original.decorator, updated.decorator
    if isinstance(before, cst.Call) and isinstance(after, cst.Call) and before.args and not after.args:
        return updated.with_changes(decorator=after.func)
    return updated
