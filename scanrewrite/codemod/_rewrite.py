"""The rewrite: every recognised scan call becomes a call to the runtime.

`rewrite` is the pure function the command line uses (bytes in, `RewriteResult` out);
`Rewriter` is the transform of one parsed module, which `rewrite` and the libcst
command (`_command.py`) both drive.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, Scope

from scanrewrite.codemod._arguments import ArgShape, append_args, checkpoint_value, keyword_arg, levels_value
from scanrewrite.codemod._applied import find_flax, relayout_decorator, replace_applied
from scanrewrite.codemod._checkpoints import PerStep, may_wrap, per_step_note, read_bodies
from scanrewrite.codemod._discovery import Resolver, call_pragma, may_rewrite, read_pragmas, take_survey
from scanrewrite.codemod.imports import ImportEdits, apply_scheduled_imports, policy_uses, schedule_import_removal
from scanrewrite.codemod.imports import unused_after_edit
from scanrewrite.layout import KeepLayout
from scanrewrite.codemod._parsing import Parsed, no_collection, node_lines
from scanrewrite.codemod._scopes import Scopes, module_scopes
from scanrewrite.options import Options, merged
from scanrewrite.pragmas import Pragma, pragma_comments
from scanrewrite.targets import CHECKPOINT_POLICIES, Target, select

__all__ = ["RewriteResult", "Rewriter", "Rewritten", "SkipFile", "Skipped", "rewrite"]

#: Why an outer scan over a checkpointed inner scan, and that inner scan, are left alone.
CHUNKED = "already a checkpointed, chunked scan"


class SkipFile(Exception):
    """A skip-file pragma: the file is left as it is (`ScanRewriteCommand` raises libcst's
    `SkipFile` for it)."""


@dataclass(frozen=True)
class Rewritten:
    """A call that was rewritten."""

    #: 1-based line of the call's first character.
    line: int
    #: The qualified name of the API that was called, e.g. ``"jax.lax.scan"``.
    api: str
    #: What was asked for and not written, or what became of a per-step checkpoint, e.g.
    #: ``"levels not written: equinox.internal.scan takes none"``.
    note: str | None = None
    #: The per-step checkpoint around the scanned function that the runtime takes over
    #: (it checkpoints chunks instead), e.g. ``"jax.checkpoint"``.
    absorbed: str | None = None


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


@no_collection
def rewrite(source: bytes, options: Options | None = None, /, **changes: Any) -> RewriteResult:
    """Rewrite every call in `source` of an API that `options.targets` selects.

    `options` is a `scanrewrite.options.Options` (by default, the defaults); keyword
    arguments change its fields: `rewrite(source, unroll=8)`, `rewrite(source, options,
    line_length=100)`. Of them, `unroll` (a positive int) is appended to each rewritten
    call that does not pass one. `checkpoint` is None (leave the runtime's default),
    ``"none"`` (write ``checkpoint=False``), a name in `CHECKPOINT_POLICIES` (write
    ``checkpoint=jax.checkpoint_policies.NAME``) or in `RUNTIME_POLICIES` (write
    ``checkpoint=scanrewrite.runtime.NAME``, which needs no `jax`). `levels` is None (write
    none) or a positive int or ``"auto"``, written as ``levels=`` into each rewritten call of a
    target that takes it (`jax.lax.scan`; an `equinox.internal.scan` call gets none and
    its `Rewritten.note` says so). `targets` are names in `scanrewrite.targets.TARGET_NAMES`
    (or one comma-separated string of them): the APIs whose calls are rewritten, by default
    `lax.scan` and `eqxi.scan`; the others are left as they are, as if unknown. Any other
    option value raises `ValueError`, and a name that is no option `TypeError`.
    `first_party` are the top-level names of the user's own packages, which import
    sorters put after third-party ones such as the runtime: the added import goes where
    they would put it. `line_length` is the formatters' (ruff format, black): a statement
    they leave as it is keeps their layout once its call is rewritten (see `scanrewrite.layout`);
    None keeps the layout the call had. Source that cannot be decoded, parsed or
    reproduced byte for byte raises `SourceError`. Everything that is not rewritten
    comes back byte for byte.
    """
    options = merged(options, changes)
    parsed = Parsed.from_bytes(source)
    if not may_rewrite(source, options.targets):
        return RewriteResult(source, (), ())
    rewriter = Rewriter(options, ImportEdits())
    try:
        # The tree was just parsed, so no node occurs twice in it: the wrapper need
        # not copy it (a deep copy of a large module costs as much as parsing it).
        module = rewriter.transform(MetadataWrapper(parsed.module, unsafe_skip_copy=True), parsed.code, parsed.tree)
    except SkipFile:
        return RewriteResult(source, (), tuple(rewriter.skipped))
    code = parsed.render(module) if rewriter.rewritten else source
    return RewriteResult(code, tuple(rewriter.rewritten), tuple(rewriter.skipped))


class Rewriter:
    """The transform of one module, as plain libcst passes that `rewrite` and
    `ScanRewriteCommand` both drive: scopes only of the statements that can matter
    (`module_scopes`), qualified names only for names that may be a target, lines only for
    what is reported, and the edit only in the statements that hold a call (`Survey.holders`)."""

    def __init__(self, options: Options, edits: ImportEdits, warn: Callable[[str], None] | None = None) -> None:
        self.options = options
        #: What was rewritten and skipped, in file order once `transform` returns.
        self.rewritten: list[Rewritten] = []
        self.skipped: list[Skipped] = []
        #: The rewrite looks for the original APIs that are selected.
        self._by_qualified_name = {target.qualified_name: target for target in select(options.targets)}
        self._edits = edits
        self._warn = warn
        self._scopes: Scopes | Mapping[cst.CSTNode, Scope | None] = {}
        self._resolver: Resolver | None = None
        self._lines: dict[cst.CSTNode, tuple[int, int]] = {}
        self._pragmas: dict[int, Pragma] = {}
        self._call_lines: set[int] = set()
        self._per_step: dict[cst.Call, PerStep] = {}
        self._chunked: set[cst.CSTNode] = set()
        #: The per-step Flax remat of a Flax scan (its call, or the call an applied scan stands for).
        self._flax_remat: dict[cst.Call, str] = {}

    def transform(self, wrapper: MetadataWrapper, code: str | None = None, tree: ast.Module | None = None) -> cst.Module:
        """`wrapper.module` (whose `code` and `python_tree` the caller may pass) rewritten, with the
        scheduled import edits (`apply_scheduled_imports`). Raises `SkipFile` for a skip-file pragma."""
        module = wrapper.module
        code = module.code if code is None else code
        self._scopes = scopes = module_scopes(module, code, tree)
        self._resolver = resolver = Resolver(self._scopes, self._by_qualified_name)
        comments = pragma_comments(module, code) if "scanrewrite" in code else []
        wraps = may_wrap(code)
        survey = take_survey(module, scopes, resolver.resolve, index=wraps)
        self._lines = node_lines(module, {node for node, _ in (*comments, *survey.found)}, survey.top_level, scopes.starts)
        self._pragmas, skip_file = read_pragmas(comments, self._lines)
        if skip_file is not None:
            self._skip(skip_file, "skip-file pragma")
            raise SkipFile(f"line {skip_file}: scanrewrite: skip-file pragma")

        for node, _ in survey.found:
            start, end = self._lines[node]
            self._call_lines.update((start, end) if isinstance(node, cst.Call) else (start,))
        if wraps:
            self._per_step, self._chunked = read_bodies(scopes.analysed, scopes, resolver, survey.found, survey.index)
        calls: dict[cst.CSTNode, tuple[Target, list[cst.Arg]]] = {}
        applied, remats = find_flax(scopes.analysed, scopes, survey.found) if "flax" in code or "partial" in code else ({}, {})
        self._flax_remat.update(remats)
        for node, resolved in survey.found:
            if isinstance(node, cst.Call):
                planned = self._plan(node, resolved)
                if planned is not None:
                    calls[node] = planned
            elif node in applied and node not in self._chunked:
                # A decorator or a functools.partial of the scan: planned as the call it stands for.
                use = applied[node]
                self._lines[use.as_call] = self._lines[node]
                # The resolver's scopes, which `_new_args` reads at the call.
                self._resolver.scopes = self._scopes = self._scopes.with_scope(use.as_call, self._scopes[node])
                planned = self._plan(use.as_call, resolved)
                if planned is not None:
                    calls[use.site] = planned
            else:
                self._check_reference(node, resolved)
        for line, pragma in self._pragmas.items():
            if pragma.error is not None and line not in self._call_lines:
                self._skip(line, f"{pragma.error} (ignored)")
        self.rewritten.sort(key=lambda rewritten: rewritten.line)
        self.skipped.sort(key=lambda skipped: skipped.line)
        if not calls:
            return module
        applied_sites = {use.site: use for use in applied.values()}
        callees = [applied_sites[node].reference if node in applied_sites else node.func for node in calls]
        dropped = schedule_import_removal(self._edits, module, self._scopes, callees)
        uses = policy_uses(self._scopes, {call: plan for call, (_, plan) in calls.items()})
        unused = unused_after_edit(self._edits, module, self._scopes, callees, uses, code)
        replacer = _ReplaceCalls(calls, module, self.options.line_length, code, set(applied_sites), survey.holders)
        module = module.visit(replacer)
        first_party = self.options.first_party
        return apply_scheduled_imports(module, self._edits, replacer.first_use, dropped, first_party, unused)

    def _check_reference(self, node: cst.Name | cst.Attribute, target: Target) -> None:
        line = self._lines[node][0]
        pragma = self._pragmas.get(line, Pragma())
        if pragma.error is not None:
            self._skip(line, pragma.error)
        elif pragma.skip:
            self._skip(line, "skip pragma")
        elif node in self._chunked:
            self._skip(line, CHUNKED)
        else:
            self._skip(line, f"reference to {target.qualified_name} that is not a call")

    def _plan(self, call: cst.Call, resolved: Target | str) -> tuple[Target, list[cst.Arg]] | None:
        """The target and the arguments to append when `call` is rewritten, else None
        (and the reason is reported)."""
        line, end_line = self._lines[call]
        pragma = call_pragma(self._pragmas, line, end_line)
        if isinstance(resolved, str):
            self._skip(line, resolved)
            return None
        plan = self._new_args(call, resolved, pragma)
        if isinstance(plan, str):
            self._skip(line, plan)
            return None
        self._edits.add(resolved.replacement.rpartition(".")[0])
        writes_policy = self.options.checkpoint in CHECKPOINT_POLICIES and any(
            arg.keyword is not None and arg.keyword.value == "checkpoint" for arg in plan
        )
        if writes_policy and not self._scopes[call]["jax"]:
            self._edits.add("jax")
        levels = pragma.levels if pragma.levels is not None else self.options.levels
        # A user's own unroll (haliax's `unroll=unroll`) wins over --unroll: -v says so.
        notes = [] if any(arg.keyword and arg.keyword.value == "unroll" for arg in plan) else ["unroll kept as written"]
        if levels is not None and "levels" not in resolved.keyword_only:
            notes.append(f"levels not written: {resolved.qualified_name} takes none")
            if self._warn is not None:
                self._warn(f"line {line}: {notes[-1]}")
        per_step = self._per_step.get(call)
        absorbed = None
        if per_step is not None:
            note, absorbed = per_step_note(per_step, call, resolved, self.options.checkpoint)
            notes.extend([note] if note else [])
        elif call in self._flax_remat:
            note, absorbed = per_step_note(PerStep(self._flax_remat[call]), call, resolved, self.options.checkpoint)
            notes.extend([note] if note else [])
        self.rewritten.append(Rewritten(line, resolved.qualified_name, "; ".join(notes) or None, absorbed))
        return resolved, plan

    def _new_args(self, call: cst.Call, target: Target, pragma: Pragma) -> list[cst.Arg] | str:
        """The arguments to append to `call`, or the reason to leave it alone."""
        assert self._resolver is not None
        if pragma.error is not None:
            return pragma.error
        if pragma.skip:
            return "skip pragma"
        if call in self._chunked:
            return CHUNKED
        per_step = self._per_step.get(call)
        if per_step is not None and per_step.problem is not None:
            return per_step.problem
        if not self._resolver.module_name_usable(call, "scanrewrite"):
            return "the name `scanrewrite` is bound to something else here"
        if any(isinstance(arg.value, cst.GeneratorExp) and not arg.value.lpar for arg in call.args):
            return "a bare generator argument cannot be followed by unroll"
        shape = ArgShape.of(call.args, target)
        new_args: list[cst.Arg] = []
        if not shape.passes("unroll"):
            if shape.star_may_reach("unroll"):
                return "unroll may come from *args"
            if shape.double_star and "unroll" not in target.added:
                return "unroll may come from **kwargs"
            new_args.append(keyword_arg("unroll", cst.Integer(str(pragma.unroll or self.options.unroll))))
        checkpoint = self.options.checkpoint
        if checkpoint is not None and "checkpoint" in target.keyword_only and not shape.passes("checkpoint"):
            if checkpoint in CHECKPOINT_POLICIES and not self._resolver.module_name_usable(call, "jax"):
                return "checkpoint policy needs `jax`, which is bound to something else here"
            runtime = target.replacement.rpartition(".")[0]
            new_args.append(keyword_arg("checkpoint", checkpoint_value(checkpoint, runtime)))
        levels = pragma.levels if pragma.levels is not None else self.options.levels
        if levels is not None and "levels" in target.keyword_only and not shape.passes("levels"):
            new_args.append(keyword_arg("levels", levels_value(levels)))
        return new_args

    def _skip(self, line: int, reason: str) -> None:
        self.skipped.append(Skipped(line, reason))
        if self._warn is not None:
            self._warn(f"line {line}: {reason}")


class _ReplaceCalls(KeepLayout):
    """Gives each planned call its replacement callee and appends its new arguments; a statement
    with a replaced call keeps the formatters' layout (`KeepLayout`); only `holders` are visited."""

    def __init__(
        self,
        calls: dict[cst.CSTNode, tuple[Target, list[cst.Arg]]],
        module: cst.Module,
        line_length: int | None,
        code: str,
        applied: set[cst.CSTNode] = frozenset(),
        holders: Collection[cst.CSTNode] | None = None,
    ) -> None:
        super().__init__(module, line_length, code)
        self._calls, self._holders = calls, holders
        #: The decorators and `functools.partial` calls that apply a scan (see `_applied`).
        self._applied = applied
        self._top_level: dict[cst.CSTNode, int] = {}
        self._current: int | None = None
        #: The index in the module's body of the first statement with a replaced call (the import goes above).
        self.first_use: int | None = None

    def visit_Module(self, node: cst.Module) -> None:
        self._top_level = {statement: index for index, statement in enumerate(node.body)}

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node in self._top_level:
            self._current = self._top_level[node]
        # The imports stay the same objects, which the import remover was told about.
        descend = super().on_visit(node) and not isinstance(node, (cst.Import, cst.ImportFrom))
        return descend and (self._holders is None or node in self._holders)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        self._edit_count_before.append(self._edit_count)

    def leave_Decorator(self, original_node: cst.Decorator, updated_node: cst.Decorator) -> cst.Decorator:
        # A decorator is no simple statement, which is what `KeepLayout` lays out again.
        planned = self._calls.get(original_node)
        if planned is not None:
            self._used()
            updated_node = replace_applied(original_node, updated_node, planned)
        if self._edit_count_before.pop() == self._edit_count or self._line_length is None:
            return updated_node
        indent = "".join(self._indents)
        return relayout_decorator(original_node, updated_node, indent, self._line_length, self._module)

    def _used(self) -> None:
        self.edited()
        if self.first_use is None:
            self.first_use = self._current

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        planned = self._calls.get(original_node)
        if planned is None:
            return updated_node
        self._used()
        if original_node in self._applied:
            return replace_applied(original_node, updated_node, planned)
        target, plan = planned
        func = cst.parse_expression(target.replacement).with_changes(
            lpar=updated_node.func.lpar, rpar=updated_node.func.rpar
        )
        return updated_node.with_changes(func=func, args=append_args(updated_node, plan))
