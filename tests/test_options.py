"""The options table (`scanrewrite.options`): one definition per option, from which the command
line's flags, the `[tool.scanrewrite]` keys, libcst's runner's arguments and the check of every
value passed to the transform are all made, so that they cannot disagree."""

from __future__ import annotations

import argparse
import dataclasses
import pickle
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from scanrewrite.cli import CONFIG_KEYS, PER_RUN, main
from scanrewrite.codemod import ScanRewriteCommand, revert, rewrite
from scanrewrite.mode import Mode
from scanrewrite.notebook import rewrite_notebook
from scanrewrite.options import OPTIONS, Flag, Option, Options, merged
from scanrewrite.targets import ALL_POLICIES, TARGET_NAMES

SCAN = "import jax\n\n\ndef f(c, xs):\n    return jax.lax.scan(step, c, xs)\n"

#: For each option, a value it refuses and the message (without the option's name) that says why.
INVALID = {
    "unroll": (0, "must be a positive integer, got 0"),
    "checkpoint": ("dots_savable", "must be 'none' or one of "),
    "levels": (0, "must be a positive integer or 'auto', got 0"),
    "targets": ("lax.mapp", "unknown target 'lax.mapp' (did you mean 'lax.map'?)"),
    "line_length": (0, "must be a positive integer or None, got 0"),
    "first_party": ("pkg", "must be a collection of names, got 'pkg'"),
}


def test_every_option_has_an_invalid_value_here() -> None:
    assert set(INVALID) == {option.name for option in OPTIONS}


# --- the options object ----------------------------------------------------------------------------


def test_options_are_frozen_hashable_and_picklable() -> None:
    options = Options(unroll=8, targets="lax.map,lax.scan", first_party=["pkg"])
    # Normalised as they are checked: the table's order, a frozenset.
    assert options.targets == ("lax.scan", "lax.map")
    assert options.first_party == frozenset({"pkg"})
    assert pickle.loads(pickle.dumps(Mode(options))) == Mode(options)
    assert hash(options) == hash(Options(unroll=8, targets=("lax.scan", "lax.map"), first_party={"pkg"}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.unroll = 2  # type: ignore[misc]


def test_the_fields_are_the_table() -> None:
    assert [field.name for field in dataclasses.fields(Options)] == [option.name for option in OPTIONS]
    assert Options() == Options(**{option.name: option.default for option in OPTIONS})


@pytest.mark.parametrize("name", sorted(INVALID))
def test_an_invalid_value_names_the_option(name: str) -> None:
    value, message = INVALID[name]
    with pytest.raises(ValueError, match=r"^`" + name + r"`:? ") as caught:
        Options(**{name: value})
    assert message in str(caught.value)
    # The same check, wherever the options come in.
    with pytest.raises(ValueError, match=name):
        rewrite(SCAN.encode(), **{name: value})
    with pytest.raises(ValueError, match=name):
        dataclasses.replace(Options(), **{name: value})


def test_an_unknown_option_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="unknown option 'unrol'; the options are unroll, checkpoint"):
        rewrite(SCAN.encode(), unrol=8)
    with pytest.raises(TypeError, match="unknown option 'unrol'"):
        merged(Options(), {"unrol": 8})


# --- the call forms of the transforms: before (keywords) and after (an Options) give the same ------


@pytest.mark.parametrize(
    "keywords",
    [
        pytest.param({}, id="defaults"),
        pytest.param({"unroll": 8, "checkpoint": "dots_saveable", "levels": "auto"}, id="all written"),
        pytest.param({"checkpoint": "none", "line_length": 20}, id="laid out"),
    ],
)
def test_keywords_and_an_options_object_are_the_same_call(keywords: dict[str, object]) -> None:
    by_keywords = rewrite(SCAN.encode(), **keywords)
    assert rewrite(SCAN.encode(), Options(**keywords)) == by_keywords
    # Keywords change the object they come with.
    assert rewrite(SCAN.encode(), Options(unroll=3), **keywords) == rewrite(SCAN.encode(), **{"unroll": 3, **keywords})
    assert revert(by_keywords.code, Options(**keywords)) == revert(by_keywords.code, **keywords)


def test_the_notebook_rewrite_takes_the_same_options() -> None:
    import json

    cell = {"cell_type": "code", "execution_count": None, "id": "a", "metadata": {}, "outputs": [], "source": SCAN}
    notebook = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    source = json.dumps(notebook, indent=1).encode()
    by_keywords = rewrite_notebook(source, unroll=7)
    assert by_keywords.changed and "unroll=7" in by_keywords.changes[0].after
    assert rewrite_notebook(source, Options(unroll=7)) == by_keywords


# --- what the table makes: the command line, its configuration, libcst's runner --------------------


def _command_options() -> dict[str, click.Option]:
    return {param.name: param for param in main.params if isinstance(param, click.Option)}


def test_the_command_line_flags_come_from_the_table() -> None:
    params = _command_options()
    for option in OPTIONS:
        for flag in option.flags:
            param = params[flag.dest]
            assert param.opts == [f"--{flag.name}"]
            assert (flag.help or option.help).removesuffix(".") in param.help
            assert param.is_flag == (flag.constant is not None)
    made = {flag.dest for option in OPTIONS for flag in option.flags}
    # The other flags are the run's own, none of them sets what the rewrite writes.
    assert made <= set(params)
    assert not made & {"exclude", "extend_exclude", "force_exclude", "jobs", "quiet", "verbose", "color"}


def test_the_configuration_keys_come_from_the_command_line() -> None:
    flags = {flag.name: flag.dest for option in OPTIONS for flag in option.flags}
    assert flags.items() <= CONFIG_KEYS.items()
    exposed = {name for name, param in _command_options().items() if param.expose_value}
    assert set(CONFIG_KEYS.values()) == exposed - PER_RUN


def test_the_runner_arguments_come_from_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    ScanRewriteCommand.add_args(parser)
    arguments = {action.dest: action for action in parser._actions if action.dest != "help"}
    runner = [option for option in OPTIONS if option.runner]
    assert list(arguments) == [option.name for option in runner]
    for option in runner:
        assert arguments[option.name].default == option.default
        assert arguments[option.name].help.startswith(option.help)
    assert "first_party" not in arguments  # the runner's own: the module's package
    assert vars(parser.parse_args([])) == {option.name: option.default for option in runner}


@pytest.mark.parametrize("name", sorted(option.name for option in OPTIONS if option.runner))
def test_the_runner_refuses_what_the_table_refuses(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    value, message = INVALID[name]
    parser = argparse.ArgumentParser()
    ScanRewriteCommand.add_args(parser)
    with pytest.raises(SystemExit):
        parser.parse_args([f"--{name.replace('_', '-')}", str(value)])
    assert f"argument --{name.replace('_', '-')}: {message}" in capsys.readouterr().err


def _invoke(*args: str) -> click.testing.Result:
    return CliRunner().invoke(main, [*args, "-j1", "a.py"], catch_exceptions=False)


@pytest.mark.parametrize(
    ("option", "flag"),
    [(option, flag) for option in OPTIONS for flag in option.flags if flag.constant is None],
    ids=lambda each: each.name,
)
def test_an_invalid_value_in_the_configuration_or_on_the_command_line_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: Option, flag: Flag
) -> None:
    """The file, the key and the cause (the table's) on one line, exit 2, nothing written; and
    the flag refuses the same value for the same cause."""
    monkeypatch.chdir(tmp_path)
    value = INVALID[option.name][0]
    with pytest.raises(ValueError) as caught:
        (flag.kind or option.kind).check(value)
    (tmp_path / "pyproject.toml").write_text(f"[tool.scanrewrite]\n{flag.name} = {value!r}\n")
    (tmp_path / "a.py").write_text(SCAN)
    result = _invoke()
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: pyproject.toml: [tool.scanrewrite] {flag.name}: {caught.value}\n",
    )
    assert (tmp_path / "a.py").read_text() == SCAN
    (tmp_path / "pyproject.toml").unlink()
    result = _invoke(f"--{flag.name}", str(value))
    assert result.exit_code == 2
    assert f"Invalid value for '--{flag.name}': {caught.value}" in result.stderr
    assert (tmp_path / "a.py").read_text() == SCAN


def test_an_unknown_configuration_key_still_warns_with_the_closest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.scanrewrite]\nno_checkpoint = true\nline_length = 100\n")
    (tmp_path / "a.py").write_text(SCAN)
    result = _invoke()
    assert result.exit_code == 0
    assert result.stderr.splitlines()[:2] == [
        "warning: pyproject.toml: unknown key 'no_checkpoint' in [tool.scanrewrite] (did you mean 'no-checkpoint'?)",
        "warning: pyproject.toml: unknown key 'line_length' in [tool.scanrewrite] (did you mean 'line-length'?)",
    ]


def test_help_lists_every_flag_target_and_policy() -> None:
    text = " ".join(CliRunner().invoke(main, ["--help"], terminal_width=1000).output.split())
    for option in OPTIONS:
        for flag in option.flags:
            assert f"--{flag.name}" in text
    for name in (*TARGET_NAMES, *ALL_POLICIES):
        assert name in text


def test_the_table_is_pure_data() -> None:
    """Importing it loads neither click, libcst nor jax: the codemod and libcst's runner read it."""
    import subprocess
    import sys

    code = "import sys, scanrewrite.options; print(sorted({'click', 'libcst', 'jax'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"
