"""The tuner's options, each defined once: the fields of `TuneOptions`.

As `scanrewrite.options` does for the rewrite, a field says everything about one option: its
type and default, the `Kind` that checks a value (and parses one written on the command line),
its help and its flag. From this one table come `scanrewrite-tune`'s flags (`_command`), the
keyword arguments `tune()` takes (`merged`), and the options table of `docs/tuning.md`
(`markdown_table`, which `tests/test_tune_options.py` compares with the page). A `TuneOptions`
travels whole through the tuner's stages.

Pure data and checks: it imports no jax, so that `scanrewrite-tune --help` needs none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scanrewrite.options import Flag, Kind, Option, option, table
from scanrewrite.options import merged as merged_options
from scanrewrite.targets import ALL_POLICIES, RUNTIME_POLICIES
from scanrewrite.tune._budget import Budget
from scanrewrite.tune._candidates import DEFAULT_KS, DEFAULT_LEVELS
from scanrewrite.tune._errors import TuneError

__all__ = ["TUNE_OPTIONS", "TuneOptions", "from_flags", "markdown_table", "merged"]


def parse_stores(text: str | Sequence[int]) -> tuple[int, ...] | None:
    """The stored steps to try under a budget: positive ints, comma-separated in a string;
    `"auto"` (None: `default_stores` of each site's length) or `""` (none)."""
    if isinstance(text, str):
        if text.strip() == "auto":
            return None
        values: list = [part.strip() for part in text.split(",") if part.strip()]
        values = [int(v) if v.isdigit() else v for v in values]
    else:
        values = list(text)
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TuneError(f"stored steps are positive ints or 'auto', got {value!r}")
    return tuple(dict.fromkeys(values))


def parse_ks(values: Sequence[int]) -> tuple[int, ...]:
    """`values` checked as chunk sizes (positive ints)."""
    for k in values:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise TuneError(f"chunk sizes are positive ints, got {k!r}")
    if not values:
        raise TuneError("no chunk sizes to try")
    return tuple(dict.fromkeys(values))


def parse_levels(text: str | Sequence[int | str]) -> tuple[int | str, ...]:
    """The levels to try: positive ints or `auto`; comma-separated in a string."""
    values = [part.strip() for part in text.split(",") if part.strip()] if isinstance(text, str) else list(text)
    found: list[int | str] = []
    for value in values:
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if value != "auto" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise TuneError(f"levels are positive ints or 'auto', got {value!r}")
        found.append(value)
    return tuple(dict.fromkeys(found))


#: The checkpoint modes of `--policies` that name no policy, as `Settings.checkpoint` holds them.
MODES = {"none": False, "checkpoint": True}


def parse_policies(text: str | Sequence[bool | str]) -> tuple[bool | str, ...]:
    """Checkpoint modes to try besides the written one, as `Settings.checkpoint` holds them:
    `none` is `False` (no checkpoint), `checkpoint` is `True`, and names of
    `jax.checkpoint_policies` or of the runtime's own policies (`RUNTIME_POLICIES`) stay names;
    comma-separated in a string."""
    names = [name.strip() for name in text.split(",") if name.strip()] if isinstance(text, str) else list(text)
    known = (*MODES, *ALL_POLICIES)
    for name in names:
        if not isinstance(name, bool) and name not in known:
            raise TuneError(f"unknown checkpoint mode {name!r}; choose from {', '.join(known)}")
    return tuple(dict.fromkeys(MODES.get(name, name) if isinstance(name, str) else name for name in names))


def _checked(parse: Any) -> Any:
    """`parse`, its `TuneError` a `ValueError` (the one error of a `Kind`)."""

    def check(value: Any) -> Any:
        try:
            return parse(value)
        except TuneError as exc:
            raise ValueError(str(exc)) from None

    return check


@dataclass(frozen=True)
class _Parsed(Kind):
    """A value the tuner's own parser reads, text or not (`ks`, `levels`, `--policies`,
    `stores`, `memory_budget`); `show` writes a default back as the command line takes it."""

    parse_value: Any
    metavar: str = "VALUE"
    #: How the default shows on the command line (`[default: ...]`).
    shown: Any = str

    def check(self, value: Any) -> Any:
        return _checked(self.parse_value)(value)

    def show(self, value: Any) -> str:
        return self.shown(value)


def _ks(value: Any) -> tuple[int, ...]:
    if isinstance(value, str):
        parts = [part.strip() for part in value.split(",") if part.strip()]
        if not all(part.isdigit() for part in parts):
            raise TuneError(f"chunk sizes are comma-separated positive ints, got {value!r}")
        value = [int(part) for part in parts]
    return parse_ks(list(value))


def _listed(values: Any) -> str:
    return ",".join(map(str, values))


def _modes(values: Any) -> str:
    """Checkpoint modes as `--policies` takes them (`False` is `none`, `True` `checkpoint`)."""
    return ",".join({False: "none", True: "checkpoint"}.get(mode, mode) for mode in values)


@dataclass(frozen=True)
class _Count(Kind):
    """An int of at least `least` (`repeats` and `compile_threads` 1, `warmup` 0)."""

    least: int = 1
    metavar: str = "N"

    def check(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < self.least:
            kind = "a positive int" if self.least == 1 else "a non-negative int"
            raise ValueError(f"must be {kind}, got {value!r}")
        return value

    def parse(self, text: str) -> int:
        return self.check(int(text) if text.strip().isdigit() else text)


@dataclass(frozen=True)
class _Tolerance(Kind):
    """A non-negative number, or None (each dtype's default)."""

    metavar: str = "X"

    def check(self, value: Any) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(f"must be a non-negative number, got {value!r}")
        return float(value)

    def parse(self, text: str) -> float | None:
        try:
            return self.check(float(text))
        except ValueError:
            raise ValueError(f"must be a non-negative number, got {text!r}") from None


@dataclass(frozen=True)
class _Switch(Kind):
    """True or False."""

    def check(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"must be True or False, got {value!r}")
        return value


def _stores(value: Any) -> tuple[int, ...] | None:
    return None if value is None else parse_stores(value)


def _budget(value: Any) -> Budget | None:
    return value if isinstance(value, (Budget, type(None))) else Budget.parse(value)


_MODES = f"none (checkpoint=False), checkpoint, jax.checkpoint_policies names, or the runtime's own ({', '.join(RUNTIME_POLICIES)})"


@dataclass(frozen=True)
class TuneOptions:
    """What the tuner tries, how long it measures, and how closely it checks.

    Every value is checked (and normalised: text to a tuple, `"auto"` to None) when a
    `TuneOptions` is made: an invalid one raises `TuneError` naming the option. Make one with
    keyword arguments, or change one with `dataclasses.replace`.
    """

    #: The chunk sizes tried at every site (the written `unroll` is always tried too).
    ks: tuple[int, ...] = option(
        _Parsed(_ks, "1,2,...", _listed),
        DEFAULT_KS,
        "Chunk sizes to try at each site, comma-separated (the written unroll is tried too).",
    )
    #: Checkpoint modes tried besides the written one, with every k, at every site but
    #: `eqxi_scan` ones (which have none): `False` (`none`), `True` (`checkpoint`) or a policy's
    #: name, as `Settings.checkpoint` holds them.
    checkpoints: tuple[bool | str, ...] = option(
        _Parsed(parse_policies, "MODES", _modes),
        (),
        f"Checkpoint modes to try too, comma-separated: {_MODES}.",
        flags=(Flag("policies"),),
    )
    #: The `levels` tried besides the written one, with every k and checkpoint mode, at sites
    #: of at least 64 steps but `eqxi_scan` ones; `()` tries none.
    levels: tuple[int | str, ...] = option(
        _Parsed(parse_levels, "N,...", _listed),
        DEFAULT_LEVELS,
        "levels= to try too at sites of at least 64 steps (not eqxi.scan ones), comma-separated ('1' tries no other).",
    )
    #: Never try (nor pick) the original scan: every site keeps its rewrite.
    keep_rewrites: bool = option(
        _Switch(),
        False,
        "Never pick the original scan at a site (by default a site where it is as fast, within the budget, is "
        "reverted to it).",
        flags=(Flag("keep-rewrites", constant=True),),
    )
    #: Timed calls of each configuration, interleaved across those measured together.
    repeats: int = option(_Count(), 10, "Timed calls of each configuration, interleaved, after the warm-up.")
    #: Untimed calls of each configuration before timing.
    warmup: int = option(_Count(least=0), 1, "Untimed calls of each configuration before timing.")
    #: A limit on the compiled memory of the whole function (see `Budget`); None: none.
    memory_budget: Budget | None = option(
        _Parsed(_budget, "BUDGET"),
        None,
        "Limit on compiled memory (XLA's peak on an accelerator, its temp size on the CPU): bytes ('12GiB', '500MB'), a fraction of the original program's ('0.5x', '50%') or of "
        "the device's memory ('0.8'). Then scan sites (and Flax's) also try reductions_saveable at each k, stored "
        "steps, the runtime's dots-and-reductions policies (and --policies) on every step, and the for-loop's "
        "program, compiling only those predicted to fit and win.",
    )
    #: The stored steps tried under a budget, with every k: None (`"auto"`) for 1 and a
    #: quarter, half and three quarters of each site's steps; `()` for none, nor the for-loop's
    #: program: nothing that spends memory.
    stores: tuple[int, ...] | None = option(
        _Parsed(_stores, "N,..."),
        None,
        "With --memory-budget: stored steps to try with each k, comma-separated, or 'auto' (1 and a quarter, half "
        "and three quarters of each site's steps); '' tries none, nor the for-loop's program.",
        flags=(Flag("stores", default_help="auto"),),
    )
    #: Programs XLA compiles at a time (each traced alone): more cut the wall time where
    #: compiling dominates, and make each compile time one among several.
    compile_threads: int = option(
        _Count(),
        1,
        "Programs XLA compiles at a time: more cut the tuner's wall time where compiling dominates (straight-line "
        "programs on an accelerator), and make each compile time one among several.",
    )
    #: The relative tolerance within which every float leaf counts as the original's; None:
    #: each dtype's, raised to what rounding moves a leaf by where `fn` computes in a float
    #: narrower than 32 bits (`scanrewrite.tune._rounding`).
    rtol: float | None = option(
        _Tolerance(),
        None,
        "Relative tolerance of the check that each configuration computes the original's numbers.",
        flags=(Flag("rtol", default_help="by dtype, 1e-4 for float32, 1e-9 for float64; in bfloat16 programs "
                    "what rounding moves each output by"),),
    )
    #: The absolute tolerance of that check; None: the dtype's smallest normal number.
    atol: float | None = option(
        _Tolerance(),
        None,
        "Absolute tolerance of that check.",
        flags=(Flag("atol", default_help="the dtype's smallest normal number"),),
    )

    def __post_init__(self) -> None:
        for each in TUNE_OPTIONS:
            try:
                object.__setattr__(self, each.name, each.check(getattr(self, each.name)))
            except ValueError as exc:
                raise TuneError(str(exc)) from None


#: The tuner's options, in the order of `TuneOptions`' fields.
TUNE_OPTIONS: tuple[Option, ...] = table(TuneOptions)


def merged(options: TuneOptions | None, changes: Mapping[str, Any]) -> TuneOptions:
    """`options` (else the defaults) with `changes` made: how `tune` takes its options,
    `tune(fn, args, kwargs, options)`, `tune(fn, args, ks=(1, 2))`, or both. Raises `TypeError`
    for a name that is no option and `TuneError` for a value that is not valid."""
    return merged_options(options, changes, TuneOptions)


def from_flags(values: Mapping[str, Any]) -> TuneOptions:
    """The options that `scanrewrite-tune`'s flags set, click's values by each flag's Python
    name: a flag not given (None, or a switch left off) leaves its option's default."""
    given = {}
    for each in TUNE_OPTIONS:
        for flag in each.flags:
            value = values.get(flag.dest)
            if value is not None and value is not False:
                given[each.name] = value if flag.constant is None else flag.constant
    return TuneOptions(**given)


def markdown_table() -> str:
    """The options table of `docs/tuning.md`: a row per flag, its help and default."""
    rows = ["| option | what it sets | default |", "| --- | --- | --- |"]
    for each in TUNE_OPTIONS:
        for flag in each.flags:
            kind = flag.kind or each.kind
            spelled = f"`--{flag.name}`" if flag.constant is not None else f"`--{flag.name} {kind.metavar}`"
            if flag.constant is not None:
                default = "off"
            elif flag.default_help is not None:
                default = flag.default_help
            else:
                default = (kind.show(each.default) if each.default is not None else "") or "none"
            rows.append(f"| {spelled} | {flag.help or each.help} | {default} |")
    return "\n".join(rows)

