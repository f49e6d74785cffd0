"""Import bookkeeping: the import a rewrite adds (``import scanrewrite.runtime``, or ``import
jax`` for the revert) and the imports it leaves unused, which it removes.

An edit schedules its imports in an `ImportEdits` as libcst's `AddImportsVisitor` and
`RemoveImportsVisitor` schedule them, and `apply_scheduled_imports` makes them as libcst would,
with two changes: a removed import keeps the blank lines and comments above it, and an added
import adds only its own line, where import sorters put it.

The parts, each importing only those before it (and `scanrewrite.codemod._parsing`):

- `_placement`: where an added import goes, as ruff's and isort's import sorting would put it.
- `_kept`: the imports a user marked to keep (``# noqa``, ``import a as a``, ``__all__``).
- `_edits`: `ImportEdits`, the imports a transform schedules to add and to remove.
- `_string_names`: the names written in ``__all__`` and in string annotations, as libcst reads
  them (adapted from LibCST, MIT license: see LICENSES/libcst-MIT.txt).
- `_unused`: which scheduled imports an edit leaves unused, as libcst's import remover decides
  it, read off the scopes the rewrite already has.
- `_schedule`: which imports a rewrite schedules for removal (those only the replaced calls
  read), and which import lines go whole.
- `_removal`: removing imports, keeping the lines above them and those marked to keep
  (adapted from LibCST, MIT license: see LICENSES/libcst-MIT.txt).
- `_apply`: making the scheduled edits: the added import, then the removals.
- `_changes`: which imported names differ between a file and its rewrite (what `-v` reports).
"""

from scanrewrite.codemod.imports._apply import apply_scheduled_imports
from scanrewrite.codemod.imports._changes import ImportChanges, import_changes
from scanrewrite.codemod.imports._edits import ImportEdits
from scanrewrite.codemod.imports._placement import sort_key
from scanrewrite.codemod.imports._removal import ImportPruner
from scanrewrite.codemod.imports._schedule import schedule_import_removal, unused_imports, whole_lines
from scanrewrite.codemod.imports._unused import policy_uses, unused_after_edit

__all__ = [
    "ImportChanges",
    "ImportEdits",
    "ImportPruner",
    "apply_scheduled_imports",
    "import_changes",
    "policy_uses",
    "schedule_import_removal",
    "sort_key",
    "unused_after_edit",
    "unused_imports",
    "whole_lines",
]
