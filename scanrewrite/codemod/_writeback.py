"""The write-back: set ``unroll=`` (and ``checkpoint=``, ``levels=``, ``store=``) on the
runtime calls the rewrite made, at given lines.

The second transform beside the rewrite, for `scanrewrite-tune --diff/--write/--check`:

```python
set_settings(source: bytes, picks: Mapping[int, Settings], line_length=88) -> UnrollResult
set_unroll(source: bytes, picks: Mapping[int, int]) -> UnrollResult
read_unroll(source: bytes) -> dict[int, int | None]
```

`picks` maps a call site's line (1-based: the line of the call's first character, as
`Rewritten.line` reports it, and as the runtime names the site, since the rewrite writes
the callee on one line) to what to write there. Each `scanrewrite.runtime.scan` /
`scanrewrite.runtime.eqxi_scan` call starting on that line gets ``unroll=K``: its value
replaced where the call passes one (by keyword or, for `scan`, as the sixth positional
argument), else appended in the call's own layout. A `functools.partial` of a runtime function
(`partial(scanrewrite.runtime.scan, step, unroll=4)`, as the rewrite writes a bound scan) is
such a call, found on its own first line and, where no runtime call starts there, on the first
line of each call that applies it (`jax.jit(partial(...))(init, xs)`, or `run(init, xs)` after
`run = partial(...)`): the line the runtime names its site by. A `Settings`
(`scanrewrite.settings`, the type the runtime and the tuner use too) may also set `checkpoint`,
`levels` and `store`: written as ``checkpoint=False``, ``checkpoint=jax.checkpoint_policies.NAME``
(adding ``import jax`` where nothing binds `jax`) or a policy of the runtime's own named as the
call names the runtime (``checkpoint=scanrewrite.runtime.reductions_saveable``), ``levels=N`` and
``store=N``, and left out (an argument there removed) where they are the runtime's defaults
(`scanrewrite.settings.DEFAULTS`). A statement the
formatters would leave as it is keeps their layout (`scanrewrite.layout`): a call the change makes
too long, or short enough for one line again, is laid out as ruff format and black lay it out.
Every other byte stays. Pure: bytes in, result out; no file I/O, no jax.

A call is left alone and reported in `UnrollResult.skipped` (with its line and why) when a
pragma on it says so (`# scanrewrite: skip`, or `# scanrewrite: unroll=N`, which wins over
the tuner), when a setting to change is written as an expression rather than a value, when
`*args` or `**kwargs` may carry it, and a picked line with no runtime call starting on it is
reported too. A `skip-file` pragma leaves the whole file. A site is written whole or not at
all: a pick is only ever written as it was measured.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst

from scanrewrite.codemod._applied import runtime_partials
from scanrewrite.codemod._arguments import ArgShape, append_args, checkpoint_value, keyword_arg, remove_args
from scanrewrite.codemod._arguments import levels_value
from scanrewrite.codemod._discovery import Resolver, call_pragma, read_pragmas, take_survey
from scanrewrite.codemod.imports import ImportEdits, apply_scheduled_imports
from scanrewrite.layout import KeepLayout
from scanrewrite.codemod._parsing import Parsed, no_collection, node_lines, top_level_indices
from scanrewrite.codemod._rewrite import Skipped
from scanrewrite.codemod._scopes import module_scopes
from scanrewrite.options import Options
from scanrewrite.pragmas import Pragma, pragma_comments
from scanrewrite.settings import Settings
from scanrewrite.targets import ALL_POLICIES, CHECKPOINT_POLICIES, RUNTIME_POLICIES, TARGETS, Target

__all__ = ["NO_CALL", "RuntimeCalls", "UnrollResult", "read_unroll", "set_settings", "set_unroll"]

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
    return set_settings(source, {line: Settings(unroll) for line, unroll in picks.items()})


@no_collection
def set_settings(source: bytes, picks: Mapping[int, Settings], line_length: int = 88) -> UnrollResult:
    """Write each pick into the runtime calls starting on its line (see the module's
    docstring); `line_length` is the formatters'.

    A pick is a `scanrewrite.settings.Settings` whose `unroll` is a positive int; its other
    settings, None where the call keeps what it wrote: `checkpoint` True, False or a policy's
    name, `levels` an int >= 1 or `"auto"`, `store` an int >= 0. A setting at its default
    (`DEFAULTS`) is written as no argument.

    Raises `ValueError` for a line that is not a positive int or a setting that is not
    valid, and `SourceError` for source that cannot be decoded, parsed or reproduced byte
    for byte.
    """
    for line, settings in picks.items():
        if isinstance(line, bool) or not isinstance(line, int) or line < 1:
            raise ValueError(f"`line` must be a positive integer, got {line!r}")
        _check(settings)
    parsed = Parsed.from_bytes(source)
    sites = RuntimeCalls(parsed.module, parsed.code, parsed.tree) if b"scanrewrite" in source else None
    if sites is not None and b"partial" in source:
        runtime_partials(parsed.module, sites)
    if sites is None or sites.skip_file is not None:
        reason = "skip-file pragma" if sites is not None else NO_CALL
        skipped = tuple(Skipped(line, reason) for line in sorted(picks))
        return UnrollResult(source, (), (), skipped)

    edits: dict[cst.Call, Settings] = {}
    imports = ImportEdits()
    updated, unchanged, skipped = [], [], []
    for line in sorted(picks):
        calls = sites.at(line)
        if not calls:
            skipped.append(Skipped(line, NO_CALL))
        reasons, changes = [], {}
        for call, resolved in calls:
            outcome = _why_not(call, resolved, sites.pragma(call))
            if outcome is None:
                assert isinstance(resolved, Target)
                outcome = _new_args(call, resolved, picks[line], call in sites.partials)
                if outcome is not None and not isinstance(outcome, str):
                    outcome = _needs_jax(call, picks[line], sites, imports) or outcome
            if isinstance(outcome, str):
                reasons.append(outcome)
            elif outcome is not None:
                changes[call] = picks[line]
        skipped.extend(Skipped(line, reason) for reason in dict.fromkeys(reasons))
        if reasons:
            continue  # written whole or not at all
        edits.update(changes)
        if changes:
            updated.append(line)
        elif calls:
            unchanged.append(line)
    if not edits:
        return UnrollResult(source, (), tuple(unchanged), tuple(skipped))
    module = parsed.module.visit(_SetArgs(edits, sites.targets, sites.partials, parsed.module, line_length))
    first_use = min(top_level_indices(parsed.module, edits).values(), default=None)
    module = apply_scheduled_imports(module, imports, first_use)
    return UnrollResult(parsed.render(module), tuple(updated), tuple(unchanged), tuple(skipped))


@no_collection
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
    sites = RuntimeCalls(parsed.module, parsed.code, parsed.tree)
    if b"partial" in source:
        runtime_partials(parsed.module, sites)
    found: dict[int, int | None] = {}
    for line in sorted({*sites.by_line, *sites.applied}):
        for call, resolved in sites.at(line):
            if isinstance(resolved, Target):
                arg = _unroll_arg(call.with_changes(args=sites.args(call)), resolved)
                value = arg.value if arg is not None else None
                found[line] = value.evaluated_value if isinstance(value, cst.Integer) else None
                break
    return found


class RuntimeCalls:
    """The runtime calls of one module, by their first line, and the pragmas on them."""

    def __init__(self, module: cst.Module, code: str | None = None, tree: ast.Module | None = None) -> None:
        code = module.code if code is None else code
        self.scopes = scopes = module_scopes(module, code, tree)
        self.resolver = resolver = Resolver(self.scopes, _BY_REPLACEMENT)
        survey = take_survey(module, scopes, resolver.resolve)
        #: What holds a runtime call or reference (`Survey.holders`), and its top-level statement.
        self.holders, self.top_level = survey.holders, survey.top_level
        comments = pragma_comments(module, code)
        calls = [
            (node, _shadowed(node, resolver) or resolved)
            for node, resolved in survey.found
            if isinstance(node, cst.Call)
        ]
        self.lines = node_lines(module, {node for node, _ in (*comments, *calls)}, survey.top_level, scopes.starts)
        self.pragmas, self.skip_file = read_pragmas(comments, self.lines)
        self.by_line: dict[int, list[tuple[cst.Call, Target | str]]] = {}
        for call, resolved in calls:
            self.by_line.setdefault(self.lines[call][0], []).append((call, resolved))
        self.targets = {call: resolved for call, resolved in calls if isinstance(resolved, Target)}
        #: The `functools.partial` calls of runtime functions (`_applied.runtime_partials` adds
        #: them, to `by_line` too), and by the first line of each call that applies them.
        self.partials: set[cst.Call] = set()
        self.applied: dict[int, list[tuple[cst.Call, Target | str]]] = {}

    def pragma(self, call: cst.Call) -> Pragma:
        return call_pragma(self.pragmas, *self.lines[call])

    def at(self, line: int) -> list[tuple[cst.Call, Target | str]]:
        """The runtime calls starting on `line`; where none does, the partials that a call
        starting on it applies (the line the runtime names their site by)."""
        return self.by_line.get(line) or list(dict.fromkeys(self.applied.get(line, ())))

    def args(self, call: cst.Call) -> tuple[cst.Arg, ...]:
        """`call`'s arguments that its runtime function takes: a partial's, after the function."""
        return tuple(call.args[1:] if call in self.partials else call.args)


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


def _check(settings: Settings) -> None:
    """Raise a `ValueError` naming the first setting of `settings` that cannot be written."""
    if not isinstance(settings, Settings):
        raise ValueError(f"a pick is a `Settings`, got {settings!r}")
    checkpoint = settings.checkpoint
    if not (checkpoint is None or isinstance(checkpoint, bool) or checkpoint in ALL_POLICIES):
        raise ValueError(
            f"`checkpoint` must be True, False or a policy's name ({', '.join(ALL_POLICIES)}), got {checkpoint!r}"
        )
    store = settings.store
    if store is not None and (isinstance(store, bool) or not isinstance(store, int) or store < 0):
        raise ValueError(f"`store` must be a non-negative int, got {store!r}")
    # `unroll` and `levels` as the rewrite's options check them.
    Options(unroll=settings.unroll, levels=settings.levels)


def _needs_jax(call: cst.Call, settings: Settings, sites: RuntimeCalls, imports: ImportEdits) -> str | None:
    """Why a policy cannot be written into `call` (`jax` means something else there); else
    None, with ``import jax`` scheduled in `imports` where nothing binds `jax`."""
    if not isinstance(settings.checkpoint, str) or settings.checkpoint in RUNTIME_POLICIES:
        return None
    if not sites.resolver.module_name_usable(call, "jax"):
        return "checkpoint policy needs `jax`, which is bound to something else here"
    if not sites.scopes[call]["jax"]:
        imports.add("jax")
    return None


def _new_args(
    call: cst.Call, target: Target, settings: Settings, partial: bool = False, module: str | None = None
) -> tuple[cst.Arg, ...] | str | None:
    """`call`'s arguments with `settings` written; None if they already say so; why not, if
    they cannot. A `partial` (`functools.partial(scanrewrite.runtime.scan, f, ...)`) passes
    the runtime function's arguments after the function itself. `module`: how the call names
    the runtime (``scanrewrite.runtime``, or its alias), where a policy of its own is written."""
    callee = call.args[0].value if partial and call.args else call.func
    module = module or (cst.Module([]).code_for_node(callee.value) if isinstance(callee, cst.Attribute) else None)
    if partial:
        first, *rest = call.args
        new = _new_args(call.with_changes(args=rest), target, settings, module=module)
        if new is None or isinstance(new, str):
            return new
        if not rest:  # `partial(scanrewrite.runtime.scan)`: the first argument needs a comma now
            first = first.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return (first, *new)
    if any(isinstance(arg.value, cst.GeneratorExp) and not arg.value.lpar for arg in call.args):
        return "a bare generator argument cannot be followed by more arguments"
    shape = ArgShape.of(call.args, target)
    args = list(call.args)
    new: list[cst.Arg] = []
    drop: set[str] = set()
    wanted = [("unroll", cst.Integer(str(settings.unroll)))]
    if settings.checkpoint in RUNTIME_POLICIES and module is None:
        policy = f"scanrewrite.runtime.{settings.checkpoint}"
        return f"the call names the runtime by a bare name: write checkpoint={policy} by hand"
    # A setting at its default is written as no argument (its value None).
    if settings.checkpoint is not None:
        mode = "none" if settings.checkpoint is False else settings.checkpoint
        value = None if settings.at_default("checkpoint") else checkpoint_value(mode, module)
        wanted.append(("checkpoint", value))
    if settings.levels is not None:
        wanted.append(("levels", None if settings.at_default("levels") else levels_value(settings.levels)))
    if settings.store is not None:
        wanted.append(("store", None if settings.at_default("store") else cst.Integer(str(settings.store))))
    for name, value in wanted:
        if name != "unroll" and name not in target.keyword_only:
            return f"{target.qualified_name} takes no {name}"
        arg = _unroll_arg(call, target) if name == "unroll" else _keyword(call, name)
        if arg is not None:
            if not _is_value(arg.value, module):
                code = cst.Module([]).code_for_node(arg.value)
                what = "number" if name == "unroll" else "value"
                return f"{name} is written as an expression (`{code}`), not a {what}: set it by hand"
            if value is None:
                drop.add(name)
            elif not arg.value.deep_equals(value):
                args[args.index(arg)] = arg.with_changes(value=value)
            continue
        if value is None:
            continue
        if shape.star_may_reach(name):
            return f"{name} may come from *args"
        if shape.double_star:
            # The runtime takes every option from **kwargs too: adding one could pass it twice.
            return f"{name} may come from **kwargs"
        new.append(keyword_arg(name, value))
    if args == list(call.args) and not new and not drop:
        return None
    edited = call.with_changes(args=args)
    edited = edited.with_changes(args=remove_args(edited, drop))
    return append_args(edited, new)


def _keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == name), None)


def _is_value(node: cst.BaseExpression, module: str | None = None) -> bool:
    """Whether `node` is written as a value the tuner writes (and may replace): an int or
    ``"auto"`` literal, `True` or `False`, ``jax.checkpoint_policies.NAME``, or a policy of the
    runtime's own as an attribute of `module` (the call's name for the runtime)."""
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value == "auto"
    if isinstance(node, cst.Name):
        return node.value in ("True", "False")
    code = cst.Module([]).code_for_node(node)
    if module is not None and code.startswith(f"{module}.") and code[len(module) + 1 :] in RUNTIME_POLICIES:
        return True
    return code.startswith("jax.checkpoint_policies.") and code.rpartition(".")[2] in CHECKPOINT_POLICIES


class _SetArgs(KeepLayout):
    """Writes the settings into each call to edit (nested calls included), laid out."""

    def __init__(
        self,
        edits: dict[cst.Call, Settings],
        targets: dict[cst.Call, Target],
        partials: set[cst.Call],
        module: cst.Module,
        line_length: int,
    ) -> None:
        super().__init__(module, line_length)
        self._settings = edits
        self._targets = targets
        self._partials = partials

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        settings = self._settings.get(original_node)
        if settings is None:
            return updated_node
        args = _new_args(updated_node, self._targets[original_node], settings, original_node in self._partials)
        assert isinstance(args, tuple), args
        self.edited()
        return updated_node.with_changes(args=args)
