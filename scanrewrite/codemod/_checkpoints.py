"""What wraps the function a scan call scans: a per-step checkpoint, or a chunked loop
checkpointed by hand.

`Checkpoints(module, scopes, targets, found).body(call, target)` reads the scan call's
function argument and says:

- `PerStep`: the function is wrapped in a per-step checkpoint from `WRAPPERS`
  (`jax.checkpoint(f)`, `jax.remat(f, policy=p)`, `functools.partial(jax.checkpoint,
  ...)(f)`, `eqx.filter_checkpoint(f)`), or is a name bound to one (an assignment
  earlier in the same scope, a def whose outermost decorator is one, also under an
  `if`), or a conditional `jax.checkpoint(f) if flag else f`. The runtime takes such a
  wrapper over at trace time; `problem` says why it cannot (an option it cannot carry).
- `HandChunked`: the wrapped function itself runs a scan (`partial(jax.lax.scan, f)`,
  a def or lambda that calls one): a loop the user already chunked and checkpointed.
  `inner` are those inner scans, to be left alone too.

Names are resolved through their imports, as the scan targets are; a binding is the
latest one before the call in the same scope (the last one in an enclosing scope).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import Scope

from scanrewrite.codemod._discovery import NodeIndex, Resolver
from scanrewrite.targets import Target
from scanrewrite.wrappers import PARTIAL, WRAPPERS, Wrapper

__all__ = ["Checkpoints", "HandChunked", "PerStep", "may_wrap", "per_step_note", "read_bodies"]

#: `functools.partial`, among the wrappers the resolver looks for.
_PARTIAL = Wrapper(PARTIAL, ())
_NAMES = {**{wrapper.qualified_name: wrapper for wrapper in WRAPPERS}, PARTIAL: _PARTIAL}
#: How deep a chain of names bound to names is followed.
_MAX_DEPTH = 8


def may_wrap(code: str) -> bool:
    """False only if no wrapper can be spelled in `code` (each has one of these words)."""
    return "checkpoint" in code or "remat" in code


@dataclass(frozen=True)
class PerStep:
    """A scanned function wrapped in a per-step checkpoint."""

    #: The wrapper's qualified name, e.g. ``"jax.checkpoint"``.
    api: str
    #: Why the runtime cannot take the wrapper over, e.g.
    #: ``"per-step jax.checkpoint with static_argnums, which the runtime cannot carry over"``.
    problem: str | None = None


@dataclass(frozen=True)
class HandChunked:
    """A scanned function that checkpoints a scan of its own."""

    #: The scan calls and references inside it.
    inner: tuple[cst.CSTNode, ...]


def read_bodies(
    module: cst.Module,
    scopes: Mapping[cst.CSTNode, Scope | None],
    targets: Resolver[Target],
    found: Sequence[tuple[cst.CSTNode, Target | str]],
    index: NodeIndex | None = None,
) -> tuple[dict[cst.Call, PerStep], set[cst.CSTNode]]:
    """The per-step checkpoint of each scan call in `found` (the survey's calls and
    references) that has one, and the calls and references of hand-chunked loops: the
    outer scans and the scans inside them. `index` is the survey's of `module`, where it took one."""
    calls = [(node, target) for node, target in found if isinstance(node, cst.Call) and isinstance(target, Target)]
    per_step: dict[cst.Call, PerStep] = {}
    chunked: set[cst.CSTNode] = set()
    if calls:
        checkpoints = Checkpoints(module, scopes, targets, [node for node, _ in found], index)
        for call, target in calls:
            body = checkpoints.body(call, target)
            if isinstance(body, HandChunked):
                chunked.update((call, *body.inner))
            elif body is not None:
                per_step[call] = body
    return per_step, chunked


def per_step_note(per_step: PerStep, call: cst.Call, target: Target, checkpoint: str | None) -> tuple[str | None, str | None]:
    """What becomes of the per-step checkpoint of a rewritten call (the `-v` note), and
    the wrapper's name when the runtime takes it over. `checkpoint` is the rewrite's
    option: with ``"none"`` the chunks are not checkpointed and the wrapper stays."""
    if "checkpoint" in target.keyword_only:
        checkpointed = checkpoint != "none"
    else:
        # eqxi_scan checkpoints chunks for kind="lax"; kind="checkpointed" recomputes them
        # in equinox's loop; another kind is only known when it runs.
        kind = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "kind"), None)
        if not (isinstance(kind, cst.SimpleString) and kind.evaluated_value in ("lax", "checkpointed")):
            return None, None
        checkpointed = kind.evaluated_value == "lax"
    if checkpointed:
        return f"per-step {per_step.api} absorbed: the runtime checkpoints chunks instead", per_step.api
    return f"per-step {per_step.api} kept: chunks are not checkpointed again", None


@dataclass(frozen=True)
class _Found:
    wrapper: Wrapper
    problem: str | None
    #: The wrapped function (an expression, or the decorated def) and where it is read.
    function: cst.CSTNode
    site: cst.CSTNode


class Checkpoints:
    """The per-step checkpoints of one module's scan calls. `found` are the nodes that
    resolve to a scan target (calls and other references); `index`, where the caller has
    it, is the survey's `NodeIndex` of all of `module`."""

    def __init__(
        self,
        module: cst.Module,
        scopes: Mapping[cst.CSTNode, Scope | None],
        targets: Resolver[Target],
        found: Collection[cst.CSTNode],
        index: NodeIndex | None = None,
    ) -> None:
        self._scopes = scopes
        self._wrappers = Resolver(scopes, _NAMES)
        self._targets = targets
        self._found = set(found)
        self._module = module
        #: The order of nodes within one scope's node (so within each of its scopes) by
        #: that node: indexed where a binding is looked up, not over the whole module.
        self._orders: dict[cst.CSTNode, dict[cst.CSTNode, int]] = {}
        #: The value assigned to each name target of the indexed nodes.
        self._values: dict[cst.CSTNode, cst.BaseExpression] = {}
        self._index = index
        if index is not None:
            # One order over the whole module orders each scope's nodes as its own would,
            # and a binding is only looked for among its scope's nodes.
            self._orders[module] = index.order
            self._values = index.values

    def _order(self, scope: Scope, site: cst.CSTNode) -> dict[cst.CSTNode, int]:
        """The order of the nodes in `scope`'s node, which holds `site` (else of the module's)."""
        nodes = (self._module,) if self._index is not None else (getattr(scope, "node", self._module), self._module)
        for node in nodes:
            if node not in self._orders:
                walk = _Index()
                node.visit(walk)
                self._orders[node] = walk.index.order
                self._values.update(walk.index.values)
            if site in self._orders[node]:
                break
        return self._orders[node]

    def body(self, call: cst.Call, target: Target) -> PerStep | HandChunked | None:
        """What wraps the function `call` (a call of `target`) scans, if anything."""
        function = _argument(call.args, target)
        found = None if function is None else self._wrapped(function, call, 0)
        if found is None:
            return None
        inner = self._runs_scan(found.function, found.site, 0)
        if inner:
            return HandChunked(inner)
        return PerStep(found.wrapper.qualified_name, found.problem)

    def _wrapper(self, node: cst.BaseExpression) -> Wrapper | None:
        resolved = self._wrappers.resolve(node)
        return resolved if isinstance(resolved, Wrapper) else None

    def _wrapped(self, expression: cst.CSTNode, site: cst.CSTNode, depth: int) -> _Found | None:
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expression, cst.Call):
            return self._wrapper_call(expression, site)
        if isinstance(expression, cst.IfExp):
            return self._wrapped(expression.body, site, depth + 1) or self._wrapped(expression.orelse, site, depth + 1)
        if isinstance(expression, cst.Name):
            binding = self._binding(expression, site)
            if isinstance(binding, cst.FunctionDef):
                return self._decorated(binding)
            if binding is not None:
                return self._wrapped(self._values[binding], binding, depth + 1)
        return None

    def _wrapper_call(self, call: cst.Call, site: cst.CSTNode) -> _Found | None:
        """`W(f, ...)`, `partial(W, ...)(f)` or `W(...)(f)` for a wrapper W that makes decorators."""
        head = self._applied(call)
        function, options = _function(call.args)
        if head is None or function is None:
            return None
        wrapper, bound = head
        return _Found(wrapper, _problem(wrapper, [*bound, *options]), function, site)

    def _applied(self, call: cst.Call) -> tuple[Wrapper, Sequence[cst.Arg]] | None:
        """The wrapper `call` applies, and the options bound before the function."""
        wrapper = self._wrapper(call.func)
        if wrapper is not None and wrapper is not _PARTIAL:
            return wrapper, ()
        return self._decorator(call.func) if isinstance(call.func, cst.Call) else None

    def _decorator(self, expression: cst.BaseExpression) -> tuple[Wrapper, Sequence[cst.Arg]] | None:
        """The wrapper a decorator expression applies, and its options: `W`,
        `partial(W, ...)`, or `W(...)` for a wrapper that makes decorators."""
        wrapper = self._wrapper(expression)
        if wrapper is not None:
            return None if wrapper is _PARTIAL else (wrapper, ())
        if not isinstance(expression, cst.Call):
            return None
        head = self._wrapper(expression.func)
        args = expression.args
        if head is _PARTIAL and args and args[0].keyword is None and not args[0].star:
            wrapper = self._wrapper(args[0].value)
            return (wrapper, args[1:]) if wrapper is not None and wrapper is not _PARTIAL else None
        if head is not None and head.factory and _function(args)[0] is None:
            return head, args
        return None

    def _decorated(self, definition: cst.FunctionDef) -> _Found | None:
        if not definition.decorators:
            return None
        # The first decorator is applied last: only it wraps what the scan calls.
        head = self._decorator(definition.decorators[0].decorator)
        if head is None:
            return None
        wrapper, options = head
        return _Found(wrapper, _problem(wrapper, options), definition, definition)

    def _binding(self, name: cst.Name, site: cst.CSTNode) -> cst.CSTNode | None:
        """The def or assignment target that binds `name` as read at `site`, if it is
        one of those."""
        scope = self._scopes.get(name)
        assignments = list(scope[name.value]) if scope is not None else []
        if not assignments or len({assignment.scope for assignment in assignments}) != 1:
            return None
        nodes = [assignment.node for assignment in assignments]
        order = self._order(assignments[0].scope, site)
        if assignments[0].scope is scope:
            # Parameters and the like are bound first; a later binding replaces them.
            before = [node for node in nodes if order.get(node, -1) < order[site]]
        else:
            before = nodes  # an enclosing scope has run to its end by the time this runs
        latest = max(before, key=lambda node: order.get(node, -1), default=None)
        if isinstance(latest, cst.FunctionDef) or latest in self._values:
            return latest
        return None

    def _runs_scan(self, function: cst.CSTNode, site: cst.CSTNode, depth: int) -> tuple[cst.CSTNode, ...]:
        """The scans the wrapped `function` runs (found where it is defined)."""
        if depth > _MAX_DEPTH:
            return ()
        if isinstance(function, (cst.FunctionDef, cst.Lambda)):
            if self._index is not None and function in self._index.extents:
                return self._index.inside(function)
            collector = _Collector(self._found)
            function.visit(collector)
            return tuple(collector.inside)
        if function in self._found:
            return (function,)
        if isinstance(function, cst.Call) and self._wrapper(function.func) is _PARTIAL and function.args:
            first = function.args[0].value
            return (first,) if first in self._found else ()
        if isinstance(function, cst.Name):
            binding = self._binding(function, site)
            if isinstance(binding, cst.FunctionDef):
                return self._runs_scan(binding, binding, depth + 1)
            if binding is not None:
                return self._runs_scan(self._values[binding], binding, depth + 1)
        return ()


def _argument(args: Sequence[cst.Arg], target: Target) -> cst.BaseExpression | None:
    """The argument a call of `target` passes for its step function."""
    position = target.params.index(target.body)
    positional = [arg for arg in args if arg.keyword is None]
    if any(arg.star for arg in positional[: position + 1]):
        return None
    if len(positional) > position:
        return positional[position].value
    return next((arg.value for arg in args if arg.keyword is not None and arg.keyword.value == target.body), None)


def _function(args: Sequence[cst.Arg]) -> tuple[cst.BaseExpression | None, list[cst.Arg]]:
    """The function a wrapper call wraps (its first argument, `fun=` or none), and the options."""
    for index, arg in enumerate(args):
        if arg.star:
            return None, list(args)
        if arg.keyword is None or arg.keyword.value == "fun":
            return arg.value, [*args[:index], *args[index + 1 :]]
    return None, list(args)


def _problem(wrapper: Wrapper, options: Sequence[cst.Arg]) -> str | None:
    """Why the runtime cannot take over a wrapper given these options, or None."""
    api = f"per-step {wrapper.qualified_name}"
    for arg in options:
        if arg.star == "**":
            return f"{api} may get options from **kwargs"
        if arg.keyword is None:
            return f"{api} with an argument besides the function"
        name = arg.keyword.value
        if name in wrapper.uncarried and not _does_nothing(arg.value):
            return f"{api} with {name}, which the runtime cannot carry over"
        if name not in wrapper.carried and name not in wrapper.uncarried:
            return f"{api} with an unknown option {name}"
    return None


def _does_nothing(value: cst.BaseExpression) -> bool:
    """`()`, `[]` or `False`: the value of an option that leaves the wrapper as it is."""
    if isinstance(value, (cst.Tuple, cst.List)):
        return not value.elements
    return isinstance(value, cst.Name) and value.value == "False"


class _Index(cst.CSTVisitor):
    """The `NodeIndex` of a subtree, where the survey took none of the module."""

    def __init__(self) -> None:
        super().__init__()
        self.index = NodeIndex()
        self._visited = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.index.enter(node, self._visited)
        self._visited += 1
        return True


class _Collector(cst.CSTVisitor):
    """The nodes of a subtree that are among `wanted`, in order."""

    def __init__(self, wanted: set[cst.CSTNode]) -> None:
        super().__init__()
        self._wanted = wanted
        self.inside: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node in self._wanted:
            self.inside.append(node)
        return True
