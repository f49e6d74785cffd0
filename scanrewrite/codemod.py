"""The transform: rewrite `jax.lax.scan` / `equinox.internal.scan` calls to the runtime.

`rewrite` is the pure function the command line uses: bytes in, `RewriteResult` out,
no file I/O, no printing, no jax import. `ScanRewriteCommand` is the same transform as
a libcst codemod, so it also runs under libcst's own runner::

    python -m libcst.tool codemod --no-format -x scanrewrite.codemod.ScanRewriteCommand --unroll 4 PATH

A rewritten call keeps every argument, comment and line break the user wrote; only
the callee changes and `unroll=N` (and, when asked for, `checkpoint=...`) is appended.
"""

from __future__ import annotations

import argparse
import ast
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.codemod import CodemodContext, SkipFile, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.helpers import get_full_name_for_node
from libcst.metadata import MetadataWrapper, QualifiedNameSource, Scope, ScopeProvider

from scanrewrite.pragmas import Pragma, pragma_comments
from scanrewrite.targets import CHECKPOINT_POLICIES, TARGETS, Target

__all__ = [
    "RewriteResult",
    "Rewritten",
    "ScanRewriteCommand",
    "Skipped",
    "SourceError",
    "may_rewrite",
    "rewrite",
]


@dataclass(frozen=True)
class Rewritten:
    """A call that was rewritten."""

    #: 1-based line of the call's first character.
    line: int
    #: The qualified name of the API that was called, e.g. ``"jax.lax.scan"``.
    api: str


@dataclass(frozen=True)
class Skipped:
    """A call or reference that was found but left as it is, and why."""

    #: 1-based line of the call (or reference, or pragma).
    line: int
    #: A short lower-case phrase, e.g. ``"unroll may come from **kwargs"``.
    reason: str


@dataclass(frozen=True)
class RewriteResult:
    """What `rewrite` did to one source file."""

    #: The new source, in the input's encoding, BOM and line endings.
    code: bytes
    rewritten: tuple[Rewritten, ...]
    skipped: tuple[Skipped, ...]

    @property
    def changed(self) -> bool:
        """Whether any call was rewritten (and so `code` differs from the input)."""
        return bool(self.rewritten)


class SourceError(Exception):
    """Source that cannot be decoded or parsed, or that libcst cannot reproduce exactly."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(line, message)
        #: 1-based line of the problem, when known.
        self.line = line
        #: One line, e.g. ``"cannot parse: expected one of ), *, **, NAME"``.
        self.message = message

    def __str__(self) -> str:
        return self.message if self.line is None else f"line {self.line}: {self.message}"


def rewrite(source: bytes, *, unroll: int = 4, checkpoint: str | None = None) -> RewriteResult:
    """Rewrite every recognised scan call in `source`.

    `unroll` (a positive int) is appended to each rewritten call that does not pass
    one. `checkpoint` is None (leave the runtime's default), ``"none"`` (write
    ``checkpoint=False``) or a name in `CHECKPOINT_POLICIES` (write
    ``checkpoint=jax.checkpoint_policies.NAME``); any other option value raises
    `ValueError`. Source that cannot be decoded, parsed or reproduced byte for byte
    raises `SourceError`. Everything that is not rewritten comes back byte for byte.
    """
    _check_options(unroll, checkpoint)
    parsed = _Parsed.from_bytes(source)
    if not may_rewrite(source):
        return RewriteResult(source, (), ())
    rewriter = _Rewriter(unroll, checkpoint, CodemodContext())
    try:
        # The tree was just parsed, so no node occurs twice in it: the wrapper need
        # not copy it (a deep copy of a large module costs as much as parsing it).
        module = rewriter.transform(MetadataWrapper(parsed.module, unsafe_skip_copy=True))
    except SkipFile:
        return RewriteResult(source, (), tuple(rewriter.skipped))
    code = parsed.render(module) if rewriter.rewritten else source
    return RewriteResult(code, tuple(rewriter.rewritten), tuple(rewriter.skipped))


def may_rewrite(source: bytes) -> bool:
    """False only if `rewrite(source)` certainly has nothing to rewrite or report.

    A shortcut past libcst's metadata for the many files that never name a target:
    resolving a name to `jax.lax.scan` needs an import that binds the target, its module
    or a package above it (`jax`, `jax.lax`, ...) and the identifier `scan` somewhere
    (a name, an attribute or an imported name). Checked with Python's own parser, ten
    times faster than libcst's; source it rejects may change (the rewrite reports it), and
    so may source with a pragma, which is reported even where nothing resolves.
    """
    if b"scanrewrite" in source:
        return True
    if not any(last in source and package in source for last, package in _SPELLED):
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. invalid escapes: not ours to report
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    imports = names = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            # `import jax.numpy` binds `jax`; `import jax.lax as L` binds `jax.lax`.
            imports = imports or any(
                (alias.name if alias.asname else alias.name.partition(".")[0]) in _BINDINGS
                for alias in node.names
            )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                bound = node.module if alias.name == "*" else f"{node.module}.{alias.name}"
                imports = imports or bound in _BINDINGS
                names = names or alias.name in _LAST_NAMES
        elif isinstance(node, ast.Attribute):
            names = names or node.attr in _LAST_NAMES
        elif isinstance(node, ast.Name):
            names = names or node.id in _LAST_NAMES
        if imports and names:
            return True
    return False


def _check_options(unroll: object, checkpoint: object) -> None:
    if isinstance(unroll, bool) or not isinstance(unroll, int) or unroll < 1:
        raise ValueError(f"`unroll` must be a positive integer, got {unroll!r}")
    if checkpoint is not None and checkpoint != "none" and checkpoint not in CHECKPOINT_POLICIES:
        raise ValueError(
            f"`checkpoint` must be 'none' or one of {', '.join(CHECKPOINT_POLICIES)}; "
            f"got {checkpoint!r}"
        )


class ScanRewriteCommand(VisitorBasedCodemodCommand):
    """Rewrite `jax.lax.scan` and `equinox.internal.scan` calls to `scanrewrite.runtime`."""

    DESCRIPTION = (
        "Rewrite jax.lax.scan and equinox.internal.scan calls into scanrewrite.runtime's "
        "chunked, checkpointed scans with an unrolled body."
    )

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument(
            "--unroll",
            type=_positive_int,
            default=4,
            help="steps per unrolled chunk, for calls that do not pass unroll (default: 4)",
        )
        arg_parser.add_argument(
            "--checkpoint",
            choices=("none", *CHECKPOINT_POLICIES),
            default=None,
            help="write checkpoint=False ('none') or a jax.checkpoint_policies policy "
            "into each rewritten jax.lax.scan call (default: the runtime's default)",
        )

    def __init__(
        self, context: CodemodContext, unroll: int = 4, checkpoint: str | None = None
    ) -> None:
        super().__init__(context)
        _check_options(unroll, checkpoint)
        self.unroll = unroll
        self.checkpoint = checkpoint

    def transform_module(self, tree: cst.Module) -> cst.Module:
        """The rewrite, then the scheduled import additions and removals; each skipped
        call is also a warning. Raises `SkipFile` for a skip-file pragma."""
        rewriter = _Rewriter(self.unroll, self.checkpoint, self.context, warn=self.warn)
        return rewriter.transform(MetadataWrapper(tree))


class _Rewriter:
    """The transform of one module, as plain libcst passes that `rewrite` and
    `ScanRewriteCommand` both drive.

    It computes only the metadata it reads: scopes for the whole tree, qualified names
    only for names that may be a target, and lines only for the calls, references and
    pragmas that are reported (libcst's providers over every node, and matcher-based
    visitors, were most of the time).
    """

    def __init__(
        self,
        unroll: int,
        checkpoint: str | None,
        context: CodemodContext,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.unroll = unroll
        self.checkpoint = checkpoint
        #: What was rewritten and skipped, in file order once `transform` returns.
        self.rewritten: list[Rewritten] = []
        self.skipped: list[Skipped] = []
        self._context = context
        self._warn = warn
        self._scopes: Mapping[cst.CSTNode, Scope | None] = {}
        self._lines: dict[cst.CSTNode, tuple[int, int]] = {}
        self._pragmas: dict[int, Pragma] = {}
        self._call_lines: set[int] = set()
        self._imported: set[str] = set()  # local names bound by an import somewhere

    def transform(self, wrapper: MetadataWrapper) -> cst.Module:
        """`wrapper.module` rewritten, with the scheduled import additions and removals.

        As `CodemodCommand.transform_module` would do them, except that removing an
        import keeps the blank lines and comments above it (libcst's
        `RemoveImportsVisitor` drops them) and adding one adds only its own line
        (libcst's `AddImportsVisitor` also adds a blank line after the import block
        when there is none).
        """
        module = wrapper.module
        self._scopes = wrapper.resolve(ScopeProvider)
        self._imported = {
            assignment.name.partition(".")[0]
            for scope in set(self._scopes.values())
            if scope is not None
            for assignment in scope.assignments
            if isinstance(getattr(assignment, "node", None), (cst.Import, cst.ImportFrom))
        }
        comments = pragma_comments(module) if "scanrewrite" in module.code else []
        survey = _Survey(self._resolve)
        module.visit(survey)
        self._lines = _lines(module, {node for node, _ in (*comments, *survey.found)})
        self._read_pragmas(comments)

        for node, _ in survey.found:
            start, end = self._lines[node]
            self._call_lines.update((start, end) if isinstance(node, cst.Call) else (start,))
        calls: dict[cst.Call, tuple[Target, list[cst.Arg]]] = {}
        for node, resolved in survey.found:
            if isinstance(node, cst.Call):
                planned = self._plan(node, resolved)
                if planned is not None:
                    calls[node] = planned
            else:
                self._check_reference(node, resolved)
        for line, pragma in self._pragmas.items():
            if pragma.error is not None and line not in self._call_lines:
                self._skip(line, f"{pragma.error} (ignored)")
        self.rewritten.sort(key=lambda rewritten: rewritten.line)
        self.skipped.sort(key=lambda skipped: skipped.line)
        if not calls:
            return module
        self._schedule_import_removal(wrapper, [call.func for call in calls])
        module = module.visit(_ReplaceCalls(calls))
        if AddImportsVisitor.CONTEXT_KEY in self._context.scratch:
            # Visited directly: `transform_module` would copy the tree for metadata
            # that `AddImportsVisitor` does not use.
            module = module.visit(_AddImportsOnly(self._context))
        if RemoveImportsVisitor.CONTEXT_KEY in self._context.scratch:
            # As `transform_module`, without its deep copy of the tree: the only nodes
            # that occur twice in it are whitespace `_append_args` reused, whose
            # metadata nobody reads.
            wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
            module = wrapper.visit(_RemoveImportsKeepingLines(replace(self._context, wrapper=wrapper)))
        return module

    def _read_pragmas(self, comments: list[tuple[cst.Comment, Pragma]]) -> None:
        for comment, pragma in comments:
            line = self._lines[comment][0]
            if pragma.skip_file:
                self._skip(line, "skip-file pragma")
                raise SkipFile(f"line {line}: scanrewrite: skip-file pragma")
            self._pragmas[line] = self._pragmas[line].merge(pragma) if line in self._pragmas else pragma

    def _schedule_import_removal(self, wrapper: MetadataWrapper, callees: list[cst.BaseExpression]) -> None:
        """Hand `RemoveImportsVisitor` the imports that only replaced callees used.

        It removes an import only if nothing uses it any more; asking it only about
        imports with no other use in the original tree spares its whole-module pass in
        the common case where the import is still needed.
        """
        replaced: set[cst.CSTNode] = set()
        for callee in callees:
            callee.visit(_NodeCollector(replaced))
        context = replace(self._context, wrapper=wrapper)
        scheduled: set[tuple[str, Scope | None]] = set()
        for callee in callees:
            # The same spelling in the same scope finds the same imports.
            name = get_full_name_for_node(callee)
            if name is not None and (name, self._scopes[callee]) in scheduled:
                continue
            root = callee
            while isinstance(root, cst.Attribute):
                root = root.value
            if not isinstance(root, cst.Name):
                continue
            if any(
                isinstance(getattr(assignment, "node", None), (cst.Import, cst.ImportFrom))
                and all(access.node in replaced for access in assignment.references)
                for assignment in self._scopes[root][root.value]
            ):
                RemoveImportsVisitor.remove_unused_import_by_node(context, callee)
                if name is not None:
                    scheduled.add((name, self._scopes[callee]))

    def _check_reference(self, node: cst.Name | cst.Attribute, target: Target) -> None:
        line = self._lines[node][0]
        pragma = self._pragmas.get(line, Pragma())
        if pragma.error is not None:
            self._skip(line, pragma.error)
        elif pragma.skip:
            self._skip(line, "skip pragma")
        else:
            self._skip(line, f"reference to {target.qualified_name} that is not a call")

    def _resolve(self, node: cst.BaseExpression) -> Target | str | None:
        """The target `node` names; a reason string when it may also name something else."""
        # Only a name bound by an import, or an attribute spelled like a target's last
        # name, can resolve to a target: skip the qualified-name lookup for the rest.
        if isinstance(node, cst.Name):
            if node.value not in self._imported:
                return None
        elif not (isinstance(node, cst.Attribute) and node.attr.value in _LAST_NAMES):
            return None
        # What `QualifiedNameProvider` would give `node`, for this one node.
        scope = self._scopes.get(node)
        qualified = scope.get_qualified_names_for(node) if scope is not None else set()
        # A local class `jax` with a nested class `lax` is also "jax.lax.scan", but not
        # imported: only an import makes it jax's.
        imported = {q.name for q in qualified if q.source is QualifiedNameSource.IMPORT}
        names = {q.name for q in qualified}
        for target in TARGETS:
            if target.qualified_name in imported:
                if len(names) > 1:
                    return f"callee may be something other than {target.qualified_name}"
                return target
        return None

    # -- calls --------------------------------------------------------------------------

    def _plan(self, call: cst.Call, resolved: Target | str) -> tuple[Target, list[cst.Arg]] | None:
        """The target and the arguments to append when `call` is rewritten, else None
        (and the reason is reported)."""
        line, end_line = self._lines[call]
        # A pragma counts on the call's first line or its last (closing-bracket) line,
        # never on a line in between: those belong to its arguments, and a pragma for a
        # nested call there must not leak out to this one.
        pragma = self._pragmas.get(line, Pragma())
        if end_line != line:
            pragma = pragma.merge(self._pragmas.get(end_line, Pragma()))
        if isinstance(resolved, str):
            self._skip(line, resolved)
            return None
        plan = self._new_args(call, resolved, pragma)
        if isinstance(plan, str):
            self._skip(line, plan)
            return None
        AddImportsVisitor.add_needed_import(self._context, resolved.replacement.rpartition(".")[0])
        writes_policy = self.checkpoint not in (None, "none") and any(
            arg.keyword is not None and arg.keyword.value == "checkpoint" for arg in plan
        )
        if writes_policy and not self._scopes[call]["jax"]:
            AddImportsVisitor.add_needed_import(self._context, "jax")
        self.rewritten.append(Rewritten(line, resolved.qualified_name))
        return resolved, plan

    def _new_args(self, call: cst.Call, target: Target, pragma: Pragma) -> list[cst.Arg] | str:
        """The arguments to append to `call`, or the reason to leave it alone."""
        if pragma.error is not None:
            return pragma.error
        if pragma.skip:
            return "skip pragma"
        if not self._module_name_usable(call, "scanrewrite"):
            return "the name `scanrewrite` is bound to something else here"
        if any(isinstance(arg.value, cst.GeneratorExp) and not arg.value.lpar for arg in call.args):
            return "a bare generator argument cannot be followed by unroll"
        shape = _ArgShape.of(call.args, target)
        new_args: list[cst.Arg] = []
        if not shape.passes("unroll"):
            if shape.star_may_reach("unroll"):
                return "unroll may come from *args"
            if shape.double_star and "unroll" not in target.added:
                return "unroll may come from **kwargs"
            new_args.append(_keyword_arg("unroll", cst.Integer(str(pragma.unroll or self.unroll))))
        if self.checkpoint is not None and "checkpoint" in target.keyword_only and not shape.passes("checkpoint"):
            if self.checkpoint != "none" and not self._module_name_usable(call, "jax"):
                return "checkpoint policy needs `jax`, which is bound to something else here"
            new_args.append(_keyword_arg("checkpoint", self._checkpoint_value()))
        return new_args

    def _checkpoint_value(self) -> cst.BaseExpression:
        if self.checkpoint == "none":
            return cst.Name("False")
        return cst.parse_expression(f"jax.checkpoint_policies.{self.checkpoint}")

    def _module_name_usable(self, node: cst.CSTNode, name: str) -> bool:
        """Whether the name `name` at `node` is unbound or bound only by `import name[.sub]`,
        so that a module-level `import name...` makes it mean that package."""
        assignments = self._scopes[node][name]
        return all(_binds_package(assignment, name) for assignment in assignments)

    def _skip(self, line: int, reason: str) -> None:
        self.skipped.append(Skipped(line, reason))
        if self._warn is not None:
            self._warn(f"line {line}: {reason}")


class _Survey(cst.CSTVisitor):
    """The calls and the other references that resolve to a target, in the order they
    are reported: a reference when it is visited, a call when it is left."""

    def __init__(self, resolve: Callable[[cst.BaseExpression], Target | str | None]) -> None:
        super().__init__()
        self._resolve = resolve
        self._callees: dict[cst.BaseExpression, Target | str] = {}
        #: (call, its target or why it is ambiguous), (reference, its target).
        self.found: list[tuple[cst.Call | cst.Name | cst.Attribute, Target | str]] = []

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        resolved = self._resolve(node.func)
        if resolved is not None:
            self._callees[node.func] = resolved

    def leave_Call(self, original_node: cst.Call) -> None:
        resolved = self._callees.get(original_node.func)
        if resolved is not None:
            self.found.append((original_node, resolved))

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._reference(node)

    def _reference(self, node: cst.Name | cst.Attribute) -> None:
        if node in self._callees:
            return
        resolved = self._resolve(node)
        if isinstance(resolved, Target):
            self.found.append((node, resolved))


class _ReplaceCalls(cst.CSTTransformer):
    """Gives each planned call its replacement callee and appends its new arguments."""

    def __init__(self, calls: dict[cst.Call, tuple[Target, list[cst.Arg]]]) -> None:
        super().__init__()
        self._calls = calls

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        planned = self._calls.get(original_node)
        if planned is None:
            return updated_node
        target, plan = planned
        func = cst.parse_expression(target.replacement).with_changes(
            lpar=updated_node.func.lpar, rpar=updated_node.func.rpar
        )
        return updated_node.with_changes(func=func, args=_append_args(updated_node, plan))


_Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement


class _AddImportsOnly(AddImportsVisitor):
    """`AddImportsVisitor` that adds the import lines and no blank line after them.

    It adds only `import x` lines, which go between module-level statements, so it
    does not descend below them.
    """

    def on_visit(self, node: cst.CSTNode) -> bool:
        return super().on_visit(node) and isinstance(node, cst.Module)

    def visit_Module(self, node: cst.Module) -> None:
        # It finds the imports already there in the first statement (a docstring) and
        # the import lines after it, but by visiting the whole module: show it only those.
        end = 1
        while end < len(node.body) and _is_import_line(node.body[end]):
            end += 1
        super().visit_Module(node.with_changes(body=node.body[: end + 1]))

    def _insert_empty_line(self, statements: list[_Statement]) -> list[_Statement]:
        return statements


def _is_import_line(statement: _Statement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], (cst.Import, cst.ImportFrom))
    )


class _RemoveImportsKeepingLines(RemoveImportsVisitor):
    """`RemoveImportsVisitor` that moves a removed line's leading blank lines and comments
    onto the statement after it (or the end of its block), so they stay where they were."""

    def __init__(self, context: CodemodContext) -> None:
        super().__init__(context)
        self._pending: list[cst.EmptyLine] = []
        self._receivers: dict[cst.CSTNode, list[cst.EmptyLine]] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._pending and isinstance(node, _Statement):
            self._receivers[node] = self._pending
            self._pending = []
        # Imports are statements, so nothing inside an expression changes: skip the
        # bulk of the tree (its unused-import analysis still sees all of it).
        return super().on_visit(node) and not isinstance(node, cst.BaseExpression)

    def on_leave(
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        updated = super().on_leave(original_node, updated_node)
        lines = self._receivers.pop(original_node, None)
        if lines is not None:
            if isinstance(updated, _Statement):
                updated = updated.with_changes(leading_lines=[*lines, *updated.leading_lines])
            else:
                self._pending = [*lines, *self._pending]
        if (
            isinstance(original_node, cst.SimpleStatementLine)
            and isinstance(updated, cst.SimpleStatementLine)
            and not updated.body
        ):
            self._pending.extend(original_node.leading_lines)
        elif self._pending and isinstance(updated, (cst.IndentedBlock, cst.Module)):
            updated = updated.with_changes(footer=[*self._pending, *updated.footer])
            self._pending = []
        return updated


_LAST_NAMES = frozenset(target.qualified_name.rpartition(".")[2] for target in TARGETS)
#: The bytes every spelling of a target contains: its last name and its top package.
_SPELLED = tuple(
    (target.qualified_name.rpartition(".")[2].encode(), target.qualified_name.partition(".")[0].encode())
    for target in TARGETS
)
#: What an import must bind for a name to resolve to a target: the target itself, its
#: module, or a package above it ("jax", "jax.lax", "jax.lax.scan", ...).
_BINDINGS = frozenset(
    target.qualified_name.rsplit(".", depth)[0]
    for target in TARGETS
    for depth in range(target.qualified_name.count(".") + 1)
)


# -- arguments ------------------------------------------------------------------------


@dataclass(frozen=True)
class _ArgShape:
    """What a call's arguments say about which parameters they bind."""

    target: Target
    positional: int  # plain positional arguments before the first `*args`
    star: bool
    double_star: bool
    keywords: frozenset[str]

    @classmethod
    def of(cls, args: tuple[cst.Arg, ...] | list[cst.Arg], target: Target) -> _ArgShape:
        positional = 0
        star = double_star = False
        keywords = set()
        for arg in args:
            if arg.star == "*":
                star = True
            elif arg.star == "**":
                double_star = True
            elif arg.keyword is not None:
                keywords.add(arg.keyword.value)
            elif not star:
                positional += 1
        return cls(target, positional, star, double_star, frozenset(keywords))

    def passes(self, name: str) -> bool:
        """Whether the call certainly passes parameter `name`."""
        if name in self.keywords:
            return True
        params = self.target.params
        return name in params and params.index(name) < self.positional

    def star_may_reach(self, name: str) -> bool:
        """Whether a `*args` could fill parameter `name` positionally."""
        return self.star and name in self.target.params


def _keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


def _append_args(call: cst.Call, new: list[cst.Arg]) -> tuple[cst.Arg, ...]:
    """`call`'s arguments with `new` appended in the call's own layout.

    One argument per line (the space after the previous comma is a line break): each
    new argument goes on its own line at the same indentation. Otherwise they follow
    the last argument on its line. A trailing comma stays trailing; comments stay on
    the lines they were on.
    """
    args = tuple(call.args)
    if not new:
        return args
    if not args:
        return tuple(_with_comma(arg, cst.SimpleWhitespace(" ")) for arg in new[:-1]) + (new[-1],)
    last = args[-1]
    if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
        separator = args[-2].comma.whitespace_after
    elif isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        separator = call.whitespace_before_args
    else:
        separator = cst.SimpleWhitespace(" ")
    trailing_comma = last.comma if isinstance(last.comma, cst.Comma) else None
    tail = trailing_comma.whitespace_after if trailing_comma is not None else last.whitespace_after_arg
    comma_before = (
        trailing_comma.whitespace_before if trailing_comma is not None else cst.SimpleWhitespace("")
    )

    if isinstance(separator, cst.ParenthesizedWhitespace):
        between = _line_break(separator)
        if isinstance(tail, cst.ParenthesizedWhitespace):
            # Whatever followed the last argument on its line (a comment, blank lines)
            # stays after it; the closing bracket keeps its own indentation.
            after_last = tail.with_changes(indent=separator.indent, last_line=separator.last_line)
            closing: cst.BaseParenthesizableWhitespace = _line_break(tail)
        else:
            after_last, closing = between, tail
    else:
        between = after_last = separator
        closing = tail

    result = list(args[:-1])
    result.append(
        last.with_changes(
            comma=cst.Comma(whitespace_before=comma_before, whitespace_after=after_last),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
    )
    result.extend(_with_comma(arg, between) for arg in new[:-1])
    if trailing_comma is not None:
        result.append(
            new[-1].with_changes(
                comma=cst.Comma(whitespace_after=closing),
                whitespace_after_arg=last.whitespace_after_arg,
            )
        )
    else:
        result.append(new[-1].with_changes(whitespace_after_arg=closing))
    return tuple(result)


def _line_break(like: cst.ParenthesizedWhitespace) -> cst.ParenthesizedWhitespace:
    """A bare line break to the indentation of `like` (without its comment or blank lines)."""
    return cst.ParenthesizedWhitespace(indent=like.indent, last_line=like.last_line)


def _with_comma(arg: cst.Arg, whitespace_after: cst.BaseParenthesizableWhitespace) -> cst.Arg:
    return arg.with_changes(comma=cst.Comma(whitespace_after=whitespace_after))


def _binds_package(assignment: object, package: str) -> bool:
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


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


class _NodeCollector(cst.CSTVisitor):
    """Adds every node of the visited tree to a set."""

    def __init__(self, nodes: set[cst.CSTNode]) -> None:
        super().__init__()
        self._nodes = nodes

    def on_visit(self, node: cst.CSTNode) -> bool:
        self._nodes.add(node)
        return True


# -- lines ----------------------------------------------------------------------------

_NEWLINE = re.compile(r"\r\n?|\n")


def _lines(module: cst.Module, nodes: set[cst.CSTNode]) -> dict[cst.CSTNode, tuple[int, int]]:
    """The first and last line that `PositionProvider` gives each of `nodes`.

    One codegen pass, as `PositionProvider`'s own, that renders nothing and notes only
    these nodes: the provider's positions for every node cost several times a render.
    """
    if not nodes:
        return {}
    state = _LineCounter(module.default_indent, module.default_newline, nodes)
    module._codegen(state)
    return state.lines


class _LineCounter(CodegenState):
    """A codegen state that counts lines (as `PositionProvidingCodegenState` does) and
    keeps no tokens."""

    def __init__(self, default_indent: str, default_newline: str, nodes: set[cst.CSTNode]) -> None:
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.line = 1
        self.lines: dict[cst.CSTNode, tuple[int, int]] = {}
        self._nodes = nodes
        self._starts: dict[cst.CSTNode, int] = {}

    def add_indent_tokens(self) -> None:
        pass  # indentation holds no line break

    def add_token(self, value: str) -> None:
        if "\n" in value or "\r" in value:
            self.line += len(_NEWLINE.findall(value))

    def before_codegen(self, node: cst.CSTNode) -> None:
        if node in self._nodes:
            self._starts[node] = self.line

    def after_codegen(self, node: cst.CSTNode) -> None:
        if node in self._nodes:
            self.lines.setdefault(node, (self._starts.pop(node), self.line))

    @contextmanager
    def record_syntactic_position(
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> Iterator[None]:
        # The syntactic position leaves out parentheses and leading lines. `start_node`
        # and `end_node` come only with statements, which are never asked for.
        start = self.line
        yield
        if node in self._nodes:
            self.lines[node] = (start, self.line)


# -- bytes ----------------------------------------------------------------------------

_BLANK_TAIL = re.compile(rb"^(?:[ \t\f]*\r?\n)*[ \t\f]*\Z", re.MULTILINE)
_PARSER_PREFIX = re.compile(r"^(?:parser|tokenizer) error: (?:error at \d+:\d+: )?")
_COOKIE = re.compile(rb"^(?:\xef\xbb\xbf)?[ \t\f]*#.*?coding[:=]", re.MULTILINE)


@dataclass(frozen=True)
class _Parsed:
    """A module parsed so that rendering it reproduces the input bytes exactly.

    libcst round-trips nearly every file; two layouts it does not, handled here:
    files whose only line break is a bare CR (parsed with LF, turned back on render),
    and files that end in blank lines after a whitespace-only line (the blank tail is
    cut off before parsing and put back on render). Rendering anything else that would
    not round-trip is a `SourceError` rather than a silent change; a file that is not
    rendered (nothing to rewrite) is fine as it is.
    """

    module: cst.Module
    tail: bytes
    bare_cr: bool
    exact: bool

    @classmethod
    def from_bytes(cls, source: bytes) -> _Parsed:
        """Parse `source`; raises `SourceError` if it cannot be decoded or parsed."""
        bare_cr = b"\r" in source and b"\n" not in source
        text = source.replace(b"\r", b"\n") if bare_cr else source
        module = _parse(text)
        if module.bytes == text:
            return cls(module, b"", bare_cr, exact=True)
        tail = _BLANK_TAIL.search(text)
        if tail is not None and tail.start() > 0:
            head = text[: tail.start()]
            head_module = _parse(head)
            if head_module.bytes == head:
                return cls(head_module, text[tail.start() :], bare_cr, exact=True)
        return cls(module, b"", bare_cr, exact=False)

    def render(self, module: cst.Module) -> bytes:
        """The bytes of `module`, a transformed `self.module`, in the input's layout."""
        if not self.exact:
            raise SourceError(None, "cannot reproduce this file byte for byte (libcst round-trip)")
        code = module.bytes + self.tail
        return code.replace(b"\n", b"\r") if self.bare_cr else code


def _parse(source: bytes) -> cst.Module:
    """`source` parsed with the newline of its first line as the default for new lines."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        message = _PARSER_PREFIX.sub("", error.message.splitlines()[0] if error.message else "")
        raise SourceError(error.raw_line, f"cannot parse: {message or 'invalid syntax'}") from None
    except UnicodeDecodeError as error:
        line = source[: error.start].count(b"\n") + 1
        byte = error.object[error.start : error.start + 1].hex()
        raise SourceError(line, f"cannot decode as {error.encoding}: byte 0x{byte}") from None
    except SyntaxError as error:
        cookie = _COOKIE.search(source, 0, _end_of_second_line(source))
        line = source[: cookie.start()].count(b"\n") + 1 if cookie is not None else None
        raise SourceError(line, f"cannot decode: {error.msg}") from None
    newline = _first_newline(source)
    if module.default_newline != newline:
        # libcst takes the first CR or LF anywhere (even inside a string) as the file's
        # newline; new lines (the added import) must use the first line's instead.
        module = module.visit(_ExplicitNewlines(module.default_newline)).with_changes(
            default_newline=newline
        )
    return module


def _first_newline(source: bytes) -> str:
    end = source.find(b"\n")
    if end == -1:
        return "\r" if b"\r" in source else "\n"
    return "\r\n" if source[end - 1 : end] == b"\r" else "\n"


def _end_of_second_line(source: bytes) -> int:
    first = source.find(b"\n")
    second = source.find(b"\n", first + 1) if first != -1 else -1
    return len(source) if second == -1 else second


class _ExplicitNewlines(cst.CSTTransformer):
    """Spell out newlines that were implicit (the module default) before changing it."""

    def __init__(self, newline: str) -> None:
        super().__init__()
        self._newline = newline

    def leave_Newline(self, original_node: cst.Newline, updated_node: cst.Newline) -> cst.Newline:
        if updated_node.value is None:
            return updated_node.with_changes(value=self._newline)
        return updated_node
