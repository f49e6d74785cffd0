"""Measure `unroll` (and checkpoint modes, `levels`) per rewritten call site on your own
device, check each configuration's numbers against the original's, and pick the winners.

`tune(fn, args)` compiles and times `fn` with each candidate at each site (the others held
fixed), against the same function with every site as `jax.lax.scan`, compares every
configuration's outputs with that original's, and returns a `TuneReport`: a table per site and
the picks (the original scan where the rewrite does not help). The `scanrewrite-tune` command
runs it on a factory in a file and writes the picks back into the source. What measures imports
jax, on first use (so the command's `--help` needs none); the `scanrewrite` command never does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from scanrewrite.tune._budget import Budget
from scanrewrite.tune._candidates import (
    DEFAULT_KS,
    DEFAULT_LEVELS,
    ORIGINAL_SCAN,
    Candidate,
)
from scanrewrite.tune._errors import TuneError
from scanrewrite.tune._options import TuneOptions

if TYPE_CHECKING:
    from scanrewrite.tune._progress import Progress
    from scanrewrite.tune._report import Row, SiteReport, TuneReport
    from scanrewrite.tune._tune import tune
    from scanrewrite.tune._verify import Tolerance

# Imported on first use, so that the `scanrewrite-tune` command (in this package) can print
# its help, and say what to install, where jax is not installed.
_LAZY = {
    "Row": "_report",
    "SiteReport": "_report",
    "TuneReport": "_report",
    "Progress": "_progress",
    "tune": "_tune",
    "Tolerance": "_verify",
}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value

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
    "TuneOptions",
    "TuneReport",
    "tune",
]
