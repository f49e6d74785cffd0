"""A port of black's line splitting: a changed statement laid out as black and ruff format would.

`relayout` lays out an edited statement as the formatters lay out its original; `KeepLayout`
is the libcst transformer the codemod's edits are built on. The parts, each importing only
those before it: `_lines` (the lines a statement splits into), `_split` (how one logical
line that is too long is split), `_tokens` (a libcst statement read into those tokens) and
`_relayout` (the entry points). The package knows nothing of scans.
"""

from scanrewrite.layout._relayout import KeepLayout, relayout

__all__ = ["KeepLayout", "relayout"]
