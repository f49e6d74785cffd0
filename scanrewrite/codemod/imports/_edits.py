"""The import edits a transform schedules while it rewrites, made once it is done.

What libcst's `AddImportsVisitor.add_needed_import` and `RemoveImportsVisitor.remove_unused_import`
keep in a codemod context's scratch, kept here instead: importing anything of `libcst.codemod`
imports `libcst.matchers`, whose import costs more than parsing a 1,000-line file, and the
command line never needs libcst's codemod framework.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ImportEdits"]


@dataclass
class ImportEdits:
    """The imports to add and the ones to remove if nothing uses them any more."""

    #: The package of the module edited (``a.b`` for ``a/b/c.py``), which a relative import
    #: is relative to; None where it is not known.
    package: str | None = None
    #: The modules to ``import``, in the order asked for, each once or more.
    added: list[str] = field(default_factory=list)
    #: (module, imported name or None for ``import module``, alias or None), as libcst's
    #: `RemoveImportsVisitor.remove_unused_import` takes them.
    removed: list[tuple[str, str | None, str | None]] = field(default_factory=list)

    def add(self, module: str) -> None:
        """Schedule ``import module``; it is added where nothing imports it yet."""
        self.added.append(module)

    def remove(self, module: str, obj: str | None = None, asname: str | None = None) -> None:
        """Schedule the removal of ``import module [as asname]`` (`obj` None) or of
        ``from module import obj [as asname]``, which is made only where nothing uses it."""
        self.removed.append((module, obj, asname))
