"""Measure `unroll` (and checkpoint modes, `levels`) per rewritten call site on your own
device, check each configuration's numbers against the original's, and pick the winners.

`tune(fn, args)` compiles and times `fn` with each candidate at each site (the others held
fixed), against the same function with every site as `jax.lax.scan`, compares every
configuration's outputs with that original's, and returns a `TuneReport`: a table per site and
the picks (the original scan where the rewrite does not help). The `scanrewrite-tune` command
runs it on a factory in a file and writes the picks back into the source. This package imports
jax; the `scanrewrite` command never does.
"""

from __future__ import annotations

from scanrewrite.tune._report import Row, SiteReport, TuneReport
from scanrewrite.tune._select import DEFAULT_KS, DEFAULT_LEVELS, ORIGINAL_SCAN, Budget, Candidate, TuneError
from scanrewrite.tune._tune import Progress, tune
from scanrewrite.tune._verify import Tolerance

__all__ = [
    "DEFAULT_KS",
    "DEFAULT_LEVELS",
    "ORIGINAL_SCAN",
    "Budget",
    "Candidate",
    "Progress",
    "Row",
    "SiteReport",
    "Tolerance",
    "TuneError",
    "TuneReport",
    "tune",
]
