"""The revert: each runtime call becomes the call it replaced again (`scanrewrite --revert`).

```python
revert(source: bytes, options=None, /, *, lines=None, **changes) -> RewriteResult
```

The inverse of `rewrite`, driven by the same table (`targets.TARGETS`): a call that resolves
to a row's `replacement` calls the row's `qualified_name` again, and loses the keyword
arguments only the runtime takes (the row's `added`, and an `unroll=` int literal, which is
what the rewrite writes; a name or `True` there is the user's own and stays, as does a
positional `unroll`). Every other argument, comment and line break passes through, and
`import scanrewrite.runtime` goes when nothing uses it any more (as does an import only a
dropped argument used, `import jax` for a policy: at the top of the module, where the rewrite
adds its imports; one under ``if TYPE_CHECKING:``, in a ``try`` or a function stays).

The callee is spelled as the file already spells the API, through the most specific import
in reach of the call (`scan` from `from jax.lax import scan`, else `lax.scan` from `from jax
import lax`, else `jax.lax.scan` from `import jax`). Where the rewrite removed that import, the
name is added to the file's module-level `from jax import ...` line if it has one (`lax`, in
the sorters' order), else ``import jax`` is added where ruff and isort put it (`imports._placement`).
A statement laid out as the formatters lay it out keeps their layout (`scanrewrite.layout`): a call
they split, now short enough for one line, is joined; one the user split with a magic
trailing comma stays as it is, and so does one where joining would put a reverted call under
the statement's pragma (`# scanrewrite: skip`, or settings the call does not have).

So `revert(rewrite(x))` computes what `x` computes, and is `x` byte for byte where the
rewrite kept the import the call used (one that surely ran: not under ``if TYPE_CHECKING:``
or in a ``try``) and `x` spells it one way (no other import, even one nothing reads, binds
the API or its module: `from jax.lax import scan` beside `from jax import lax` spells a
`lax.scan` call `scan`), its calls pass no `unroll=` literal, and its long calls are laid out
as above; `rewrite(revert(y))` is `y` for a rewritten `y` (with the options that wrote it),
but for the layout of a call spelled anew (as above, or its import gone) in a statement not
laid out as the formatters lay it out, and for an import nothing read (an ``import jax``
under ``if TYPE_CHECKING:``): the call spelled anew reads it too, so the rewrite removes it
with the added ``import jax``; `revert` of its own output changes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

import libcst as cst

from scanrewrite.codemod._applied import relayout_decorator, reverted_decorator, runtime_partials
from scanrewrite.codemod._arguments import levels_value, remove_args
from scanrewrite.codemod.imports import ImportEdits, ImportPruner, apply_scheduled_imports, unused_imports, whole_lines
from scanrewrite.layout import KeepLayout
from scanrewrite.codemod._parsing import Parsed, no_collection, node_lines
from scanrewrite.codemod._rewrite import RewriteResult, Rewritten, Skipped
from scanrewrite.codemod._spelling import Spellings
from scanrewrite.codemod._walk import calls_in
from scanrewrite.codemod._writeback import NO_CALL, RuntimeCalls, UnrollResult, set_settings
from scanrewrite.options import Options, merged
from scanrewrite.pragmas import Pragma
from scanrewrite.settings import Settings
from scanrewrite.targets import Target

__all__ = ["revert", "write_picks"]

#: The runtime's defaults: dropping an argument with another value changes the memory.
_DEFAULTS = {"checkpoint": "True", "levels": "1"}


@no_collection
def revert(
    source: bytes, options: Options | None = None, /, *, lines: Collection[int] | None = None, **changes: Any
) -> RewriteResult:
    """Turn the runtime calls in `source` back into the calls they replaced.

    `lines`: only the calls starting on these lines (1-based), or where none does, the
    `functools.partial` of a runtime function that a call starting there applies (the line
    the runtime names its site by), each reported in `skipped` when there is none; None for
    every call. Of the options (`options` changed by keyword arguments, as for `rewrite`), two
    apply: `line_length`, the formatters' (for joining a call that fits on one line again), and
    `first_party`, the top-level names of the user's own packages (for placing an added import,
    as in `rewrite`).

    Returns a `RewriteResult` whose `rewritten` lists the calls reverted, each with the API
    it calls again, and a note where a `checkpoint=` or `levels=` other than the runtime's
    default was dropped (the memory that setting saved is gone). A call is left alone, with
    the reason in `skipped`, under a `# scanrewrite: skip` pragma, or when no spelling of
    the API can reach it. (A runtime-only option passed through `**kwargs` stays there: the
    original then refuses it, loudly, when called.) Raises `SourceError` for source that
    holds the bytes ``scanrewrite`` and cannot be decoded, parsed or reproduced byte for byte.
    """
    options = merged(options, changes)
    line_length, first_party = options.line_length, options.first_party
    wanted = None if lines is None else set(lines)
    if b"scanrewrite" not in source:
        # No runtime call can be spelled without those bytes: nothing to read.
        return RewriteResult(source, (), tuple(Skipped(line, NO_CALL) for line in sorted(wanted or ())))
    parsed = Parsed.from_bytes(source)
    calls = RuntimeCalls(parsed.module, parsed.code, parsed.tree)
    if calls.skip_file is not None:
        return RewriteResult(source, (), (Skipped(calls.skip_file, "skip-file pragma"),))
    # `functools.partial(scanrewrite.runtime.scan, ...)`: the scan is its first argument.
    partials = runtime_partials(parsed.module, calls) if b"partial" in source else {}
    # A wanted line may be one where a partial is applied (the runtime names its site so).
    by_line = calls.by_line if wanted is None else {line: calls.at(line) for line in wanted}
    skipped = [Skipped(line, NO_CALL) for line, found in sorted(by_line.items()) if not found]
    plans: dict[cst.Call, _Plan] = {}
    lines: dict[cst.Call, int] = {}
    for line, found in sorted(by_line.items()):
        for call, resolved in found:
            plan = _plan(call, resolved, calls)
            if isinstance(plan, str):
                skipped.append(Skipped(line, plan))
            else:
                plans[call] = plan
                lines.setdefault(call, line)
    if not plans:
        return RewriteResult(source, (), tuple(sorted(skipped, key=lambda s: s.line)))

    edits = ImportEdits()
    spellings = Spellings(parsed.module, calls.scopes, line_length, plans, calls.holders, calls.top_level)
    reverted = []
    for call, plan in plans.items():
        spelling = spellings.choose(call, plan.target)
        line = lines[call]
        if spelling is None:
            name = plan.target.qualified_name.partition(".")[0]
            skipped.append(Skipped(line, f"the name `{name}` is bound to something else here"))
            continue
        plan.callee = spelling
        reverted.append(Rewritten(line, plan.target.qualified_name, plan.note))
    plans = {call: plan for call, plan in plans.items() if plan.callee is not None}
    if not plans:
        return RewriteResult(source, (), tuple(sorted(skipped, key=lambda s: s.line)))
    for name in spellings.import_top:
        edits.add(name)
    gone = [call.args[0].value if call in partials else call.func for call in plans] + [arg.value for call, plan in plans.items() for arg in plan.dropped]
    unused = unused_imports(calls.scopes, gone)
    # An import a dropped argument used may spell a reverted call now (`jax`, for a policy).
    unused = {node: names - spellings.roots for node, names in unused.items() if names - spellings.roots}
    # The rewrite adds imports only at the top of the module; one under `if TYPE_CHECKING:`, in
    # a `try` or a function is the user's own, and a rewrite of the result could never bring it back.
    top = {small for line in parsed.module.body if isinstance(line, cst.SimpleStatementLine) for small in line.body}
    unused = {node: names for node, names in unused.items() if node in top}
    replacer = _Revert(plans, parsed.module, line_length, set(partials), calls.holders, parsed.code)
    module = parsed.module.visit(replacer)
    module = spellings.extend_from_imports(module)
    # As the rewrite: the import added first, placed knowing which lines go, then those go.
    dropped = whole_lines(parsed.module, unused)
    # An import a reverted call needs goes before the first statement with one.
    first_use = min((spellings.statement_of[call] for call in plans), default=None)
    module = apply_scheduled_imports(module, edits, first_use, dropped, first_party)
    pruner = ImportPruner(unused, collapse_blank_lines=True)
    pruner.only_top_level(module, list(unused))
    module = module.visit(pruner)
    module = _no_blank_start(parsed.module, module)
    reverted.sort(key=lambda call: call.line)
    return RewriteResult(parsed.render(module), tuple(reverted), tuple(sorted(skipped, key=lambda s: s.line)))


@no_collection
def write_picks(
    source: bytes, picks: Mapping[int, Settings | None], options: Options | None = None, /, **changes: Any
) -> UnrollResult:
    """The tuner's write-back: the runtime calls starting on each picked line get its
    `Settings` (`set_settings`), or, where the pick is None (the scan they replaced won
    there), are reverted (`revert`). Lines in the result are those of `source`. Of the
    options (as for `revert`), `line_length` and `first_party` apply.

    Raises `ValueError` and `SourceError` as `set_settings` does.
    """
    options = merged(options, changes)
    settings = {line: pick for line, pick in picks.items() if pick is not None}
    reverts = sorted(line for line, pick in picks.items() if pick is None)
    written = set_settings(source, settings, options.line_length)
    if not reverts:
        return written
    # A pragma that pins a call's settings wins over a revert as over any other pick.
    pinned = _pinned(source, reverts)
    reverts = [line for line in reverts if line not in pinned]
    written = replace(written, skipped=written.skipped + tuple(Skipped(line, pinned[line]) for line in pinned))
    if not reverts:
        return written
    # The calls keep their order: the n-th runtime call's line before and after.
    before, after = _call_lines(source), _call_lines(written.code)
    moved = dict(zip(before, after, strict=True)) if len(before) == len(after) else {}
    back = {moved.get(line, line): line for line in reverts}
    result = revert(written.code, options, lines=sorted(back))
    return UnrollResult(
        result.code,
        tuple(sorted({*written.updated, *(back[call.line] for call in result.rewritten)})),
        written.unchanged,
        written.skipped + tuple(Skipped(back.get(skip.line, skip.line), skip.reason) for skip in result.skipped),
    )


def _pinned(source: bytes, lines: list[int]) -> dict[int, str]:
    """The lines among `lines` whose calls a pragma pins (``unroll=N``), and why."""
    if b"scanrewrite:" not in source:
        return {}
    parsed = Parsed.from_bytes(source)
    calls = RuntimeCalls(parsed.module, parsed.code, parsed.tree)
    if b"partial" in source:
        runtime_partials(parsed.module, calls)
    pinned = {}
    for line in lines:
        for call, _ in calls.at(line):
            pragma = calls.pragma(call)
            if pragma.unroll is not None or pragma.levels is not None:
                pinned[line] = "a pragma pins this call's settings"
    return pinned


def _call_lines(source: bytes) -> list[int]:
    if b"scanrewrite" not in source:
        return []
    parsed = Parsed.from_bytes(source)
    calls = RuntimeCalls(parsed.module, parsed.code, parsed.tree)
    if b"partial" in source:
        runtime_partials(parsed.module, calls)
    return sorted({*calls.by_line, *calls.applied})


@dataclass
class _Plan:
    target: Target
    #: The keyword arguments that go.
    dropped: tuple[cst.Arg, ...]
    note: str | None
    callee: str | None = None


def _plan(call: cst.Call, resolved: Target | str, calls: RuntimeCalls) -> _Plan | str:
    """What reverting `call` drops, or why it stays."""
    if isinstance(resolved, str):
        return resolved
    pragma = calls.pragma(call)
    if pragma.error is not None:
        return pragma.error
    if pragma.skip:
        return "skip pragma"
    dropped = tuple(
        arg
        for arg in call.args
        if arg.keyword is not None
        and (
            arg.keyword.value in resolved.added
            or (arg.keyword.value == "unroll" and isinstance(arg.value, cst.Integer))
        )
    )
    changed = [
        f"{arg.keyword.value}={_code(arg.value)}"
        for arg in dropped
        if arg.keyword.value in _DEFAULTS and _code(arg.value) != _DEFAULTS[arg.keyword.value]
    ]
    saved = changed and not any(text == "checkpoint=False" for text in changed)
    note = f"dropped {', '.join(changed)}: memory as {resolved.qualified_name}'s again" if saved else None
    return _Plan(resolved, dropped, note)


def _no_blank_start(original: cst.Module, module: cst.Module) -> cst.Module:
    """`module` without the blank lines it starts with now that the import lines that
    opened the file are gone (the formatters remove them too)."""
    if not module.body or not original.body or original.body[0].leading_lines or module.header:
        return module
    first = module.body[0]
    lines = list(first.leading_lines)
    while lines and lines[0].comment is None:
        lines.pop(0)
    if len(lines) == len(first.leading_lines):
        return module
    return module.with_changes(body=[first.with_changes(leading_lines=lines), *module.body[1:]])


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


class _Revert(KeepLayout):
    """Gives each planned call its original callee, drops its runtime-only arguments, and
    lays out the statements whose calls changed, but not where that moves a reverted call
    under the statement's pragma, or from under it, and the pragma would then not write
    what the call has (`_keeps_pragmas`).

    It leaves the import nodes themselves as they are (the same objects), so that
    `ImportPruner` finds the unused ones afterwards."""

    def __init__(
        self,
        plans: dict[cst.Call, _Plan],
        module: cst.Module,
        line_length: int,
        partials: set[cst.Call] = frozenset(),
        holders: Collection[cst.CSTNode] | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(module, line_length, code)
        self._plans = plans
        self._partials = partials
        #: The nodes that hold a runtime call (None: any may): nothing else changes.
        self._holders = holders
        #: Each reverted call, as `leave_Call` returned it, to the runtime call it was.
        self._reverted: dict[cst.Call, cst.Call] = {}

    def visit_Decorator(self, node: cst.Decorator) -> None:
        self._edit_count_before.append(self._edit_count)

    def leave_Decorator(self, original_node: cst.Decorator, updated_node: cst.Decorator) -> cst.Decorator:
        if original_node.decorator in self._plans:
            updated_node = reverted_decorator(original_node, updated_node)
        if self._edit_count_before.pop() == self._edit_count or self._line_length is None:
            return updated_node
        # A decorator is no simple statement, which is what `KeepLayout` lays out again.
        indent = "".join(self._indents)
        laid_out = relayout_decorator(original_node, updated_node, indent, self._line_length, self._module)
        if laid_out.decorator is updated_node.decorator:
            return laid_out
        statements = [_as_statement(node) for node in (original_node, updated_node, laid_out)]
        return laid_out if self._keeps_pragmas(*statements) else updated_node

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        laid_out = super().leave_SimpleStatementLine(original_node, updated_node)
        if laid_out is updated_node or self._keeps_pragmas(original_node, updated_node, laid_out):
            return laid_out
        return updated_node

    def on_visit(self, node: cst.CSTNode) -> bool:
        descend = super().on_visit(node) and not isinstance(node, (cst.Import, cst.ImportFrom))
        return descend and (self._holders is None or node in self._holders)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        plan = self._plans.get(original_node)
        if plan is None:
            return updated_node
        assert plan.callee is not None
        func = cst.parse_expression(plan.callee).with_changes(lpar=updated_node.func.lpar, rpar=updated_node.func.rpar)
        names = {arg.keyword.value for arg in plan.dropped if arg.keyword is not None}
        self.edited()
        if original_node in self._partials:
            first = updated_node.args[0].with_changes(value=func.with_changes(lpar=(), rpar=()))
            updated_node = updated_node.with_changes(args=(first, *updated_node.args[1:]))
            reverted = updated_node.with_changes(args=remove_args(updated_node, names))
        else:
            reverted = updated_node.with_changes(func=func, args=remove_args(updated_node, names))
        self._reverted[reverted] = original_node
        return reverted

    def _keeps_pragmas(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine, laid_out: cst.SimpleStatementLine
    ) -> bool:
        """Whether `laid_out` (`updated`, the reverted `original`, laid out again) keeps
        each reverted call under the pragma at the statement's end if it was under it in
        `original`, and off it if not, but where a rewrite under the pragma writes what the
        call has (a call the rewrite split off the pragma's line goes back onto it).

        A pragma applies to the calls that start or end on its line (`call_pragma`): a call
        on a line of its own, joined onto the pragma's line, is under it, and a rewrite of
        the result would leave it alone (`skip`) or give it other settings."""
        comment = updated.trailing_whitespace.comment
        # (A `skip-file` pragma at the top level left the whole file: here it is malformed.)
        pragma = None if comment is None else Pragma.parse(comment.value, top_level=False)
        if pragma is None:
            return True
        before = self._under_last_line(original, [call for call in calls_in(original) if call in self._plans])
        now = list(zip(calls_in(updated), calls_in(laid_out), strict=True))
        after = self._under_last_line(laid_out, [call for reverted, call in now if reverted in self._reverted])
        for reverted, call in now:
            runtime_call = self._reverted.get(reverted)
            if runtime_call is None or (runtime_call in before) == (call in after):
                continue
            if runtime_call in before or not _writes_what_it_has(pragma, self._plans[runtime_call]):
                return False
        return True

    def _under_last_line(self, statement: cst.SimpleStatementLine, calls: list[cst.Call]) -> set[cst.Call]:
        """Those of `calls` (in `statement`) that start or end on the statement's last line."""
        if not calls:
            return set()
        lines = node_lines(self._module.with_changes(body=[statement], header=(), footer=()), {statement, *calls})
        last = lines[statement][1]
        return {call for call in calls if last in lines[call]}


def _writes_what_it_has(pragma: Pragma, plan: _Plan) -> bool:
    """Whether a rewrite of the call `plan` reverts, under `pragma`, writes the runtime
    arguments the call has now (those the revert drops)."""
    if pragma.skip or pragma.error is not None:
        return False
    has = {arg.keyword.value: _code(arg.value) for arg in plan.dropped if arg.keyword is not None}
    if pragma.unroll is not None and has.get("unroll") != str(pragma.unroll):
        return False
    if pragma.levels is None or "levels" not in plan.target.keyword_only:
        return True
    return has.get("levels") == _code(levels_value(pragma.levels))


def _as_statement(decorator: cst.Decorator) -> cst.SimpleStatementLine:
    """`decorator`'s expression as a statement of its lines, with its comment."""
    return cst.SimpleStatementLine([cst.Expr(decorator.decorator)], trailing_whitespace=decorator.trailing_whitespace)
