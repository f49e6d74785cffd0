"""Stage 1, find the sites: the rewritten calls the function traces, and what the later stages
need to know of them (each loop's steps, the narrowest float the function computes in)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp

from scanrewrite.runtime import Site, Sites, named_policy
from scanrewrite.targets import ALL_POLICIES
from scanrewrite.tune._compile import BASELINE, Program
from scanrewrite.tune._errors import TuneError
from scanrewrite.tune._jaxpr import narrowest_float, scan_lengths
from scanrewrite.tune._options import TuneOptions
from scanrewrite.tune._report import originals_label


@dataclass(frozen=True)
class Found:
    """The sites of one function, in the order first traced."""

    #: Each site's `Call`: the runtime function called there and the settings written.
    calls: Sites
    #: The steps of each site's loop, where known.
    lengths: dict[Site, int]
    #: The narrowest float dtype the function computes in; None where not looked for (an
    #: `rtol` given) or it computes in none.
    precision: Any | None

    @property
    def sites(self) -> list[Site]:
        return list(self.calls)

    def written_mode(self, site: Site) -> bool | str | None:
        """The checkpoint mode the call at `site` wrote, as a `Settings` holds it: `True`,
        `False` or a policy's name (None if it wrote a policy of its own)."""
        checkpoint = self.calls[site].settings.checkpoint
        if isinstance(checkpoint, bool):
            return checkpoint
        return next((name for name in ALL_POLICIES if named_policy(name) is checkpoint), None)

    @property
    def original(self) -> str:
        """The label of the function with every site as the call it replaced (`originals_label`)."""
        return originals_label(call.api for call in self.calls.values())

    @property
    def narrow(self) -> bool:
        """Whether it computes in a float narrower than 32 bits, whose rounding moves an
        output's last bits by more than its own dtype's rtol."""
        return self.precision is not None and jnp.finfo(self.precision).bits < 32


def find_sites(program: Program, options: TuneOptions) -> Found:
    """The rewritten calls `program` traces (abstractly: nothing is compiled), their steps
    where `levels` or a budget needs them, and its narrowest float where the check needs it.

    Raises `TuneError` if the function fails when traced or traces no rewritten call.
    """
    try:
        calls = program.sites()
    except Exception as exc:
        raise TuneError(f"the function fails when traced: {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    if not calls:
        raise TuneError(
            "the function traces no rewritten call (scanrewrite.runtime.scan, eqxi_scan, fori_loop, "
            "map, nnx_scan or linen_scan); rewrite its scans with `scanrewrite` first"
        )
    wanted = options.levels or options.memory_budget or options.rtol is None
    jaxpr = program.jaxpr(BASELINE) if wanted else None
    lengths = {**_planned_lengths(calls), **(scan_lengths(jaxpr, list(calls)) if jaxpr is not None else {})}
    precision = narrowest_float(jaxpr) if options.rtol is None and jaxpr is not None else None
    return Found(calls, lengths, precision)


def _planned_lengths(calls: Sites) -> dict[Site, int]:
    """The steps of each site's loop as the runtime planned it, where it did. Flax's loop is
    traced in Flax's frames, none at the site's line, so `scan_lengths` does not find it."""
    return {site: plans[0].steps for site, plans in calls.plans.items() if plans}
