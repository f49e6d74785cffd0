"""What the tuner tries and how it chooses: candidates, the memory budget, noise, the pick.

Plain data and arithmetic, no jax: the choice can be tested (and reproduced from a report's
numbers) without compiling anything.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from scanrewrite.settings import NAMES, ORIGINAL, Settings
from scanrewrite.targets import ALL_POLICIES

#: The chunk sizes tried by default.
DEFAULT_KS: tuple[int, ...] = (1, 2, 3, 4, 6, 8)


class TuneError(Exception):
    """Bad input to the tuner: one line, naming the file and line where there is one."""


#: `levels` is tried at sites of at least this many steps (below it, nesting saves little).
LEVELS_MIN_STEPS = 64
#: The levels tried by default.
DEFAULT_LEVELS: tuple[int | str, ...] = (1, 2, "auto")


@dataclass(frozen=True)
class Candidate(Settings):
    """One setting tried at a site: the `Settings` written there if picked, each None where
    the written one stays; or the scan the rewrite replaced (`unroll` `ORIGINAL`). Being
    `Settings`, it is what `scanrewrite.runtime.override` applies and what the write-back
    writes."""

    #: The site's steps, where a memory budget added the candidate for the whole scan (a policy
    #: on every step, the for-loop's program): it is named for what it is, not for a k nobody
    #: asked for. Not part of what the candidate is.
    length: int | None = field(default=None, compare=False)

    @property
    def original(self) -> bool:
        """Whether it is the scan the rewrite replaced."""
        return self.unroll is ORIGINAL

    def __str__(self) -> str:
        if self.original:
            return "original scan"
        if self.length is not None and self.store == self.length:
            return "for-loop program"
        mode = f"checkpoint={self.checkpoint}" if isinstance(self.checkpoint, bool) else self.checkpoint
        if self.length is not None and self.unroll == self.length and mode is not None:
            parts = [f"per-step {mode}"]
        else:
            parts = [f"k={self.unroll}", *([mode] if mode is not None else [])]
        if self.levels is not None:
            parts.append(f"levels={self.levels}")
        if self.store:
            parts.append(f"store={self.store}")
        return ", ".join(parts)


#: The scan the rewrite replaced, as a candidate.
ORIGINAL_SCAN = Candidate(ORIGINAL)


def candidates(
    ks: Sequence[int],
    checkpoints: Sequence[bool | str],
    *,
    written: object,
    has_checkpoint: bool,
    levels: Sequence[int | str] = (),
    original: bool = False,
    checkpointed: bool = True,
) -> list[Candidate]:
    """Every k with the written checkpoint mode and levels, then every k with each other
    combination of `checkpoints` (only where the call takes `checkpoint`) and `levels`
    (only where given: a `scan` site of at least `LEVELS_MIN_STEPS` steps); then, with
    `original`, the original scan. The written `unroll`, when it is an int not among `ks`,
    is tried too, so the status quo is always measured. Levels go only with a checkpointed
    mode (`checkpointed`: whether the written one is): without checkpointing they change
    nothing."""
    ks = list(dict.fromkeys(ks))
    if isinstance(written, int) and not isinstance(written, bool) and written > 0 and written not in ks:
        ks.append(written)
    modes: list[bool | str | None] = [None, *(dict.fromkeys(checkpoints) if has_checkpoint else ())]
    depths: list[int | str | None] = [None, *dict.fromkeys(levels)]
    found = [
        Candidate(k, mode, depth)
        for mode in modes
        for depth in depths
        if depth is None or (mode is not False and (mode is not None or checkpointed))
        for k in ks
    ]
    return found + [ORIGINAL_SCAN] if original else found


#: The runtime functions whose sites a memory budget spends at (`spending`): each takes
#: `store` and a policy for one `jax.lax.scan` loop (Flax's scans end in one).
SPENDING_APIS = ("scan", "nnx_scan", "linen_scan")
#: The policies a memory budget tries on every step, besides those named (`spending_policies`).
#: The runtime's, which keep each step's reductions' outputs (a softmax's maximum and sum) beside
#: the dots: on a TPU v5e they outran `dots_with_no_batch_dims_saveable` alone in less memory
#: (GPT-style stack 146.9 against 185.6 ms, origin block 17.3 against 17.8), and with the
#: batch dims' dots too they were the fastest programs there, the for-loop's included.
SPENDING_POLICIES = ("dots_with_no_batch_dims_and_reductions_saveable", "dots_and_reductions_saveable")
#: The policies a memory budget tries at every k, rolled: keeping the reductions' outputs alone
#: ran the GPT-style stack at 0.80x `lax.scan(jax.checkpoint(f))`'s time in 0.76x its memory.
ROLLED_SPENDING_POLICIES = ("reductions_saveable",)


def spending_policies(checkpoints: Sequence[bool | str]) -> tuple[str, ...]:
    """The policies a budget tries per step: `SPENDING_POLICIES` and the policies named in
    `checkpoints` (not `True` or `False`)."""
    return tuple(dict.fromkeys([*SPENDING_POLICIES, *(c for c in checkpoints if isinstance(c, str))]))


def spending(
    ks: Sequence[int], stores: Sequence[int], length: int | None, policies: Sequence[str] = (), rolled: Sequence[str] = ()
) -> list[Candidate]:
    """The candidates that spend memory for speed, tried under a memory budget at a site
    (of `SPENDING_APIS`) of `length` steps: every k with each of `rolled` (policies that keep
    a little more of each step); every k with each number of stored steps in `stores` below
    `length` (the last steps' residuals kept instead of recomputed); each of `policies` per
    step (`unroll=length` with the policy: on an accelerator every step straight-line and
    checkpointed alone with it), also with each number of stored steps; and the for-loop's
    program (`store=length`: every step stored, straight-line on an accelerator, nothing
    recomputed, also where `f` checkpoints itself, whose checkpoint the runtime takes over).
    No `stores`, no spending: none of them."""
    if not length or not stores:
        return []
    ks = [k for k in dict.fromkeys(ks) if k < length]
    counts = [s for s in dict.fromkeys(stores) if 0 < s < length]
    found = [Candidate(k, policy) for policy in dict.fromkeys(rolled) for k in ks]
    found += [Candidate(k, store=s) for s in counts for k in ks]
    for policy in dict.fromkeys(policies):
        found += [Candidate(length, policy, length=length)]
        found += [Candidate(length, policy, store=s, length=length) for s in counts]
    return found + [Candidate(length, store=length, length=length)]


def default_stores(length: int | None) -> tuple[int, ...]:
    """The stored steps tried by default at a site of `length` steps: 1 (which measures one
    step's residuals, for the prediction), and a quarter, half and three quarters of the steps."""
    if not length or length < 2:
        return ()
    return tuple(sorted({1, *(max(round(length * f), 1) for f in (0.25, 0.5, 0.75))} - {length}))


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


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "tb": 10**12}


@dataclass(frozen=True)
class Budget:
    """A memory budget for XLA's compiled temp memory: bytes, a fraction of `lax.scan`'s, or a
    fraction of the device's memory."""

    bytes: int | None = None
    fraction: float | None = None
    #: A fraction of the device's memory (`memory_stats()["bytes_limit"]`).
    device: float | None = None

    @classmethod
    def parse(cls, text: str | int | float | None) -> Budget | None:
        """`"2GiB"`, `"512MB"`, `1000000` (bytes); `"0.5x"` or `"50%"` (of `lax.scan`'s); a
        bare number up to 1, `"0.8"`, of the device's memory (less than a byte means nothing
        else)."""
        if text is None:
            return None
        if isinstance(text, (int, float)) and not isinstance(text, bool):
            text = str(text)
        if not isinstance(text, str):
            raise TuneError(f"{_BUDGET_FORMS}, got {text!r}")
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*(x|%|[a-z]*)\s*", text.lower())
        if match is None or match.group(2) not in (*_UNITS, "x", "%"):
            raise TuneError(f"{_BUDGET_FORMS}, got {text!r}")
        number, unit = float(match.group(1)), match.group(2)
        if number <= 0:
            raise TuneError(f"a memory budget must be positive, got {text!r}")
        if unit == "x":
            return cls(fraction=number)
        if unit == "%":
            return cls(fraction=number / 100)
        if unit == "" and number <= 1:
            return cls(device=number)
        return cls(bytes=int(number * _UNITS[unit]))

    def limit(self, baseline_bytes: int | None, device_bytes: int | None = None) -> int | None:
        """The budget in bytes, given `lax.scan`'s temp memory and the device's memory (None:
        unknown, no limit)."""
        if self.bytes is not None:
            return self.bytes
        if self.device is not None:
            if device_bytes is None:
                raise TuneError(
                    f"a budget of {self.device:g} of the device's memory, but the device reports no memory "
                    "size (the CPU does not): give bytes ('12GiB') or a fraction of lax.scan's ('0.5x')"
                )
            return math.floor(self.device * device_bytes)
        if baseline_bytes is None:
            return None
        return math.floor(self.fraction * baseline_bytes)

    def __str__(self) -> str:
        if self.bytes is not None:
            return f"{self.bytes} bytes"
        if self.device is not None:
            return f"{self.device:g} of the device's memory"
        return f"{self.fraction:g}x lax.scan's temp memory"


_BUDGET_FORMS = "a memory budget is bytes ('2GiB'), a fraction of lax.scan's ('0.5x', '50%') or of the device's memory ('0.8')"


@dataclass(frozen=True)
class Timing:
    """The step times of one program, in seconds, from interleaved repeats."""

    times: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def noise(self) -> float:
        """Half the interquartile range of the repeats, in seconds (0 for a single repeat):
        the spread reported as `±` and the margin within which two configurations tie."""
        if len(self.times) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.times, n=4, method="inclusive")
        return (q3 - q1) / 2


@dataclass(frozen=True)
class Option:
    """What the pick sees of one measured candidate."""

    candidate: Candidate
    timing: Timing | None
    temp_bytes: int | None
    error: str | None = None
    #: Whether its numbers differ from the original's: it is never picked.
    differs: bool = False
    #: Whether it is the setting the call has now: it wins a tie of speed and memory.
    written: bool = False
    #: A digest of its optimized program (`Compiled.program`), if known.
    program: str | None = None
    #: How many of the call's settings writing it back changes (`changes`); None: none if it
    #: is `written`, else one.
    changes: int | None = None

    @property
    def distance(self) -> int:
        """How far it is from what the source says: 0 for the written setting."""
        if self.changes is not None:
            return self.changes
        return 0 if self.written else 1


def changes(candidate: Candidate, written: Settings) -> int:
    """How many of a call's settings (`unroll`, `checkpoint`, `levels`, `store`) writing
    `candidate` back changes, the call having written `written` (`Settings.changes`); the
    original scan changes all."""
    if candidate.original:
        return len(NAMES)
    return len(candidate.changes(written))


#: The reason given when no candidate fits the memory budget.
OVER_BUDGET = "no candidate fits the memory budget: the least memory"


def choose(options: Sequence[Option], limit: int | None) -> tuple[Option | None, str]:
    """The pick among `options`, and why.

    Only candidates that ran and compute the original's numbers count. The fastest (median
    step time) of those whose temp memory fits `limit`; then, among those within the measured
    noise of it (the larger of the two spreads) or compiled to the same program: the original
    scan if it is one of them (the rewrite keeps only what helps: speed, or the memory the
    budget needs), else the one with the least temp memory (ties: the one closest to the
    written setting, which changes fewest of the call's settings, then the faster).
    The written setting also stands wherever it compiles to the same program as the pick.
    If none fits the budget, the one with the least memory, said so in the reason. None if no
    candidate ran and agreed.
    """
    ran = [option for option in options if option.error is None and option.timing is not None and not option.differs]
    if not ran:
        return None, "no candidate ran" if not any(option.differs for option in options) else "no candidate verified"
    fits = [o for o in ran if limit is None or o.temp_bytes is None or o.temp_bytes <= limit]
    if not fits:
        least = min(ran, key=lambda o: (o.temp_bytes, o.timing.median))
        return least, OVER_BUDGET
    fastest = min(fits, key=lambda o: o.timing.median)
    ties = [
        o for o in fits
        if o.timing.median - fastest.timing.median <= max(o.timing.noise, fastest.timing.noise)
        or (o.program is not None and o.program == fastest.program)
    ]
    within = "within the memory budget" if limit is not None else ""
    original = next((o for o in ties if o.candidate.original), None)
    if original is not None:
        if original is fastest:
            return original, " ".join(filter(None, ["fastest", within]))
        same = original.program is not None and original.program == fastest.program
        how = "the same program as" if same else "as fast as"
        return original, f"{how} {fastest.candidate}{'' if same else ' within noise'}: the rewrite does not help here"
    memory = lambda o: math.inf if o.temp_bytes is None else o.temp_bytes
    best = min(ties, key=lambda o: (memory(o), o.distance, o.timing.median))
    written = next((o for o in fits if o.written), None)
    if written not in (None, best) and written.program is not None and written.program == best.program:
        return written, f"as written: the same program as {best.candidate}"
    if best.written and best is not fastest and best.program is not None and best.program == fastest.program:
        return best, f"as written: the same program as {fastest.candidate}"
    if best is fastest:
        return best, " ".join(filter(None, ["fastest", within]))
    if best.written and memory(best) == memory(fastest):
        return best, f"as written: as fast as {fastest.candidate} within noise, at the same memory"
    if best.distance < fastest.distance and memory(best) == memory(fastest):
        return best, f"closest to what is written: as fast as {fastest.candidate} within noise, at the same memory"
    return best, f"less memory than {fastest.candidate} at the same speed within noise"
