"""What a source's syntax tree says of the round trip's exceptions (`revert_corpus.round_trip`):
its imports, whether it passes its own `unroll=`, spells an API more than one way, imports under
a branch or imports what nothing reads. Plain `ast`: it never imports jax."""

from __future__ import annotations

import ast
import collections

from scanrewrite.targets import TARGETS


def imports(tree: ast.AST) -> collections.Counter[str]:
    return collections.Counter(
        ast.dump(node) for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
    )


def user_unroll(tree: ast.AST) -> bool:
    """Whether a call passes ``unroll=`` an int literal, which the revert takes for the rewrite's."""
    return any(
        keyword.arg == "unroll" and isinstance(keyword.value, ast.Constant) and type(keyword.value.value) is int
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for keyword in node.keywords
    )


def mixed_spelling(tree: ast.AST) -> bool:
    """Whether the file reaches a target's module through more than one import (`lax.cond`
    and `jax.lax.scan`; an import nothing reads counts, `from jax.lax import scan` beside
    `lax.scan`): the revert spells a call through the most specific, maybe not the one it used."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.partition(".")[0]
                bound[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            bound.update({alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names})
    modules = {target.qualified_name.rpartition(".")[0] for target in TARGETS}
    used: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Name)):
            dotted = ast.unparse(node)
            root, _, rest = dotted.partition(".")
            if root in bound and all(part.isidentifier() for part in dotted.split(".")):
                qualified = f"{bound[root]}.{rest}" if rest else bound[root]
                for module in modules:
                    if qualified.startswith(module + "."):
                        used.setdefault(module, set()).add(root)
    targets = {target.qualified_name: target.qualified_name.rpartition(".")[0] for target in TARGETS}
    for name, meaning in bound.items():
        if meaning in modules or meaning in targets:
            used.setdefault(targets.get(meaning, meaning), set()).add(name)
    return any(len(roots) > 1 for roots in used.values())


def conditional_import(tree: ast.AST) -> bool:
    """Whether an import may not have run where a call is (under ``if TYPE_CHECKING:``, in a
    ``try``, a loop or a branch): the revert spells no call through it, but adds an import."""
    # `try/except*` is Python 3.11's (ast.TryStar); on 3.10 it cannot be written at all.
    branches = (ast.If, ast.Try, getattr(ast, "TryStar", ast.Try), ast.For, ast.AsyncFor, ast.While, ast.Match)
    inside = (inner for node in ast.walk(tree) if isinstance(node, branches) for inner in ast.walk(node))
    return any(isinstance(inner, (ast.Import, ast.ImportFrom)) for inner in inside)


def unused_import(tree: ast.AST) -> bool:
    """Whether an import binds a name that nothing reads: the revert may then spell a call
    through it, and the rewrite of the result remove it again."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {alias.asname or alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            bound |= {alias.asname or alias.name for alias in node.names if alias.name != "*"}
    return bool(bound - reads(tree))


def reads(tree: ast.AST, shadowed: frozenset[str] = frozenset()) -> set[str]:
    """The names `tree` reads that its imports may bind: not those a function's (or lambda's)
    own parameter or local variable of the same name shadows in its body."""
    if isinstance(tree, ast.Name):
        return set() if tree.id in shadowed else {tree.id}
    if isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        arguments = tree.args
        names = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
        names |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None} | _locals(tree)
        outer = [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
        outer += getattr(tree, "decorator_list", [])
        inner = tree.body if isinstance(tree.body, list) else [tree.body]
        found = set().union(*(reads(node, shadowed) for node in outer))
        return found.union(*(reads(node, shadowed | names) for node in inner))
    return set().union(*(reads(child, shadowed) for child in ast.iter_child_nodes(tree)))


def _locals(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """The names `function`'s body binds but by an import (`jax = make_jax()`, a loop's or a
    ``with``'s target, ``except ... as``, a nested ``def`` or ``class``), less those it declares
    ``global`` or ``nonlocal``: local throughout the body, so its reads of them read no import."""
    names, declared = set(), set()
    todo = list(function.body) if isinstance(function.body, list) else [function.body]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)  # (its body is a scope of its own)
        elif isinstance(node, ast.comprehension):
            todo += [node.iter, *node.ifs]  # (its target is the comprehension's own)
        elif not isinstance(node, ast.Lambda):
            todo += ast.iter_child_nodes(node)
    return names - declared
