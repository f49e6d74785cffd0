"""The write-back: set ``unroll=`` on the runtime calls the rewrite made, at given lines.

The second transform beside the rewrite, for `scanrewrite-tune --diff/--write/--check`::

    set_unroll(source: bytes, picks: Mapping[int, int]) -> UnrollResult
    read_unroll(source: bytes) -> dict[int, int | None]

`picks` maps a call site's line (1-based: the line of the call's first character, as
`Rewritten.line` reports it, and as the runtime names the site, since the rewrite writes
the callee on one line) to the `unroll` to write there. Each `scanrewrite.runtime.scan` / `scanrewrite.runtime.eqxi_scan` call starting on
that line gets ``unroll=K``: its value replaced where the call passes one (by keyword or,
for `scan`, as the sixth positional argument), else appended in the call's own layout.
Every other byte stays. Pure: bytes in, result out; no file I/O, no jax.

A call is left alone and reported in `UnrollResult.skipped` (with its line and why) when a
pragma on it says so (`# scanrewrite: skip`, or `# scanrewrite: unroll=N`, which wins over
the tuner), when its unroll is an expression rather than a number, when `*args` or
`**kwargs` may carry its unroll, and a picked line with no
runtime call starting on it is reported too. A `skip-file` pragma leaves the whole file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, ScopeProvider

from scanrewrite.codemod._arguments import ArgShape, append_args, keyword_arg
from scanrewrite.codemod._discovery import Resolver, Survey, call_pragma, read_pragmas
from scanrewrite.codemod._parsing import Parsed, node_lines
from scanrewrite.codemod._rewrite import Skipped
from scanrewrite.pragmas import Pragma, pragma_comments
from scanrewrite.targets import TARGETS, Target

__all__ = ["NO_CALL", "RuntimeCalls", "UnrollResult", "read_unroll", "set_unroll"]

#: The write-back looks for the calls the rewrite wrote.
_BY_REPLACEMENT = {target.replacement: target for target in TARGETS}
NO_CALL = "no scanrewrite.runtime call starts on this line"


@dataclass(frozen=True)
class UnrollResult:
    """What `set_unroll` did to one source file."""

    #: The new source, in the input's encoding, BOM and line endings.
    code: bytes
    #: The picked lines whose calls now pass the picked unroll and did not before.
    updated: tuple[int, ...]
    #: The picked lines whose calls already passed it.
    unchanged: tuple[int, ...]
    #: The picked lines left alone, and why (a pragma, `*args`/`**kwargs`, no call there).
    skipped: tuple[Skipped, ...]

    @property
    def changed(self) -> bool:
        """Whether `code` differs from the input."""
        return bool(self.updated)


def set_unroll(source: bytes, picks: Mapping[int, int]) -> UnrollResult:
    """Write ``unroll=picks[line]`` into the runtime calls starting on each picked line.

    Raises `ValueError` for a line or an unroll that is not a positive int, and
    `SourceError` for source that cannot be decoded, parsed or reproduced byte for byte.
    """
    for line, unroll in picks.items():
        for name, value in (("line", line), ("unroll", unroll)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer, got {value!r}")
    parsed = Parsed.from_bytes(source)
    sites = RuntimeCalls(parsed.module) if b"scanrewrite" in source else None
    if sites is None or sites.skip_file is not None:
        reason = "skip-file pragma" if sites is not None else NO_CALL
        skipped = tuple(Skipped(line, reason) for line in sorted(picks))
        return UnrollResult(source, (), (), skipped)

    edits: dict[cst.Call, int] = {}
    updated, unchanged, skipped = [], [], []
    for line in sorted(picks):
        calls = sites.by_line.get(line, [])
        if not calls:
            skipped.append(Skipped(line, NO_CALL))
        reasons, changes = [], False
        for call, resolved in calls:
            outcome = _why_not(call, resolved, sites.pragma(call))
            if outcome is None:
                assert isinstance(resolved, Target)
                outcome = _unroll_args(call, resolved, picks[line])
            if isinstance(outcome, str):
                reasons.append(outcome)
            elif outcome is not None:
                edits[call] = picks[line]
                changes = True
        skipped.extend(Skipped(line, reason) for reason in dict.fromkeys(reasons))
        if changes:
            updated.append(line)
        elif calls and not reasons:
            unchanged.append(line)
    if not edits:
        return UnrollResult(source, (), tuple(unchanged), tuple(skipped))
    module = parsed.module.visit(_SetUnroll(edits, sites.targets))
    return UnrollResult(parsed.render(module), tuple(updated), tuple(unchanged), tuple(skipped))


def read_unroll(source: bytes) -> dict[int, int | None]:
    """The ``unroll`` each runtime call passes, by the line it starts on.

    None where it passes none (the runtime's default, 1, applies) or passes something
    other than an int literal (a name, ``True``, ``**kwargs``). Where calls share a first
    line, the first one's. Pragmas are not consulted: `set_unroll(...).skipped` tells which
    sites the write-back leaves alone. Raises `SourceError` as `set_unroll` does.
    """
    parsed = Parsed.from_bytes(source)
    if b"scanrewrite" not in source:
        return {}
    sites = RuntimeCalls(parsed.module)
    found: dict[int, int | None] = {}
    for line, calls in sorted(sites.by_line.items()):
        for call, resolved in calls:
            if isinstance(resolved, Target):
                arg = _unroll_arg(call, resolved)
                value = arg.value if arg is not None else None
                found[line] = value.evaluated_value if isinstance(value, cst.Integer) else None
                break
    return found


class RuntimeCalls:
    """The runtime calls of one module, by their first line, and the pragmas on them."""

    def __init__(self, module: cst.Module) -> None:
        self.wrapper = wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self.scopes = wrapper.resolve(ScopeProvider)
        resolver = Resolver(self.scopes, _BY_REPLACEMENT)
        survey = Survey(resolver.resolve)
        module.visit(survey)
        comments = pragma_comments(module)
        calls = [
            (node, _shadowed(node, resolver) or resolved)
            for node, resolved in survey.found
            if isinstance(node, cst.Call)
        ]
        self.lines = node_lines(module, {node for node, _ in (*comments, *calls)})
        self.pragmas, self.skip_file = read_pragmas(comments, self.lines)
        self.by_line: dict[int, list[tuple[cst.Call, Target | str]]] = {}
        for call, resolved in calls:
            self.by_line.setdefault(self.lines[call][0], []).append((call, resolved))
        self.targets = {call: resolved for call, resolved in calls if isinstance(resolved, Target)}

    def pragma(self, call: cst.Call) -> Pragma:
        return call_pragma(self.pragmas, *self.lines[call])


def _shadowed(call: cst.Call, resolver: Resolver) -> str | None:
    """Why `scanrewrite.runtime.scan(...)` here may not be the runtime's (libcst resolves a
    dotted import even where a local name `scanrewrite` hides it)."""
    root = call.func
    while isinstance(root, cst.Attribute):
        root = root.value
    if isinstance(root, cst.Name) and root.value == "scanrewrite":
        if not resolver.module_name_usable(call, "scanrewrite"):
            return "the name `scanrewrite` is bound to something else here"
    return None


def _why_not(call: cst.Call, resolved: Target | str, pragma: Pragma) -> str | None:
    """Why a pragma or the callee keeps the write-back off `call`; None if nothing does."""
    if isinstance(resolved, str):
        return resolved
    if pragma.error is not None:
        return pragma.error
    if pragma.skip:
        return "skip pragma"
    if pragma.unroll is not None:
        return f"unroll pragma wins (unroll={pragma.unroll})"
    return None


def _unroll_arg(call: cst.Call, target: Target) -> cst.Arg | None:
    """The argument that passes `unroll` to `call`, by keyword or position; None if none."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "unroll":
            return arg
    shape = ArgShape.of(call.args, target)
    if shape.passes("unroll"):
        return call.args[target.params.index("unroll")]
    return None


def _unroll_args(call: cst.Call, target: Target, unroll: int) -> tuple[cst.Arg, ...] | str | None:
    """`call`'s arguments passing ``unroll``; None if they already do; why not, if they cannot."""
    value = cst.Integer(str(unroll))
    arg = _unroll_arg(call, target)
    if arg is not None:
        if not isinstance(arg.value, cst.Integer):
            # A name or expression says how the user chose k; a literal would silently drop that.
            code = cst.Module([]).code_for_node(arg.value)
            return f"unroll is written as an expression (`{code}`), not a number: set it by hand"
        if arg.value.evaluated_value == unroll:
            return None
        return tuple(arg.with_changes(value=value) if other is arg else other for other in call.args)
    shape = ArgShape.of(call.args, target)
    if shape.star_may_reach("unroll"):
        return "unroll may come from *args"
    if shape.double_star:
        # The runtime takes `unroll` from **kwargs too: adding one could pass it twice.
        return "unroll may come from **kwargs"
    if any(isinstance(arg.value, cst.GeneratorExp) and not arg.value.lpar for arg in call.args):
        return "a bare generator argument cannot be followed by unroll"
    return append_args(call, [keyword_arg("unroll", value)])


class _SetUnroll(cst.CSTTransformer):
    """Writes the picked unroll into each call to edit (nested calls included)."""

    def __init__(self, edits: dict[cst.Call, int], targets: dict[cst.Call, Target]) -> None:
        super().__init__()
        self._edits = edits
        self._targets = targets

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        unroll = self._edits.get(original_node)
        if unroll is None:
            return updated_node
        args = _unroll_args(updated_node, self._targets[original_node], unroll)
        assert isinstance(args, tuple), args
        return updated_node.with_changes(args=args)
