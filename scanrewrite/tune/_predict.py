"""Which of the memory-spending candidates to compile under a budget, predicted before compiling.

Straight-line programs compile slowly on an accelerator (the for-loop of a 16-layer GPT-style
stack takes 38 s on a TPU v5e against 4 s for `lax.scan(jax.checkpoint(f))`), and the programs
that spend memory (stored steps, the for-loop's program) are the straight-line ones. So the
tuner predicts their memory from programs it compiles anyway, and compiles only those that
may fit and win:

- **One step's residuals**, r: the memory of k = 1 with one stored step, less that of
  k = 1 (both cheap to compile: one straight-line step). Storing s steps of chunks of k keeps
  about `mem(k) + s * r`, and the for-loop's program (every step stored) about
  `mem(1) + (N - 1) * r`. With a policy on every step (`unroll=N`), whose program is
  compiled first (the `bases`), a stored step keeps r less what the policy saved of it:
  `mem(N, policy) + s * (r - (mem(N, policy) - mem(1)) / N)`. XLA's memory is not
  exactly linear in s (buffers are shared and reused), so a candidate is left out only when
  its prediction exceeds the budget by more than `MARGIN`.
- **May win**: of the stored counts predicted to fit at one k, the largest recomputes least,
  and is taken to be the fastest: only it and the next smaller one (in case the largest turns
  out over the budget once compiled) are compiled.
- **Filling the budget** (`fill`): the counts tried first (a quarter, half and three quarters
  of the steps) leave room under most budgets. Once they are compiled, the memory of each
  further stored step is taken as the steepest rise between two counts measured at that k
  (the first steps stored cost least: XLA reuses the recomputation's buffers for them), and
  the largest count predicted to fit, and the one above it, are compiled too. On a TPU v5e,
  16-layer GPT-style stack, 6.5 GiB: store=4 fitted at 5.09 GiB, and the rise from store=1
  (0.52 GiB a step) points at store=6, 6.08 GiB and 1.9% faster.

Plain arithmetic on byte counts, no jax: it is tested, and a report's choices reproduced,
without compiling anything.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from scanrewrite.targets import ALL_POLICIES
from scanrewrite.tune._candidates import Candidate

#: A prediction may be this much over the budget and still be compiled (XLA's memory
#: grows a little less or more than linearly with the steps stored).
MARGIN = 0.10


def anchor(spending: Sequence[Candidate]) -> Candidate | None:
    """The candidate to compile first, whose memory tells one step's residuals (k = 1, one step
    stored), if it is among `spending`."""
    return next((c for c in spending if c.unroll == 1 and c.store == 1), None)


def bases(spending: Sequence[Candidate], length: int) -> list[Candidate]:
    """The candidates of `spending` to compile before predicting the others: each policy per
    step, without stored steps (its stored counts are predicted from it)."""
    return [c for c in spending if _policy_loop(c, length) and not c.store]


def _policy_loop(candidate: Candidate, length: int) -> bool:
    return candidate.unroll == length and candidate.checkpoint in ALL_POLICIES


def is_for_loop(candidate: Candidate, length: int) -> bool:
    return candidate.store == length


def predict(candidate: Candidate, measured: Mapping[Candidate, int], length: int) -> int | None:
    """`candidate`'s memory predicted from the `measured` memory of other candidates
    (at least k = 1 and its anchor); None where they do not tell."""
    first, stored = measured.get(Candidate(1)), measured.get(Candidate(1, store=1))
    if first is None or stored is None or stored <= first:
        return None
    per_step = stored - first
    if is_for_loop(candidate, length):
        return first + (length - 1) * per_step
    base = measured.get(Candidate(candidate.unroll, candidate.checkpoint, candidate.levels))
    if not candidate.store or base is None:
        return None
    if _policy_loop(candidate, length):
        # A stored step no longer keeps what the policy saved of it.
        return base + candidate.store * (per_step - max(base - first, 0) // length)
    return base + candidate.store * per_step


def prune(
    spending: Sequence[Candidate], measured: Mapping[Candidate, int], length: int, limit: int
) -> tuple[list[Candidate], dict[Candidate, str]]:
    """Of `spending`, those to compile, in order, and why each other is not (see the module's
    docstring); `measured` holds the memory of what is already compiled."""
    chosen: list[Candidate] = []
    skipped: dict[Candidate, str] = {}
    fitting: dict[tuple, list[Candidate]] = {}
    for candidate in spending:
        if candidate in measured:
            continue
        guess = predict(candidate, measured, length)
        if guess is not None and guess > limit * (1 + MARGIN):
            skipped[candidate] = f"not compiled: predicted {_mib(guess)}, over the budget"
            continue
        if candidate.store and guess is not None:
            fitting.setdefault((candidate.unroll, candidate.checkpoint, candidate.levels), []).append(candidate)
        chosen.append(candidate)
    for same_k in fitting.values():
        ranked = sorted(same_k, key=lambda c: c.store, reverse=True)
        for candidate in ranked[2:]:
            chosen.remove(candidate)
            skipped[candidate] = f"not compiled: store={ranked[0].store} fits too and recomputes less"
    return chosen, skipped


def _mib(count: int) -> str:
    from scanrewrite.tune._report import format_bytes

    return format_bytes(count)


def fill(measured: Mapping[Candidate, int], length: int, limit: int) -> list[Candidate]:
    """The stored counts that fill the budget `limit` (see the module's docstring), at each k
    (with its policy and levels) where two stored counts or more are `measured` (none stored
    counts as a count of 0) and one fits: counts not yet measured, below any measured over the
    budget, and below `length` (the for-loop's program is a candidate of its own)."""
    families: dict[tuple, dict[int, int]] = {}
    for candidate, temp in measured.items():
        if candidate.original or is_for_loop(candidate, length):
            continue
        families.setdefault((candidate.unroll, candidate.checkpoint, candidate.levels), {})[candidate.store or 0] = temp
    found = []
    for (unroll, checkpoint, levels), temps in families.items():
        counts = sorted(temps)
        fitting = [s for s in counts if temps[s] <= limit]
        if len(counts) < 2 or not fitting:
            continue
        rise = max((temps[b] - temps[a]) / (b - a) for a, b in itertools.pairwise(counts))
        best = fitting[-1]
        over = [s for s in counts if s > best]
        ceiling = min([length - 1, *(s - 1 for s in over)])
        target = ceiling if rise <= 0 else min(best + int((limit - temps[best]) // rise), ceiling)
        for store in (target, target + 1):
            if best < store <= ceiling:
                whole = length if unroll == length else None  # a policy on every step
                found.append(Candidate(unroll, checkpoint, levels, store=store, length=whole))
    return found
