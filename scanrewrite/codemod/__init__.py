"""The transform: rewrite `jax.lax.scan` / `equinox.internal.scan` calls to the runtime.

`rewrite` is the pure function the command line uses: bytes in, `RewriteResult` out,
no file I/O, no printing, no jax import. `ScanRewriteCommand` is the same transform as
a libcst codemod, so it also runs under libcst's own runner::

    python -m libcst.tool codemod --no-format -x scanrewrite.codemod.ScanRewriteCommand --unroll 4 PATH

A rewritten call keeps every argument, comment and line break the user wrote; only
the callee changes and `unroll=N` (and, when asked for, `checkpoint=...`) is appended.

The parts, each importing only those before it:

- `_parsing`: bytes to a libcst module and back, byte for byte; line numbers.
- `_arguments`: what a call's arguments bind; adding keyword arguments in its layout.
- `_discovery`: which names resolve to a known API; the calls and pragmas found.
- `_imports`: the import the rewrite adds and the ones it leaves unused.
- `_rewrite`: `rewrite` and its result types.
- `_command`: `ScanRewriteCommand`, the libcst codemod.
"""

from __future__ import annotations

from scanrewrite.codemod._command import ScanRewriteCommand
from scanrewrite.codemod._discovery import may_rewrite
from scanrewrite.codemod._parsing import SourceError
from scanrewrite.codemod._rewrite import RewriteResult, Rewritten, Skipped, rewrite

__all__ = [
    "RewriteResult",
    "Rewritten",
    "ScanRewriteCommand",
    "Skipped",
    "SourceError",
    "may_rewrite",
    "rewrite",
]
