"""The rewrite as a libcst codemod command, for libcst's own runner::

    python -m libcst.tool codemod --no-format -x scanrewrite.codemod.ScanRewriteCommand --unroll 4 PATH
"""

from __future__ import annotations

import argparse

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile, VisitorBasedCodemodCommand
from libcst.metadata import MetadataWrapper

from scanrewrite.codemod.imports import ImportEdits
from scanrewrite.codemod._rewrite import Rewriter, check_options
from scanrewrite.codemod._rewrite import SkipFile as SkipFilePragma
from scanrewrite.targets import CHECKPOINT_POLICIES, DEFAULT_TARGETS, TARGET_NAMES, select

__all__ = ["ScanRewriteCommand"]


class ScanRewriteCommand(VisitorBasedCodemodCommand):
    """Rewrite `jax.lax.scan` and `equinox.internal.scan` calls (and, with `--targets`,
    `jax.lax.fori_loop` and `jax.lax.map` calls) to `scanrewrite.runtime`."""

    DESCRIPTION = (
        "Rewrite jax.lax.scan and equinox.internal.scan calls (--targets: also jax.lax.fori_loop "
        "and jax.lax.map) into scanrewrite.runtime's chunked, checkpointed scans with an unrolled body."
    )

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument(
            "--unroll",
            type=_positive_int,
            default=4,
            help="steps per unrolled chunk, for calls that do not pass unroll (default: 4)",
        )
        arg_parser.add_argument(
            "--checkpoint",
            choices=("none", *CHECKPOINT_POLICIES),
            default=None,
            help="write checkpoint=False ('none') or a jax.checkpoint_policies policy "
            "into each rewritten jax.lax.scan call (default: the runtime's default)",
        )
        arg_parser.add_argument(
            "--levels",
            type=_levels,
            default=None,
            help="write levels=N (a positive integer) or levels='auto' into each rewritten "
            "call but equinox.internal.scan ones: nested checkpointing (default: none written)",
        )
        arg_parser.add_argument(
            "--targets",
            type=_targets,
            default=DEFAULT_TARGETS,
            help=f"the APIs to rewrite, comma-separated, out of {', '.join(TARGET_NAMES)} "
            f"(default: {','.join(DEFAULT_TARGETS)})",
        )
        arg_parser.add_argument(
            "--line-length",
            type=_positive_int,
            default=88,
            help="the formatters' line length: a rewritten call that no longer fits is split as "
            "ruff format and black split it (default: 88)",
        )

    def __init__(
        self,
        context: CodemodContext,
        unroll: int = 4,
        checkpoint: str | None = None,
        levels: int | str | None = None,
        targets: str | tuple[str, ...] = DEFAULT_TARGETS,
        line_length: int | None = 88,
    ) -> None:
        super().__init__(context)
        check_options(unroll, checkpoint, levels, targets, line_length)
        self.unroll = unroll
        self.checkpoint = checkpoint
        self.levels = levels
        self.targets = targets
        self.line_length = line_length

    def transform_module(self, tree: cst.Module) -> cst.Module:
        """The rewrite, then the scheduled import additions and removals; each skipped
        call is also a warning. Raises `SkipFile` for a skip-file pragma."""
        # The package of the module itself is first-party, as import sorters see it.
        module_name = self.context.full_module_name
        first_party = {module_name.partition(".")[0]} if module_name else set()
        rewriter = Rewriter(
            self.unroll,
            self.checkpoint,
            ImportEdits(package=self.context.full_package_name),
            warn=self.warn,
            levels=self.levels,
            targets=self.targets,
            first_party=first_party,
            line_length=self.line_length,
        )
        try:
            return rewriter.transform(MetadataWrapper(tree))
        except SkipFilePragma as pragma:
            raise SkipFile(str(pragma)) from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _targets(text: str) -> tuple[str, ...]:
    try:
        return tuple(target.name for target in select(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _levels(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return _positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'auto', got {text!r}") from None
