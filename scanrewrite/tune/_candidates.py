"""Stage 2, list the candidates: what each site tries, from the options and what it wrote.

Plain data, no jax (the candidates can be listed and tested without compiling anything).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scanrewrite.settings import ORIGINAL, Settings

if TYPE_CHECKING:
    from scanrewrite.runtime import Site
    from scanrewrite.tune._options import TuneOptions
    from scanrewrite.tune._sites import Found

#: The chunk sizes tried by default.
DEFAULT_KS: tuple[int, ...] = (1, 2, 3, 4, 6, 8)


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

    def as_written(self, written: Settings) -> bool:
        """Whether it is the setting a call that wrote `written` already has: not the original,
        and changing none of its settings."""
        return not self.original and not self.changes(written)

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
FLAX_APIS = ("nnx_scan", "linen_scan")
SPENDING_APIS = ("scan", *FLAX_APIS)
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


@dataclass
class SiteCandidates:
    """What one site tries."""

    #: Compiled in every round of the site: each k with each checkpoint mode and levels tried,
    #: and the original scan.
    tried: list[Candidate]
    #: Under a memory budget, what spends memory for speed: compiled only where predicted to
    #: fit and win (`_predict`); the stored counts that fill the budget join it as measured.
    spend: list[Candidate] = field(default_factory=list)

    def planned_steps(self, repeats: int, length: int | None) -> int:
        """The most steps a round of the site takes: a compile of each candidate (or a
        prediction that leaves it out), two more stored counts that fill the budget (`fill`)
        at each k with stored counts, and the timed rounds."""
        families = {(c.unroll, c.checkpoint, c.levels) for c in self.spend if c.store and c.store != length}
        return len(self.tried) + len(self.spend) + 2 * len(families) + repeats


def list_candidates(found: Found, options: TuneOptions) -> dict[Site, SiteCandidates]:
    """Each site's candidates: every k with the written checkpoint mode and levels and with
    each other of `options.checkpoints` and `options.levels` (not at `eqxi_scan` sites, which
    take neither; levels only at sites of `LEVELS_MIN_STEPS` steps or more), the original scan
    (but with `keep_rewrites`), and under a budget at sites of `SPENDING_APIS` what spends."""
    return {site: _of_site(found, site, options) for site in found.calls}


def _of_site(found: Found, site: Site, options: TuneOptions) -> SiteCandidates:
    call = found.calls[site]
    written, length = call.settings, found.lengths.get(site)
    configurable = call.api != "eqxi_scan"
    tried = candidates(
        options.ks,
        [mode for mode in options.checkpoints if mode != found.written_mode(site)],
        written=written.unroll,
        has_checkpoint=configurable,
        levels=[depth for depth in options.levels if depth != written.or_defaults().levels]
        if configurable and (length or 0) >= LEVELS_MIN_STEPS else (),
        original=not options.keep_rewrites,
        checkpointed=written.checkpoint is not False,
    )
    if options.memory_budget is None or call.api not in SPENDING_APIS:
        return SiteCandidates(tried)
    counts = default_stores(length) if options.stores is None else options.stores
    found_spending = spending(options.ks, counts, length, spending_policies(options.checkpoints), ROLLED_SPENDING_POLICIES)
    return SiteCandidates(tried, [c for c in found_spending if c not in tried])
