"""The transform: rewrite `jax.lax.scan` / `equinox.internal.scan` calls to the runtime.

`rewrite` is the pure function the command line uses: bytes in, `RewriteResult` out,
no file I/O, no printing, no jax import. `ScanRewriteCommand` is the same transform as
a libcst codemod, so it also runs under libcst's own runner:

```bash
python -m libcst.tool codemod --no-format -x scanrewrite.codemod.ScanRewriteCommand --unroll 4 PATH
```

A rewritten call keeps every argument, comment and line break the user wrote; only
the callee changes and `unroll=N` (and, when asked for, `checkpoint=...`) is appended.

The options (`unroll`, `checkpoint`, `levels`, `targets`, `line_length`, `first_party`) are
one frozen `scanrewrite.options.Options`, defined there once: `rewrite(source, options)`, or
keyword arguments that change it, `rewrite(source, unroll=8)`; `revert`, `write_picks` and
`ScanRewriteCommand`'s arguments take the same.

The parts, each importing only those before it (and the layout engine, `scanrewrite.layout`:
a changed statement laid out as black and ruff format would, and `KeepLayout`, the transformer
base of the rewrite, the revert and the write-back):

- `_walk`: read-only walks of libcst trees (they build no node), and libcst's scopes
  without its metadata wrapper's walks.
- `_splice`: a transformed module's bytes, the input's where a statement was kept.
- `_parsing`: bytes to a libcst module and back, byte for byte; line numbers.
- `_scopes`: libcst's scopes, analysed over only the top-level statements that can matter.
- `_arguments`: what a call's arguments bind; adding keyword arguments in its layout.
- `_discovery`: which names resolve to a known API; the calls and pragmas found.
- `_checkpoints`: a per-step checkpoint around a scanned function; a loop already chunked
  and checkpointed by hand.
- `_applied`: scans applied rather than called, and the per-step Flax remat inside them.
- `imports`: the package of import bookkeeping: the import the rewrite adds, where it goes,
  and the imports it leaves unused, which it removes unless the user marked them to keep;
  and `import_changes`, the imported names a file lost and gained (what `-v` reports).
- `_rewrite`: `rewrite` and its result types.
- `_writeback`: `set_settings`, `set_unroll` and `read_unroll`, the tuner's write-back of a
  `Settings` (`scanrewrite.settings`, shared with the runtime and the tuner, re-exported here).
- `_spelling`: how a reverted call names its API again, and the import that needs.
- `_revert`: `revert`, the inverse of `rewrite` (`scanrewrite --revert`), and
  `write_picks`, the tuner's write-back that reverts where the original won.
- `_command`: `ScanRewriteCommand`, the libcst codemod; no other part imports `libcst.codemod`.

`_revert`, `_writeback` and `_command` are imported when one of their names is first asked
for (`_LAZY`): `--check` and the rewrite in place need none of them.

The write-back, for `scanrewrite-tune` (see `_writeback` and `_revert` for the details):

```python
set_unroll(source: bytes, picks: Mapping[int, int]) -> UnrollResult
set_settings(source: bytes, picks: Mapping[int, Settings], line_length=88) -> UnrollResult
write_picks(source: bytes, picks: Mapping[int, Settings | None], options=None, /, **changes) -> UnrollResult
read_unroll(source: bytes) -> dict[int, int | None]
```

And its inverse, `scanrewrite --revert`:

```python
revert(source: bytes, options=None, /, *, lines=None, **changes) -> RewriteResult
```
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from scanrewrite.codemod._discovery import may_rewrite
from scanrewrite.codemod._parsing import SourceError
from scanrewrite.codemod._rewrite import RewriteResult, Rewritten, Skipped, rewrite
from scanrewrite.codemod.imports import ImportChanges, import_changes
from scanrewrite.settings import Settings

if TYPE_CHECKING:
    from scanrewrite.codemod._command import ScanRewriteCommand
    from scanrewrite.codemod._revert import revert, write_picks
    from scanrewrite.codemod._writeback import UnrollResult, read_unroll, set_settings, set_unroll

__all__ = [
    "ImportChanges",
    "RewriteResult",
    "Rewritten",
    "ScanRewriteCommand",
    "Skipped",
    "Settings",
    "SourceError",
    "UnrollResult",
    "import_changes",
    "may_rewrite",
    "read_unroll",
    "revert",
    "rewrite",
    "set_settings",
    "set_unroll",
    "write_picks",
]

#: The parts imported when one of their names is first asked for. A run of the command line
#: on a few files spends much of its time importing: `--check` needs neither the revert nor
#: the tuner's write-back, and only libcst's runner needs `ScanRewriteCommand`, a libcst
#: codemod (any import of `libcst.codemod` imports `libcst.matchers`, which alone costs
#: more than parsing a 1,000-line file).
_LAZY = {
    "ScanRewriteCommand": "_command",
    "revert": "_revert",
    "write_picks": "_revert",
    "UnrollResult": "_writeback",
    "read_unroll": "_writeback",
    "set_settings": "_writeback",
    "set_unroll": "_writeback",
}


def __getattr__(name: str) -> object:
    part = _LAZY.get(name)
    if part is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{part}"), name)
    globals()[name] = value
    return value
