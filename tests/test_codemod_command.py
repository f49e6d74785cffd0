"""`ScanRewriteCommand` as a libcst codemod: its options, warnings and libcst's own runner."""

import argparse
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from libcst.codemod import CodemodContext, TransformSkip, TransformSuccess, transform_module

from scanrewrite.codemod import ScanRewriteCommand

REPO = Path(__file__).resolve().parents[1]

SOURCE = textwrap.dedent(
    """\
    from jax import lax
    a = lax.scan(f, c, xs)
    b = lax.scan(f, c, xs, **options)
    """
)
EXPECTED = textwrap.dedent(
    """\
    import scanrewrite.runtime
    from jax import lax
    a = scanrewrite.runtime.scan(f, c, xs, unroll=3)
    b = lax.scan(f, c, xs, **options)
    """
)


def _parse_options(argv):
    parser = argparse.ArgumentParser()
    ScanRewriteCommand.add_args(parser)
    return vars(parser.parse_args(argv))


def test_add_args_defaults_match_init():
    defaults = {"unroll": 4, "checkpoint": None, "levels": None, "targets": ("lax.scan", "eqxi.scan")}
    assert _parse_options([]) == defaults
    argv = ["--unroll", "8", "--checkpoint", "dots_saveable", "--levels", "auto", "--targets", "lax.map,lax.scan"]
    assert _parse_options(argv) == {
        "unroll": 8,
        "checkpoint": "dots_saveable",
        "levels": "auto",
        "targets": ("lax.scan", "lax.map"),
    }


@pytest.mark.parametrize(
    "argv",
    [
        ["--unroll", "0"],
        ["--unroll", "x"],
        ["--checkpoint", "save_only_these_names"],
        ["--levels", "0"],
        ["--targets", "lax.fori"],
        ["--targets", ""],
    ],
)
def test_add_args_rejects_bad_values(argv, capsys):
    with pytest.raises(SystemExit):
        _parse_options(argv)
    assert "argument --" in capsys.readouterr().err


def test_libcst_transform_module_reports_warnings():
    command = ScanRewriteCommand(CodemodContext(), **_parse_options(["--unroll", "3"]))
    result = transform_module(command, SOURCE)
    assert isinstance(result, TransformSuccess)
    assert result.code == EXPECTED
    assert result.warning_messages == ["line 3: unroll may come from **kwargs"]


def test_libcst_transform_module_rewrites_the_targets_asked_for():
    source = "from jax import lax\nx = lax.fori_loop(0, 3, body, x)\ny = lax.map(f, xs)\n"
    command = ScanRewriteCommand(CodemodContext(), **_parse_options(["--targets", "lax.fori_loop"]))
    result = transform_module(command, source)
    assert isinstance(result, TransformSuccess)
    assert result.code == (
        "import scanrewrite.runtime\nfrom jax import lax\n"
        "x = scanrewrite.runtime.fori_loop(0, 3, body, x, unroll=4)\ny = lax.map(f, xs)\n"
    )


def test_libcst_transform_module_skips_file_with_pragma():
    command = ScanRewriteCommand(CodemodContext())
    result = transform_module(command, "# scanrewrite: skip-file\n" + SOURCE)
    assert isinstance(result, TransformSkip)
    assert "skip-file" in result.skip_description


def _libcst_tool(tmp_path, *argv):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "libcst.tool", "codemod", "--no-format", "--hide-progress", *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_runs_under_libcst_tool(tmp_path):
    (tmp_path / "user.py").write_text(SOURCE)
    (tmp_path / "untouched.py").write_text("import os\n")
    done = _libcst_tool(tmp_path, "-x", "scanrewrite.codemod.ScanRewriteCommand", "--unroll", "3", ".")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "user.py").read_text() == EXPECTED
    assert (tmp_path / "untouched.py").read_text() == "import os\n"
    assert "WARNING: line 3: unroll may come from **kwargs" in done.stderr
    assert "Failed to codemod 0 files" in done.stderr


def test_the_module_s_own_package_is_first_party():
    source = textwrap.dedent(
        """\
        import os

        import mypkg


        def g(c, xs):
            from jax import lax

            return lax.scan(f, c, xs), lax.cond
        """
    )
    context = CodemodContext(filename="mypkg/model.py", full_module_name="mypkg.model")
    result = transform_module(ScanRewriteCommand(context), source)
    assert isinstance(result, TransformSuccess)
    assert result.code.startswith("import os\n\nimport scanrewrite.runtime\n\nimport mypkg\n")
