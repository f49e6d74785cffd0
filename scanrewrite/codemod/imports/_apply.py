"""Making the import edits an `ImportEdits` schedules: adding the imports, then removing those
nothing uses any more.

Scheduled as libcst's `AddImportsVisitor` / `RemoveImportsVisitor` schedule them (`_schedule`),
and made here as libcst would make them, with two changes: a removed import keeps the
blank lines and comments above it (`_removal`), and an added import adds only its own
line, where import sorters put it (`_placement`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import libcst as cst

from scanrewrite.codemod.imports._edits import ImportEdits
from scanrewrite.codemod.imports._placement import add_import, sort_key
from scanrewrite.codemod.imports._removal import ImportRemover

__all__ = ["apply_scheduled_imports"]


def apply_scheduled_imports(
    module: cst.Module,
    edits: ImportEdits,
    first_use: int | None = None,
    dropped: Collection[int] = (),
    first_party: Collection[str] = (),
    unused: Mapping[cst.ImportAlias, cst.Import | cst.ImportFrom] | None = None,
) -> cst.Module:
    """`module` with the import additions and removals `edits` schedules made.

    As libcst's `CodemodCommand.transform_module` would make them, except that removing an
    import keeps the blank lines and comments above it (libcst's `RemoveImportsVisitor`
    drops them) and an added ``import x`` goes where import sorters put it (see
    `_placement`), before the top-level statement at index `first_use`, adding only its
    own line and the blank lines a section needs. `dropped` are the indices of the import
    lines that will be removed; `first_party` the top-level names of the user's own packages.
    `unused` are the import names that are unused once the edit is made (`unused_after_edit`,
    read off the tree before it), the same objects in `module`: only those are removed.
    """
    dropped = set(dropped)
    for name in sorted(set(edits.added), key=sort_key):
        module, index = add_import(module, name, first_use, dropped, first_party)
        if index is not None:
            first_use = None if first_use is None else first_use + 1
            dropped = {i + 1 if i >= index else i for i in dropped}
    if edits.removed:
        unused = {} if unused is None else unused
        remover = ImportRemover(edits, unused)
        remover.only_top_level(module, list(unused.values()))
        module = module.visit(remover)
    return module
