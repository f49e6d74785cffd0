"""The tuner's options table (`scanrewrite.tune._options`): one definition per option, from
which `scanrewrite-tune`'s flags, `tune()`'s keyword arguments and the table of docs/tuning.md are
made, so that they cannot disagree; each check is shown to fail where they would.

`python tests/test_tune_options.py` writes the table of docs/tuning.md again from the options."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
import re
import sys
from pathlib import Path

import click
import pytest

from scanrewrite.tune._budget import Budget
from scanrewrite.tune._command import main
from scanrewrite.tune._errors import TuneError
from scanrewrite.tune._options import (
    TUNE_OPTIONS,
    TuneOptions,
    from_flags,
    markdown_table,
    merged,
)

PAGE = Path(__file__).resolve().parents[1] / "docs" / "tuning.md"
BEGIN, END = "<!-- tune-options: made by scanrewrite.tune._options.markdown_table -->\n", "\n<!-- end tune-options -->"

#: For each option, a value it refuses and the message that says why.
INVALID = {
    "ks": ("0", "`ks`: chunk sizes are positive ints, got 0"),
    "checkpoints": ("dots", "`checkpoints`: unknown checkpoint mode 'dots'"),
    "levels": ("0", "`levels`: levels are positive ints or 'auto', got 0"),
    "keep_rewrites": ("yes", "`keep_rewrites` must be True or False, got 'yes'"),
    "repeats": (0, "`repeats` must be a positive int, got 0"),
    "warmup": (-1, "`warmup` must be a non-negative int, got -1"),
    "memory_budget": ("lots", "`memory_budget`: a memory budget is bytes"),
    "stores": ("0", "`stores`: stored steps are positive ints or 'auto', got 0"),
    "compile_threads": (0, "`compile_threads` must be a positive int, got 0"),
    "rtol": (-1.0, "`rtol` must be a non-negative number, got -1.0"),
    "atol": ("small", "`atol` must be a non-negative number, got 'small'"),
}


def _page_table(page: str) -> str:
    return page.split(BEGIN, 1)[1].split(END, 1)[0]


def test_every_option_has_an_invalid_value_here() -> None:
    assert set(INVALID) == {option.name for option in TUNE_OPTIONS}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_an_invalid_value_names_the_option(name: str) -> None:
    value, message = INVALID[name]
    with pytest.raises(TuneError) as caught:
        TuneOptions(**{name: value})
    assert str(caught.value).startswith(message)


def test_values_are_normalised_and_the_object_is_frozen_hashable_and_picklable() -> None:
    options = TuneOptions(ks="1,4", checkpoints="none,dots_saveable", levels="1,auto", stores="auto", memory_budget="1x")
    assert options.ks == (1, 4) and options.checkpoints == (False, "dots_saveable")
    assert options.levels == (1, "auto") and options.stores is None and options.memory_budget == Budget(fraction=1.0)
    assert TuneOptions(stores="").stores == () and TuneOptions(stores=[2, 2, 4]).stores == (2, 4)
    assert hash(options) == hash(TuneOptions(ks=(1, 4), checkpoints=(False, "dots_saveable"), levels=(1, "auto"),
                                             memory_budget=Budget(fraction=1.0)))  # fmt: skip
    assert pickle.loads(pickle.dumps(options)) == options
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.ks = (2,)  # type: ignore[misc]


def test_tune_takes_an_options_object_or_changes_by_name() -> None:
    base = TuneOptions(ks=(1, 4))
    assert merged(None, {}) == TuneOptions()
    assert merged(base, {"repeats": 3}) == TuneOptions(ks=(1, 4), repeats=3)
    with pytest.raises(TypeError, match="unknown option 'policies'; the options are ks, checkpoints"):
        merged(base, {"policies": "none"})


def test_tunes_signature_is_made_from_the_table() -> None:
    from scanrewrite.tune import tune

    parameters = inspect.signature(tune).parameters
    assert list(parameters)[:5] == ["fn", "args", "kwargs", "options", "progress"]
    assert {name: p.default for name, p in list(parameters.items())[5:]} == {o.name: o.default for o in TUNE_OPTIONS}


def test_the_flags_are_made_from_the_table() -> None:
    params = {param.name: param for param in main.params if isinstance(param, click.Option)}
    for option in TUNE_OPTIONS:
        for flag in option.flags:
            param = params[flag.dest]
            assert param.help.startswith((flag.help or option.help).removesuffix("."))
            assert param.is_flag == (flag.constant is not None)
    # Every flag of the command is an option's, or one of the command's own.
    own = {"diff", "write", "check", "quiet", "verbose", "color"}
    assert set(params) == {flag.dest for option in TUNE_OPTIONS for flag in option.flags} | own


def test_flags_not_given_leave_the_defaults_and_given_ones_set_the_options() -> None:
    defaults = {flag.dest: None for option in TUNE_OPTIONS for flag in option.flags} | {"keep_rewrites": False}
    assert from_flags(defaults) == TuneOptions()
    given = defaults | {"policies": ("none",), "keep_rewrites": True, "stores": (), "rtol": 0.5}
    assert from_flags(given) == TuneOptions(checkpoints=(False,), keep_rewrites=True, stores=(), rtol=0.5)
    assert TUNE_OPTIONS[1].kind.show((False, True, "dots_saveable")) == "none,checkpoint,dots_saveable"


def table_problems(page: str) -> list[str]:
    """Where the options table of a page like docs/tuning.md is not the one the options make."""
    if BEGIN not in page or END not in page:
        return ["no options table between the markers"]
    return [] if _page_table(page) == markdown_table() else ["the options table is not markdown_table()'s"]


def test_the_docs_table_is_made_from_the_options() -> None:
    page = PAGE.read_text()
    assert table_problems(page) == [], "run `python tests/test_tune_options.py` to write it again"
    # The check fails on a page whose table drifted: a default changed by hand, a row missing.
    assert table_problems(page.replace("| 1,2,3,4,6,8 |", "| 1,2,4 |"))
    rows = _page_table(page).splitlines()
    assert table_problems(page.replace(rows[-1] + "\n", ""))
    # Every flag of the command is in a table of the page.
    flags = {name for param in main.params for name in getattr(param, "opts", ()) if name.startswith("--")}
    listed = set(re.findall(r"`(--[a-z][a-z-]*)", page))
    assert flags - {"--help"} <= listed


if __name__ == "__main__":
    text = PAGE.read_text()
    head, rest = text.split(BEGIN, 1)
    PAGE.write_text(head + BEGIN + markdown_table() + END + rest.split(END, 1)[1])
    sys.exit(0)
