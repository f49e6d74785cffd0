"""The rewrite as a libcst codemod command, for libcst's own runner::

    python -m libcst.tool codemod --no-format -x scanrewrite.codemod.ScanRewriteCommand --unroll 4 PATH
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile, VisitorBasedCodemodCommand
from libcst.metadata import MetadataWrapper

from scanrewrite.codemod.imports import ImportEdits
from scanrewrite.codemod._rewrite import Rewriter
from scanrewrite.codemod._rewrite import SkipFile as SkipFilePragma
from scanrewrite.options import OPTIONS, Kind, Options
from scanrewrite.targets import TARGETS

__all__ = ["ScanRewriteCommand"]


class ScanRewriteCommand(VisitorBasedCodemodCommand):
    """Rewrite `jax.lax.scan` and `equinox.internal.scan` calls (and, with `--targets`, those of
    the other APIs in `scanrewrite.targets`) to `scanrewrite.runtime`. Its arguments are the
    options of `scanrewrite.options.OPTIONS` that libcst's runner takes."""

    DESCRIPTION = (
        f"Rewrite {' and '.join(target.qualified_name for target in TARGETS if target.default)} calls (--targets: "
        f"also {', '.join(target.qualified_name for target in TARGETS if not target.default)}) into "
        "scanrewrite.runtime's chunked, checkpointed scans with an unrolled body."
    )

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        """One argument per option that `scanrewrite.options.OPTIONS` gives libcst's runner,
        named as the option (``--unroll``, ``--checkpoint``, ``--line-length``)."""
        for option in OPTIONS:
            if option.runner:
                default = "none written" if option.default is None else option.kind.show(option.default)
                arg_parser.add_argument(
                    f"--{option.name.replace('_', '-')}",
                    type=_argument_type(option.kind),
                    default=option.default,
                    metavar=option.kind.metavar,
                    help=f"{option.help} (default: {default})",
                )

    def __init__(self, context: CodemodContext, **options: Any) -> None:
        super().__init__(context)
        #: The options, from `add_args`' arguments or keyword arguments (see `scanrewrite.options.Options`).
        self.options = Options(**options)

    def transform_module(self, tree: cst.Module) -> cst.Module:
        """The rewrite, then the scheduled import additions and removals; each skipped
        call is also a warning. Raises `SkipFile` for a skip-file pragma."""
        # The package of the module itself is first-party, as import sorters see it.
        module_name = self.context.full_module_name
        first_party = {module_name.partition(".")[0]} if module_name else set()
        options = replace(self.options, first_party=first_party)
        rewriter = Rewriter(options, ImportEdits(package=self.context.full_package_name), warn=self.warn)
        try:
            return rewriter.transform(MetadataWrapper(tree))
        except SkipFilePragma as pragma:
            raise SkipFile(str(pragma)) from None


def _argument_type(kind: Kind) -> Callable[[str], object]:
    """`kind`'s parse, failing as argparse expects (naming the argument and why)."""

    def parse(text: str) -> object:
        try:
            return kind.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse
