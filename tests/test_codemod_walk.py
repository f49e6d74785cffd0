"""Read-only walks (`codemod/_walk.py`) call what libcst's walks call, in the same order, and
`scope_metadata` gives what libcst's metadata wrapper gives.

Compared on the goldens, the fixtures, the libcst sources of a few node-rich modules and a
module of every statement and expression, against libcst's own walk and `ScopeProvider`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ScopeProvider

from scanrewrite.codemod._walk import _LIBCST_VISIT, read_only_visits, scope_metadata

ROOT = Path(__file__).resolve().parents[1]
#: Every statement and expression libcst 1.x parses, with odd spellings of each.
EVERY_NODE = '''\
"""doc"""
from __future__ import annotations
import a.b as c, d
from .e import (f as g, h,)
from . import *
@dec(1)
@dec2
async def k(p, /, q: int = 1, *r, s, t=2, **u) -> "str":
    global v
    nonlocal_ = 1
    async with w as (x, y), z:
        await x
    async for i in y:
        yield i
    yield from z
    return None
class L(M, metaclass=N, **O):
    a: int
    b: list[int] = []
    def m[T: int, *Ts, **P](self) -> T: ...
type Alias[T] = list[T]
try:
    pass
except* ValueError as e:
    raise RuntimeError("x") from e
else:
    pass
finally:
    del a, b[0], c.d
while not a and b or c:
    break
else:
    continue_ = 1
for i, (j, *k) in enumerate(x):
    continue
if a: pass
elif b: pass
else: pass
with open(f) as g: pass
match p:
    case [1, 2, *rest] | {"k": v, **kw} if v:
        pass
    case Point(x=0, y=_) as pt:
        pass
    case None | True | -1 | 1 + 2j | "s" "t" | b"b":
        pass
x = lambda a, *b, c=1, **d: (a, b, c, d)
y = [i for i in x if i async for j in i] + list({k: v for k, v in d}) + list({s for s in t})
z = (g for g in x)
w = a if b else c
v = a[1:2:3, ..., ::] @ b ** -c // d % e << f >> g & h | i ^ ~j
u = f"{a!r:>{w}} {b=} {{c}}" + rf"\\d" "implicit" 'concat'
t = [*a, *b], {**c}, (a := 1), not a, a is not b, a not in b, a < b <= c != d
s += 1; s -= 1; s *= 2; s @= m; s /= 2; s //= 2; s %= 2; s **= 2; s >>= 1; s <<= 1; s &= 1; s ^= 1; s |= 1
assert a, "message"
print(*args, sep="", **kwargs)  # comment
'''


def _sources() -> list[tuple[str, str]]:
    sources = [("every node", EVERY_NODE)]
    for folder in (ROOT / "tests" / "golden", ROOT / "fixtures"):
        sources += [(path.name, path.read_text()) for path in sorted(folder.glob("*.py"))]
    libcst_folder = Path(importlib.util.find_spec("libcst").origin).parent
    for name in ("_nodes/expression.py", "_nodes/statement.py", "metadata/scope_provider.py"):
        sources.append((name, (libcst_folder / name).read_text()))
    return sources


SOURCES = _sources()
#: Whole-module scopes of libcst's own large sources take long: the others suffice there.
SCOPE_SOURCES = [(name, source) for name, source in SOURCES if not name.startswith(("_nodes", "metadata"))]


class _Recorder(cst.CSTVisitor):
    """Notes every callback with the node and the attribute it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int, str]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.calls.append(("visit", id(node), ""))
        # Not into a call's arguments: what a visitor leaves out, the walk must too.
        return not isinstance(node, cst.Arg)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.calls.append(("leave", id(original_node), ""))

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.calls.append(("visit attribute", id(node), attribute))

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        self.calls.append(("leave attribute", id(original_node), attribute))


class _Hooked(_Recorder):
    """Attribute callbacks by name, as libcst's own visitors have them (`ScopeVisitor`)."""

    on_visit_attribute = cst.CSTVisitor.on_visit_attribute
    on_leave_attribute = cst.CSTVisitor.on_leave_attribute

    def visit_Call_func(self, node: cst.Call) -> None:
        self.calls.append(("visit Call.func", id(node), ""))

    def leave_Param_annotation(self, node: cst.Param) -> None:
        self.calls.append(("leave Param.annotation", id(node), ""))

    def visit_FormattedStringExpression_format_spec(self, node: cst.FormattedStringExpression) -> None:
        # libcst calls it only where there is a format spec (`f"{a:>4}"`, not `f"{a}"`).
        self.calls.append(("visit FormattedStringExpression.format_spec", id(node), ""))

    def leave_ImportFrom_names(self, node: cst.ImportFrom) -> None:
        self.calls.append(("leave ImportFrom.names", id(node), ""))


class _Plain(_Recorder):
    """No attribute callback that does anything: the walk may leave them out."""

    on_visit_attribute = cst.CSTVisitor.on_visit_attribute
    on_leave_attribute = cst.CSTVisitor.on_leave_attribute


@pytest.mark.parametrize("visitor", [_Hooked, _Plain, _Recorder])
@pytest.mark.parametrize(("name", "source"), SOURCES, ids=[name for name, _ in SOURCES])
def test_a_read_only_walk_calls_what_libcst_calls(name: str, source: str, visitor: type[_Recorder]):
    module = cst.parse_module(source)
    libcst_walk, read_only_walk = visitor(), visitor()
    assert module.visit(libcst_walk) is module
    with read_only_visits():
        assert cst.CSTNode.visit is not _LIBCST_VISIT
        assert module.visit(read_only_walk) is module
    assert cst.CSTNode.visit is _LIBCST_VISIT
    assert read_only_walk.calls == libcst_walk.calls
    assert any(kind == "visit" for kind, _, _ in libcst_walk.calls)


def test_the_comparison_can_fail():
    module = cst.parse_module("x = f(a, b)\n")

    class Reversed(_Recorder):
        pass

    libcst_walk = Reversed()
    module.visit(libcst_walk)
    with read_only_visits():
        read_only_walk = Reversed()
        module.visit(read_only_walk)
    assert read_only_walk.calls == libcst_walk.calls
    assert read_only_walk.calls != list(reversed(libcst_walk.calls))


def test_a_transformer_still_rebuilds():
    module = cst.parse_module("x = 1\n")

    class Rename(cst.CSTTransformer):
        def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
            return updated_node.with_changes(value="y")

    with read_only_visits():
        assert module.visit(Rename()).code == "y = 1\n"


class _Nodes(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.seen: set[cst.CSTNode] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.seen.add(node)
        return True


@pytest.mark.parametrize(("name", "source"), SCOPE_SOURCES, ids=[name for name, _ in SCOPE_SOURCES])
def test_scope_metadata_is_libcst_s(name: str, source: str):
    module = cst.parse_module(source)
    ours = scope_metadata(module)
    with read_only_visits():
        read_only = scope_metadata(cst.parse_module(source))
    theirs = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)
    # (The scopes also hold nodes parsed anew from string annotations: new objects each time.)
    nodes = _Nodes()
    module.visit(nodes)
    assert len(ours) == len(theirs) == len(read_only)
    assert {node for node in ours if node in nodes.seen} == {node for node in theirs if node in nodes.seen}
    scopes = {id(scope) for scope in theirs.values()}
    for node, scope in theirs.items():
        if node not in nodes.seen:
            continue
        ours_scope = ours[node]
        assert type(ours_scope) is type(scope)
        if scope is None:
            continue
        # The same bindings and reads, node for node.
        assert {(a.name, id(getattr(a, "node", None))) for a in ours_scope.assignments} == {
            (a.name, id(getattr(a, "node", None))) for a in scope.assignments
        }
        assert {(id(a.node), len(a.referents)) for a in ours_scope.accesses if a.node in nodes.seen} == {
            (id(a.node), len(a.referents)) for a in scope.accesses if a.node in nodes.seen
        }
    assert scopes
