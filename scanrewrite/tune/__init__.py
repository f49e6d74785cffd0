"""Measure `unroll` per rewritten call site on your own device, and pick the winners.

`tune(fn, args)` compiles and times `fn` with each candidate at each site (the others held
fixed), against the same function with every site as `jax.lax.scan`, and returns a
`TuneReport`: a table per site and the picks. The `scanrewrite-tune` command runs it on a
factory in a file and writes the picks back into the source. This package imports jax; the
`scanrewrite` command never imports it.
"""

from __future__ import annotations

from scanrewrite.tune._report import Row, SiteReport, TuneReport
from scanrewrite.tune._select import DEFAULT_KS, Budget, Candidate, TuneError
from scanrewrite.tune._tune import Progress, tune

__all__ = [
    "DEFAULT_KS",
    "Budget",
    "Candidate",
    "Progress",
    "Row",
    "SiteReport",
    "TuneError",
    "TuneReport",
    "tune",
]
