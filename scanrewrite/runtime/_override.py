"""Trace-time overrides of a rewritten call's settings, by call site.

Every runtime call knows its call site (the file and line of the rewritten call). `resolve`
gives the settings a call should use: what the call wrote, unless an active override says
otherwise for all sites or for this one. The staging cache keys on the resolved settings, so
an override always reaches the compiled program.

(The override and site-recording API itself, for `scanrewrite.tune`, is built on this.)
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple


class Site(NamedTuple):
    """Where a rewritten call stands: the absolute path of its file and the line of the call."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def call_site(depth: int = 2) -> Site | None:
    """The site of the frame `depth` levels up from this function, if any.

    `depth=1` is the function that calls `call_site`, so the default, 2, is that function's
    caller: called first thing in `scan`/`eqxi_scan`, the user's (rewritten) call line.
    """
    try:
        frame = sys._getframe(depth)
    except ValueError:
        return None
    return Site(frame.f_code.co_filename, frame.f_lineno)


def resolve(site: Site | None, **settings: Any) -> dict[str, Any]:
    """`settings` as the call wrote them, with any active override for `site` applied."""
    del site
    return settings
