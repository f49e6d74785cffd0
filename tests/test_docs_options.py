"""The pages that list options, targets and configuration keys agree with the tables they come
from (`scanrewrite.options.OPTIONS`, `scanrewrite.targets.TARGETS`, the command's parameters), and
each check is shown to fail on a page that disagrees. `--help` is made from the tables
(tests/test_options.py), so it cannot disagree."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import click
import pytest

from scanrewrite.cli import CONFIG_KEYS, main
from scanrewrite.codemod import ScanRewriteCommand
from scanrewrite.targets import ALL_POLICIES, TARGET_NAMES, select

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))]
COMMAND_LINE = (ROOT / "docs" / "command-line.md").read_text()


def _section(page: str, heading: str) -> str:
    return page.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _command_flags() -> set[str]:
    """Every long flag of `scanrewrite` but `--help`."""
    flags = set()
    for param in main.params:
        if isinstance(param, click.Option):
            flags.update(name for name in (*param.opts, *param.secondary_opts) if name.startswith("--"))
    return flags - {"--help"}


def options_table_problems(page: str) -> list[str]:
    """Where the options table of a page like docs/command-line.md disagrees with the command:
    a flag missing or unknown, a target or policy missing from its row."""
    rows = {}
    for line in _section(page, "Options").splitlines():
        cells = line.split(" | ")
        if line.startswith("| `-"):
            for flag in re.findall(r"`(--[a-z][a-z-]*)", cells[0]):
                rows[flag] = line
    problems = [f"{flag} is not in the table" for flag in sorted(_command_flags() - set(rows))]
    problems += [f"{flag} is no option of the command" for flag in sorted(set(rows) - _command_flags())]
    for flag, names in (("--targets", TARGET_NAMES), ("--policy", ALL_POLICIES)):
        problems += [f"{flag}'s row lacks `{name}`" for name in names if f"`{name}`" not in rows.get(flag, "")]
    return problems


def configuration_keys_problems(page: str) -> list[str]:
    """Where the keys a page like docs/command-line.md lists for `[tool.scanrewrite]` disagree
    with those the command reads."""
    text = " ".join(_section(page, "Configuration").split())
    listed = text.split("Keys are", 1)[1].split("The mode", 1)[0]
    keys = set(re.findall(r"`([a-z][a-z-]*)`", listed))
    problems = [f"key {key} is not listed" for key in sorted(set(CONFIG_KEYS) - keys)]
    return problems + [f"key {key} is not one the command reads" for key in sorted(keys - set(CONFIG_KEYS))]


def targets_problems(page: str) -> list[str]:
    """Every `--targets NAMES` a page writes names only known targets."""
    problems = []
    for names in re.findall(r"--targets[ =]([a-z][\w.,]*)", page):
        try:
            select(names)
        except ValueError as exc:
            problems.append(f"--targets {names}: {exc}")
    return problems


def runner_problems(page: str) -> list[str]:
    """Every libcst runner command a page writes passes arguments `ScanRewriteCommand` takes."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    ScanRewriteCommand.add_args(parser)
    problems = []
    for line in re.findall(r"-x scanrewrite\.codemod\.ScanRewriteCommand (.*)", page):
        *arguments, _path = shlex.split(line.strip("`"))
        try:
            _, unknown = parser.parse_known_args(arguments)
        except argparse.ArgumentError as exc:
            unknown = [str(exc)]
        problems += [f"the runner takes no {argument}" for argument in unknown]
    return problems


def test_the_options_table_lists_every_flag_target_and_policy() -> None:
    assert options_table_problems(COMMAND_LINE) == []


def test_the_configuration_lists_every_key() -> None:
    assert configuration_keys_problems(COMMAND_LINE) == []


@pytest.mark.parametrize("page", PAGES)
def test_the_targets_a_page_writes_exist(page: str) -> None:
    assert targets_problems((ROOT / page).read_text()) == []


@pytest.mark.parametrize("page", PAGES)
def test_the_runner_commands_a_page_writes_parse(page: str) -> None:
    assert runner_problems((ROOT / page).read_text()) == []


#: The `--targets` row of docs/command-line.md before this test (ef0277e).
STALE_TARGETS_ROW = (
    "| `--targets NAMES` | the APIs whose calls are rewritten, comma-separated, out of `lax.scan`, `eqxi.scan`, "
    "`lax.fori_loop`, `lax.map` (default `lax.scan,eqxi.scan`; add the other two for loops that are differentiated, "
    "see [the runtime](runtime.md#fori_loop-and-map-on-request)); an unknown name is an error that names the "
    "closest one |"
)


def test_the_checks_fail_on_a_page_that_disagrees() -> None:
    """The page as it was before `nnx.scan` and `linen.scan` joined its `--targets` row, with a
    flag gone, one the command does not have, and a key that is no key."""
    targets_row = next(line for line in COMMAND_LINE.splitlines() if line.startswith("| `--targets NAMES`"))
    stale = COMMAND_LINE.replace(targets_row, STALE_TARGETS_ROW)
    stale = stale.replace("| `--force-exclude` |", "| `--force-excludes` |")
    stale = stale.replace("`line-length`, ", "`line-length`, `fast`, ")
    assert options_table_problems(stale) == [
        "--force-exclude is not in the table",
        "--force-excludes is no option of the command",
        "--targets's row lacks `nnx.scan`",
        "--targets's row lacks `linen.scan`",
    ]
    assert configuration_keys_problems(stale) == ["key fast is not one the command reads"]
    assert configuration_keys_problems(stale.replace("`unroll`,", "")) == [
        "key unroll is not listed",
        "key fast is not one the command reads",
    ]
    assert targets_problems("`scanrewrite --targets lax.scan,nnx.scann src/`") == [
        "--targets lax.scan,nnx.scann: unknown target 'nnx.scann' (did you mean 'nnx.scan'?); "
        f"the targets are {', '.join(TARGET_NAMES)}"
    ]
    runner = "python -m libcst.tool codemod -x scanrewrite.codemod.ScanRewriteCommand --no-checkpoint src/"
    assert runner_problems(runner) == ["the runner takes no --no-checkpoint"]
