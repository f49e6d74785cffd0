"""Read-only walks of libcst trees, and libcst's scopes without its metadata wrapper.

libcst's `CSTNode.visit` rebuilds every node it passes over, even for a `CSTVisitor`, whose
walk changes nothing and returns the tree it was given (its own code says so: "TODO: provide
traversal where children are not replaced"). Each node is built anew and validated, and each
child attribute is looked up twice by a formatted name: a walk of a module costs about as
much as parsing it. `read_only_visits` has a `CSTVisitor`'s walk call the same callbacks in
the same order and build nothing (about four times faster), for the scopes, the survey and
the other analyses of a rewrite, including the walks libcst's own visitors make inside them.

`scope_metadata` is what `MetadataWrapper(module).resolve(ScopeProvider)` gives, without
the two walks of the whole module that the wrapper's batched visitor makes beside the
providers' own (each provider does its work in a walk of its own from `visit_Module`).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import libcst as cst
from libcst import CSTNode, CSTVisitor
from libcst.metadata import MetadataWrapper, Scope, ScopeProvider
from libcst.metadata.expression_context_provider import (
    ExpressionContext,
    ExpressionContextProvider,
    ExpressionContextVisitor,
)
from libcst.metadata.scope_provider import ScopeVisitor

__all__ = ["read_only", "read_only_visits", "scope_metadata"]

#: libcst's own walk, which a read-only walk falls back to for what it does not cover.
_LIBCST_VISIT = CSTNode.visit


@functools.cache
def _child_fields(cls: type[CSTNode]) -> tuple[tuple[str, bool], ...]:
    """The fields of a node class that its walk visits, in the order it visits them, each with
    whether the walk passes it by, attribute callbacks and all, when it is None.

    Each class's `_visit_and_replace_children` calls `visit_required(self, "field", ...)` (or
    `visit_sequence`, `visit_optional`, ...) once per child field, in the source's order: the
    field names are string constants of its code, in the order they first appear. A field it
    first reads into a local variable is one it visits depending on its value (an f-string's
    `format_spec` only where there is one). (Tests check that the callbacks come in libcst's
    order over the goldens, the fixtures and libcst's own sources.)"""
    names = {field.name for field in dataclasses.fields(cls)}
    code = cls._visit_and_replace_children.__code__
    found = dict.fromkeys(const for const in code.co_consts if isinstance(const, str) and const in names)
    return tuple((name, name in code.co_varnames) for name in found)


@functools.cache
def _attribute_hooks(visitor_class: type) -> bool | None:
    """Whether a visitor class has callbacks for child attributes (`visit_Node_field`) that
    do something; None where it is no plain `CSTVisitor` (a transformer, or a visitor that
    overrides the attribute callbacks): its walks are libcst's own."""
    if not issubclass(visitor_class, CSTVisitor) or (
        visitor_class.on_visit_attribute is not CSTVisitor.on_visit_attribute
        or visitor_class.on_leave_attribute is not CSTVisitor.on_leave_attribute
    ):
        return None
    # Only the classes below `CSTVisitor` can define one: libcst's bases hold ~700 no-op stubs.
    return any(
        name.count("_") >= 2 and name.startswith(("visit_", "leave_")) and callable(method) and not getattr(method, "_is_no_op", False)
        for klass in visitor_class.__mro__
        if not issubclass(CSTVisitor, klass)
        for name, method in vars(klass).items()
    )


def _read_only_visit(self: CSTNode, visitor: object) -> object:
    """`CSTNode.visit`: for a plain `CSTVisitor`, the same callbacks in the same order as
    libcst's walk, building no node; anything else, libcst's walk."""
    hooks = _attribute_hooks(type(visitor))
    if hooks is None:
        return _LIBCST_VISIT(self, visitor)
    if visitor.on_visit(self):
        for name, conditional in _child_fields(type(self)):
            value = getattr(self, name)
            callbacks = hooks and not (conditional and value is None)
            if callbacks:
                visitor.on_visit_attribute(self, name)
            if isinstance(value, CSTNode):
                value.visit(visitor)
            elif isinstance(value, (tuple, list)):
                for child in value:
                    child.visit(visitor)
            if callbacks:
                visitor.on_leave_attribute(self, name)
    visitor.on_leave(self)
    return self


_LOCK = threading.Lock()
#: How many callers are inside `read_only_visits` (the walk is installed while any is).
_DEPTH = [0]


@contextmanager
def read_only_visits() -> Iterator[None]:
    """Inside, a `CSTVisitor`'s walk of any tree builds no node (see the module's docstring).
    What every callback sees and the walk returns are as with libcst's walk: only the time
    differs. (Installed on libcst's `CSTNode` while any caller is inside, in any thread.)"""
    with _LOCK:
        if _DEPTH[0] == 0:
            CSTNode.visit = _read_only_visit
        _DEPTH[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH[0] -= 1
            if _DEPTH[0] == 0:
                CSTNode.visit = _LIBCST_VISIT


def read_only(function: Callable) -> Callable:
    """`function`, run inside `read_only_visits`."""

    @functools.wraps(function)
    def with_read_only_visits(*args: object, **kwargs: object) -> object:
        with read_only_visits():
            return function(*args, **kwargs)

    return with_read_only_visits


def scope_metadata(module: cst.Module) -> Mapping[CSTNode, Scope | None]:
    """What `MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)` gives,
    computed by the providers' own visitors alone (libcst's `ScopeProvider.visit_Module` and
    `ExpressionContextProvider.visit_Module` do the same, inside two walks of the wrapper)."""
    if not _HAS_VISITORS:  # (a libcst whose providers work otherwise)
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)
    contexts = ExpressionContextProvider()
    module.visit(ExpressionContextVisitor(contexts, ExpressionContext.LOAD))
    provider = ScopeProvider()
    provider.metadata = {ExpressionContextProvider: contexts._computed}
    visitor = ScopeVisitor(provider)
    module.visit(visitor)
    visitor.infer_accesses()
    return provider._computed


#: Whether libcst's providers are what `scope_metadata` expects: each does its work in a walk
#: of its own visitor from `visit_Module`.
_HAS_VISITORS = all(
    "visit_Module" in provider.__dict__ and hasattr(provider(), "_computed")
    for provider in (ScopeProvider, ExpressionContextProvider)
)


def calls_in(node: CSTNode) -> list[cst.Call]:
    """The calls in `node`, in the order of the code (so the same in the same code laid
    out another way)."""
    finder = _CallFinder()
    node.visit(finder)
    return finder.found


class _CallFinder(CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.found.append(node)
