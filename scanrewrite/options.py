"""The rewrite's options, each defined once: the fields of `Options`.

A field says everything about one option: its type and default, how a value is checked
(its `Kind`), the command-line flags that set it (each flag's long name is also its
`[tool.scanrewrite]` key) and their help, and whether libcst's runner takes it. From this
one table come the command line's flags and configuration keys (`scanrewrite.cli`), libcst's
runner's arguments (`scanrewrite.codemod.ScanRewriteCommand`) and the check of every value
that reaches the transform (`Options` refuses an invalid one). An `Options` travels whole,
frozen, hashable and picklable, from the command line through the process pool to
`scanrewrite.codemod.rewrite` and `revert`, the notebook rewrite and the tuner's write-back.

Adding an option is adding a field here, and reading it where it changes what is written.

This module is pure data (and the checks): it imports neither click nor libcst nor jax.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scanrewrite.targets import (
    ALL_POLICIES,
    CHECKPOINT_POLICIES,
    DEFAULT_TARGETS,
    RUNTIME_POLICIES,
    TARGET_NAMES,
    select,
)

__all__ = ["OPTIONS", "Flag", "Kind", "Option", "Options", "merged", "option", "table"]


class Kind:
    """What values an option takes: `check` one given as a value (from Python, or from TOML),
    `parse` one given as text (on the command line). Both raise `ValueError` with a message
    that does not name the option (`Options` and the command line name it)."""

    #: What `--help` writes for the value, e.g. ``"N"``.
    metavar: str = "VALUE"

    def check(self, value: Any) -> Any:
        """`value`, normalised (e.g. a comma-separated string to a tuple of names)."""
        raise NotImplementedError

    def parse(self, text: str) -> Any:
        """The value that `text`, written on the command line, stands for."""
        return self.check(text)

    def show(self, value: Any) -> str:
        """`value` as the command line would take it, for `[default: ...]`."""
        return str(value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _names(value: object) -> tuple[str, ...] | None:
    """`value` as a tuple of strings, if it is a collection (or other iterable) of them."""
    if not isinstance(value, Iterable):
        return None
    names = tuple(value)
    return names if all(isinstance(name, str) for name in names) else None


def _int_text(text: str) -> int | str:
    return int(text) if text.isascii() and text.isdigit() else text


@dataclass(frozen=True)
class PositiveInt(Kind):
    """A positive int (or None, when `none` says None is a value)."""

    none: bool = False
    metavar: str = "N"

    def check(self, value: Any) -> int | None:
        if (value is None and self.none) or (_is_int(value) and value >= 1):
            return value
        raise ValueError(f"must be a positive integer{' or None' if self.none else ''}, got {value!r}")

    def parse(self, text: str) -> int | None:
        return self.check(_int_text(text))


@dataclass(frozen=True)
class Levels(Kind):
    """None (write none), a positive int, or ``"auto"``."""

    metavar: str = "N|auto"

    def check(self, value: Any) -> int | str | None:
        if value is None or value == "auto" or (_is_int(value) and value >= 1):
            return value
        raise ValueError(f"must be a positive integer or 'auto', got {value!r}")

    def parse(self, text: str) -> int | str | None:
        return self.check(_int_text(text))


@dataclass(frozen=True)
class Choice(Kind):
    """One of `names`; None too, where `none` says so."""

    names: tuple[str, ...]
    none: bool = False
    metavar: str = "NAME"

    def check(self, value: Any) -> str | None:
        if (value is None and self.none) or (isinstance(value, str) and value in self.names):
            return value
        close = difflib.get_close_matches(value, self.names, n=1) if isinstance(value, str) else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        if self.names[0] == "none":
            raise ValueError(f"must be 'none' or one of {', '.join(self.names[1:])}; got {value!r}{hint}")
        raise ValueError(f"must be one of {', '.join(self.names)}; got {value!r}{hint}")


@dataclass(frozen=True)
class Targets(Kind):
    """Names out of `scanrewrite.targets.TARGET_NAMES`: one comma-separated string or a
    collection of names; normalised to a tuple in the table's order."""

    metavar: str = "NAMES"

    def check(self, value: Any) -> tuple[str, ...]:
        names = value if isinstance(value, str) else _names(value)
        if names is None:
            raise ValueError(f"expected names separated by commas, got {value!r}")
        return tuple(target.name for target in select(names))

    def show(self, value: Any) -> str:
        return ",".join(value)


@dataclass(frozen=True)
class Names(Kind):
    """A collection of names, as a frozenset."""

    def check(self, value: Any) -> frozenset[str]:
        names = None if isinstance(value, str) else _names(value)
        if names is None:
            raise ValueError(f"must be a collection of names, got {value!r}")
        return frozenset(names)


@dataclass(frozen=True)
class Flag:
    """One command-line flag that sets an option; its long name is also its
    `[tool.scanrewrite]` key."""

    #: The long name without its dashes, e.g. ``"no-checkpoint"``.
    name: str
    #: The help that `--help` shows; None: the option's own.
    help: str | None = None
    #: A switch (a flag that takes no value) sets the option to this; None: the flag takes a value.
    constant: object = None
    #: The values the flag takes, where fewer than the option's (`--policy` takes no ``"none"``).
    kind: Kind | None = None
    #: What `--help` says of the default, where the command line does not use the option's
    #: own (`--line-length`: the project's formatter's).
    default_help: str | None = None

    @property
    def dest(self) -> str:
        """The flag's Python name, e.g. ``"no_checkpoint"``."""
        return self.name.replace("-", "_")


@dataclass(frozen=True)
class Option:
    """One option of the rewrite (a field of `Options`)."""

    #: The field's name, e.g. ``"unroll"``; libcst's runner takes it as ``--unroll``.
    name: str
    kind: Kind
    default: Any
    #: What the option does, one sentence or two.
    help: str
    #: The command-line flags that set it (none: the command line works it out itself).
    flags: tuple[Flag, ...]
    #: Whether libcst's runner takes it (`ScanRewriteCommand.add_args`).
    runner: bool
    #: Whether `revert` reads it too; the command line refuses the others' flags with `--revert`.
    reverts: bool

    def check(self, value: Any) -> Any:
        """`value`, normalised; a `ValueError` naming the option if it is not valid."""
        try:
            return self.kind.check(value)
        except ValueError as exc:
            message = str(exc)
            raise ValueError(f"`{self.name}`{' ' if message.startswith('must') else ': '}{message}") from None


def option(
    kind: Kind,
    default: Any,
    help: str,
    *,
    flags: tuple[Flag, ...] | None = None,
    runner: bool = True,
    reverts: bool = False,
) -> Any:
    """A field of an options dataclass (`Options`, the tuner's `TuneOptions`); `flags` None: one
    flag named as the field."""
    metadata = {"option": (kind, help, flags, runner, reverts)}
    return field(default=default, metadata=metadata)


_POLICIES = (
    f"jax's {', '.join(CHECKPOINT_POLICIES)}, written jax.checkpoint_policies.NAME, or the runtime's "
    f"{', '.join(RUNTIME_POLICIES)}, written scanrewrite.runtime.NAME"
)


@dataclass(frozen=True)
class Options:
    """What the rewrite writes, and how it lays it out.

    Every value is checked when an `Options` is made: an invalid one raises `ValueError`
    naming the option (``"`unroll` must be a positive integer, got 0"``). Make one with
    keyword arguments, or change one with `dataclasses.replace`.
    """

    #: Steps per chunk, written as `unroll=N` into every rewritten call.
    unroll: int = option(
        PositiveInt(),
        4,
        "Steps per chunk: the unroll=N written into every rewritten call.",
    )
    #: None leaves the runtime's default (checkpointed); ``"none"`` writes
    #: `checkpoint=False`; a policy name writes `jax.checkpoint_policies.NAME`, or
    #: `scanrewrite.runtime.NAME` for one of the runtime's own.
    checkpoint: str | None = option(
        Choice(("none", *ALL_POLICIES), none=True),
        None,
        f"Write checkpoint=False (none) or a checkpoint policy into every rewritten call that takes it: {_POLICIES}.",
        flags=(
            Flag(
                "policy",
                f"Write checkpoint=POLICY (not with --no-checkpoint): {_POLICIES}.",
                kind=Choice(ALL_POLICIES),
            ),
            Flag(
                "no-checkpoint",
                "Write checkpoint=False: chunks are not checkpointed.",
                constant="none",
            ),
        ),
    )
    #: None writes no `levels=`; a positive int or ``"auto"`` writes it into every
    #: rewritten call of a target that takes it (`jax.lax.scan`).
    levels: int | str | None = option(
        Levels(),
        None,
        'Write levels=N (or levels="auto") into every rewritten call: nested checkpointing (eqxi.scan calls get none).',
    )
    #: The names of the APIs whose calls are rewritten (`scanrewrite.targets`).
    targets: tuple[str, ...] = option(
        Targets(),
        DEFAULT_TARGETS,
        f"The APIs whose calls are rewritten, comma-separated, out of {', '.join(TARGET_NAMES)}. "
        "Add lax.fori_loop and lax.map for loops that are differentiated, nnx.scan and linen.scan for Flax's "
        "scans over layers.",
    )
    #: The formatters' line length: a call the transform makes longer or shorter is laid
    #: out as they would (see `scanrewrite.codemod.rewrite`); None keeps the layout it had.
    line_length: int | None = option(
        PositiveInt(none=True),
        88,
        "The formatters' line length: a rewritten call that no longer fits is split as ruff format and black split it.",
        flags=(
            Flag(
                "line-length",
                kind=PositiveInt(),
                default_help="ruff's or black's line-length in the project's configuration, else 88",
            ),
        ),
        reverts=True,
    )
    #: The project's own top-level packages and modules, which import sorters call
    #: first-party: the added import goes before them (see `scanrewrite.codemod.rewrite`).
    first_party: frozenset[str] = option(
        Names(),
        frozenset(),
        "The project's own top-level packages, which import sorters put after the added import.",
        flags=(),
        runner=False,
        reverts=True,
    )

    def __post_init__(self) -> None:
        for option in OPTIONS:
            object.__setattr__(self, option.name, option.check(getattr(self, option.name)))


def table(options: type) -> tuple[Option, ...]:
    """The options that the fields of `options`, a dataclass whose fields are each made by
    `option`, define: in the order of its fields."""
    rows = []
    for each in dataclasses.fields(options):
        kind, help, flags, runner, reverts = each.metadata["option"]
        flags = (Flag(each.name.replace("_", "-")),) if flags is None else flags
        rows.append(Option(each.name, kind, each.default, help, flags, runner, reverts))
    return tuple(rows)


#: The options, in the order of `Options`' fields: the table the command line, its
#: configuration and libcst's runner are made from.
OPTIONS: tuple[Option, ...] = table(Options)


def merged(options: Any, changes: Mapping[str, Any], kind: type = Options) -> Any:
    """`options`, a `kind` (else its defaults), with `changes` made: how the transforms take their
    options, `rewrite(source, options)`, `rewrite(source, unroll=8)`, or both (and the tuner its
    `TuneOptions`). Raises `TypeError` for a name that is no option of `kind` and `ValueError` for
    a value that is not valid (the tuner's `TuneError`)."""
    names = [each.name for each in dataclasses.fields(kind)]
    unknown = sorted(set(changes) - set(names))
    if unknown:
        raise TypeError(f"unknown option {unknown[0]!r}; the options are {', '.join(names)}")
    if options is None:
        return kind(**changes)
    return dataclasses.replace(options, **changes) if changes else options
