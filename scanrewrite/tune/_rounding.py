"""The rounding a function's own precision makes, measured on programs equal to it up to rounding.

A bfloat16 computation with float32 outputs (a loss, gradients accumulated in float32) rounds
its last bits otherwise in every program that reorders it. Judged at float32's 1e-4, a
candidate that only reorders looks wrong: on a TPU v5e a bfloat16 stack's fastest program that
fit was rejected at 1.4e-2 from the original while the pick itself was 1.3e-2 from it. So where
the function computes in a float narrower than 32 bits, each output's rtol is raised to
`_verify.ROUNDING_FACTOR` times the largest difference among programs that differ from the
original by rounding alone: the original compiled a second time (the warm-up's), the
checkpointed scan at every site (`unroll=1, checkpoint=True`), and stored steps: the for-loop's
program at every `scan` site (every step stored), one stored step at Flax sites; never beyond
the narrow float's own rtol, so a difference rounding cannot make still is one.

A stored step's backward pass reads the forward's values instead of recomputing them, which is
what moves the last bits (on a TPU v5e a 4-layer bfloat16 GPT-style stack's candidates differed
from the original by the for-loop's 7.5e-3, and one stored step of it by as much; a LLaMA-style
stack's one stored step by 7.7e-3, its for-loop by 9.1e-3). At Flax sites one
stored step stands for the for-loop: there XLA compiled the for-loop of four Flax layers in
100 s on the TPU, against 14 s for the same four layers scanned with `jax.lax.scan`, and of 16
layers not in 200 s, so the for-loop alone outlasted the rest of the tuning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scanrewrite.runtime import Call, Site
from scanrewrite.tune._candidates import FLAX_APIS, ORIGINAL_SCAN, SPENDING_APIS, Candidate
from scanrewrite.tune._compile import Compiled, Config, Program
from scanrewrite.tune._verify import rounding_of, to_host


def references(calls: Mapping[Site, Call], lengths: Mapping[Site, int]) -> list[Config]:
    """The configurations equal to the original up to rounding: the checkpointed scan at every
    site, and at the sites of `SPENDING_APIS` of known length, stored steps (the for-loop's
    program; one stored step at Flax sites)."""
    sites = sorted(calls)
    # equinox's scan takes no `checkpoint`: `kind="lax"` checkpoints each chunk.
    checkpointed = tuple((site, Candidate(1, None if calls[site].api == "eqxi_scan" else True)) for site in sites)
    loops = {site: _stored(lengths[site], calls[site].api) for site in sites
             if calls[site].api in SPENDING_APIS and lengths.get(site)}  # fmt: skip
    if not loops:
        return [checkpointed]
    return [checkpointed, tuple((site, loops.get(site, ORIGINAL_SCAN)) for site in sites)]


def _stored(n: int, api: str) -> Candidate:
    """Stored steps that measure rounding at a site of `n` steps: every step (the for-loop's
    program), one at Flax sites (see above)."""
    return Candidate(1, store=1) if api in FLAX_APIS else Candidate(n, store=n)


def measure(
    program: Program, configs: list[Config], first: Any | None, precision: Any, threads: int,
    done: Callable[[Compiled], None],
) -> tuple[tuple[float, ...], tuple[float, ...]]:  # fmt: skip
    """The raised rtol and atol of each output leaf (`_verify.rounding_of`) from `configs`
    (compiled and run once each; one that fails is left out) and `first`, the original's
    warm-up outputs."""
    outputs = [] if first is None else [first]
    for compiled in program.compile_all(configs, threads, done):
        if compiled.error is None:
            try:
                outputs.append(to_host(program.run(compiled)))
            except Exception:  # noqa: BLE001 - a reference that fails to run tells nothing of rounding
                pass
    return rounding_of(outputs, program.reference, precision)
