"""The `scanrewrite` command through click's `CliRunner`: modes, exit codes, options, config, safety.

Runs use `-j1` (in this process): the process pool is exercised by real subprocesses in
`test_cli_subprocess.py`, so this test process never forks.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from scanrewrite import __version__
from scanrewrite.cli import main
from scanrewrite.codemod import rewrite
from scanrewrite.per_file import Task, process_file
from scanrewrite.files import Source
from scanrewrite.mode import Mode, WriteBack

SCAN = """\
import jax


def step(carry, x):
    return carry + x, carry


out = jax.lax.scan(step, 0, None, length=3)
"""
TWO_SCANS = SCAN + "again = jax.lax.scan(step, 1, None, length=5)\n"
PLAIN = "x = 1\n"
BROKEN = "def broken(:\n    jax.lax.scan(step, 0, None, length=3)\n"
SKIPPED = SCAN + "kept = jax.lax.scan(step, 0, None, length=3, **options)\n"
#: The line said before the summary of a run that rewrote something, in a project with no
#: `pyproject.toml` (see `test_cli_dependencies.py`).
NOTE = "note: the rewritten code imports scanrewrite.runtime: add scanrewrite[runtime] to the project's dependencies"
WOULD_NOTE = NOTE.replace(" imports ", " would import ")


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)


def invoke(*args: str, input: bytes | None = None) -> Result:
    return CliRunner().invoke(main, ["-j1", *args], input=input, catch_exceptions=False)


@functools.lru_cache(maxsize=None)
def _rewritten(source: bytes, unroll: int, checkpoint: str | None) -> bytes:
    return rewrite(source, unroll=unroll, checkpoint=checkpoint).code


def rewritten(source: str | bytes, unroll: int = 4, checkpoint: str | None = None) -> bytes:
    """What the rewrite itself makes of `source` (cached: each rewrite takes a while)."""
    return _rewritten(source.encode() if isinstance(source, str) else source, unroll, checkpoint)


# --- modes and exit codes -------------------------------------------------------------------


def test_in_place_rewrites_and_exits_0(project: Path) -> None:
    write(project, {"src/a.py": TWO_SCANS, "src/b.py": PLAIN})
    result = invoke("src")
    assert result.exit_code == 0
    assert (project / "src/a.py").read_bytes() == rewritten(TWO_SCANS)
    assert b"scanrewrite.runtime.scan(step, 0, None, length=3, unroll=4)" in (project / "src/a.py").read_bytes()
    assert (project / "src/b.py").read_text() == PLAIN
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "rewritten src/a.py",
        NOTE,
        "1 file rewritten (2 scan calls), 1 left unchanged",
    ]


def test_nothing_to_do_exits_0(project: Path) -> None:
    write(project, {"a.py": PLAIN})
    result = invoke(".")
    assert (result.exit_code, result.stderr) == (0, "1 file left unchanged\n")


@pytest.mark.parametrize(("args", "code"), [(["--check"], 1), (["--diff"], 0), (["--check", "--diff"], 1)])
def test_check_and_diff_write_nothing(project: Path, args: list[str], code: int) -> None:
    write(project, {"a.py": SCAN, "b.py": PLAIN})
    result = invoke(*args, ".")
    assert result.exit_code == code
    assert (project / "a.py").read_text() == SCAN
    assert result.stderr.splitlines() == [
        "would rewrite a.py",
        WOULD_NOTE,
        "1 file would be rewritten (1 scan call), 1 would be left unchanged",
    ]
    assert (result.stdout.startswith("--- a/a.py\n+++ b/a.py\n@@ ")) == ("--diff" in args)
    assert ("-out = jax.lax.scan(step, 0, None, length=3)\n" in result.stdout) == ("--diff" in args)


@pytest.mark.parametrize("apply", [["git", "apply", "-"], ["patch", "-p1"]], ids=["git-apply", "patch"])
def test_the_patch_of_a_file_outside_the_current_folder_applies_from_the_root(
    project: Path, tmp_path_factory: pytest.TempPathFactory, apply: list[str]
) -> None:
    # Named by its absolute path, it was `--- a//tmp/...`, which `git apply` rejects.
    outside = tmp_path_factory.mktemp("outside") / "x.py"
    outside.write_text(SCAN)
    result = invoke("--diff", str(outside))
    assert result.exit_code == 0, result.output
    name = outside.resolve().as_posix().lstrip("/")
    assert result.stdout.startswith(f"--- a/{name}\n+++ b/{name}\n@@ ")
    if shutil.which(apply[0]) is None:
        pytest.skip(f"{apply[0]} is not installed")
    subprocess.run(apply, input=result.stdout.encode(), cwd="/", check=True, capture_output=True)
    assert outside.read_bytes() == rewritten(SCAN)


@pytest.mark.parametrize("args", [[], ["--check"], ["--diff"], ["--check", "--diff"]])
def test_every_mode_exits_0_when_nothing_would_change(project: Path, args: list[str]) -> None:
    write(project, {"a.py": rewritten(SCAN), "b.py": PLAIN})
    result = invoke(*args, ".")
    assert (result.exit_code, result.stdout) == (0, "")
    assert result.stderr == ("2 files left unchanged\n" if not args else "2 files would be left unchanged\n")


@pytest.mark.parametrize("args", [[], ["--check"], ["--diff"], ["--check", "--diff"]])
def test_a_syntax_error_among_good_files(project: Path, args: list[str]) -> None:
    write(project, {"a.py": SCAN, "bad.py": BROKEN, "c.py": TWO_SCANS})
    result = invoke(*args, ".")
    assert result.exit_code == 2
    error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and re.fullmatch(r"error: bad\.py:\d+: cannot parse: .+", error[0])
    assert (project / "bad.py").read_text() == BROKEN
    assert "Traceback" not in result.stderr
    if not args:
        assert (project / "a.py").read_bytes() == rewritten(SCAN)
        assert (project / "c.py").read_bytes() == rewritten(TWO_SCANS)
    assert result.stderr.splitlines()[-1].endswith(", 1 file failed")


def test_a_file_without_scan_is_not_parsed(project: Path) -> None:
    # The byte check: no "scan" in the file, so it cannot change, and is not parsed.
    write(project, {"odd.py": "def broken(:\n"})
    result = invoke("odd.py")
    assert (result.exit_code, result.stderr) == (0, "1 file left unchanged\n")


def test_idempotent(project: Path) -> None:
    write(project, {"a.py": TWO_SCANS, "b.py": SKIPPED})
    assert invoke(".").exit_code == 0
    first = {name: (project / name).read_bytes() for name in ("a.py", "b.py")}
    again = invoke(".")
    assert again.exit_code == 0
    assert again.stderr.splitlines()[-1] == "2 files left unchanged, 1 call skipped"
    assert {name: (project / name).read_bytes() for name in ("a.py", "b.py")} == first
    assert invoke("--check", ".").exit_code == 0


# --- what is preserved -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(SCAN.replace("\n", "\r\n").encode(), id="CRLF"),
        pytest.param(b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + SCAN.encode(), id="latin-1 cookie"),
        pytest.param(b"\xef\xbb\xbf# caf\xc3\xa9\n" + SCAN.encode(), id="UTF-8 BOM"),
        pytest.param(SCAN.replace("    return", "\treturn").encode(), id="tabs"),
    ],
)
def test_bytes_are_preserved(project: Path, source: bytes) -> None:
    write(project, {"a.py": source})
    assert invoke("a.py").exit_code == 0
    after = (project / "a.py").read_bytes()
    assert after == rewritten(source)
    assert b"unroll=4" in after
    for kept in (b"# caf\xe9\n", b"# caf\xc3\xa9\n", b"\treturn carry + x, carry"):
        assert (kept in source) == (kept in after)
    if source.startswith(b"\xef\xbb\xbf"):
        assert after.startswith(b"\xef\xbb\xbf") and after.count(b"\xef\xbb\xbf") == 1
    if b"\r\n" in source:
        assert after.count(b"\n") == after.count(b"\r\n")


def test_file_mode_is_preserved(project: Path) -> None:
    write(project, {"tool.py": "#!/usr/bin/env python\n" + SCAN})
    (project / "tool.py").chmod(0o755)
    assert invoke("tool.py").exit_code == 0
    assert b"unroll=4" in (project / "tool.py").read_bytes()
    assert stat.S_IMODE((project / "tool.py").stat().st_mode) == 0o755
    assert sorted(path.name for path in project.iterdir()) == [".git", "tool.py"]


# --- files that cannot be used ----------------------------------------------------------------


def test_non_utf8_without_cookie(project: Path) -> None:
    write(project, {"latin.py": b"x = 1\n# caf\xe9\n" + SCAN.encode(), "a.py": SCAN})
    result = invoke(".")
    assert result.exit_code == 2
    assert "error: latin.py:2: cannot decode as utf-8 (no coding cookie): " in result.stderr
    assert (project / "latin.py").read_bytes().startswith(b"x = 1\n# caf\xe9\n")
    assert b"unroll=4" in (project / "a.py").read_bytes()


def test_unreadable_files(project: Path) -> None:
    # Running as root, permission bits do not stop a read; a FIFO and a dangling link do.
    write(project, {"a.py": SCAN})
    os.mkfifo(project / "pipe.py")
    (project / "gone.py").symlink_to(project / "missing.py")
    result = invoke("pipe.py", "gone.py", "a.py")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[:3] == [
        "error: pipe.py: cannot read: not a regular file",
        "error: gone.py: cannot read: No such file or directory",
        "rewritten a.py",
    ]
    assert result.stderr.splitlines()[-1] == "1 file rewritten (1 scan call), 2 files failed"


def test_file_changed_on_disk_between_read_and_write(project: Path) -> None:
    write(project, {"a.py": "# edited meanwhile\n" + SCAN})
    stale = Task(Source((project / "a.py").resolve(), "a.py"), SCAN.encode())
    result = process_file(stale, Mode(), WriteBack.YES)
    assert result.error == (None, "changed on disk since it was read; not overwritten")
    assert (project / "a.py").read_text() == "# edited meanwhile\n" + SCAN


def test_symlink_out_of_the_tree_is_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {"outside/lib.py": SCAN, "proj/pyproject.toml": "", "proj/a.py": SCAN})
    (tmp_path / "proj" / "link.py").symlink_to(tmp_path / "outside" / "lib.py")
    (tmp_path / "proj" / "linkdir").symlink_to(tmp_path / "outside")
    monkeypatch.chdir(tmp_path / "proj")
    result = invoke("-vv", ".", "link.py")
    assert result.exit_code == 0
    assert (tmp_path / "outside" / "lib.py").read_text() == SCAN
    assert b"unroll=4" in (tmp_path / "proj" / "a.py").read_bytes()
    assert "link.py: ignored (symbolic link out of the project root)" in result.stderr
    assert "linkdir: ignored (symbolic link out of the project root)" in result.stderr


# --- discovery options -------------------------------------------------------------------------


def test_gitignore_is_respected(project: Path) -> None:
    write(project, {".gitignore": "generated/\nscratch.py\n", "generated/g.py": SCAN, "scratch.py": SCAN, "a.py": SCAN})
    assert invoke(".").exit_code == 0
    assert (project / "generated/g.py").read_text() == SCAN
    assert (project / "scratch.py").read_text() == SCAN
    assert b"unroll=4" in (project / "a.py").read_bytes()


def test_default_excludes_and_exclude_options(project: Path) -> None:
    write(project, {"build/b.py": SCAN, "gen/g.py": SCAN, "x_pb2.py": SCAN, "a.py": SCAN})
    assert invoke("--check", "--extend-exclude", r"_pb2\.py$", ".").stderr.splitlines()[:-2] == [
        "would rewrite a.py",
        "would rewrite gen/g.py",
    ]
    assert invoke("--check", "--exclude", "/gen/", ".").stderr.splitlines()[:-2] == [
        "would rewrite a.py",
        "would rewrite build/b.py",
        "would rewrite x_pb2.py",
    ]


def test_force_exclude_applies_to_named_files(project: Path) -> None:
    write(project, {".gitignore": "ignored.py\n", "build/b.py": SCAN, "ignored.py": SCAN, "a.py": SCAN})
    named = ("build/b.py", "ignored.py", "a.py")
    assert invoke("--check", *named).stderr.splitlines()[-1].startswith("3 files would be rewritten")
    result = invoke("--check", "--force-exclude", "-v", *named)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].startswith("1 file would be rewritten")
    assert "build/b.py: ignored (matches --exclude)" in result.stderr
    assert "ignored.py: ignored (matches .gitignore)" in result.stderr


# --- stdin ------------------------------------------------------------------------------------


def test_stdin_in_place_writes_the_result_to_stdout(project: Path) -> None:
    result = invoke("-", input=SCAN.encode())
    assert result.exit_code == 0
    assert result.stdout_bytes == rewritten(SCAN)
    assert result.stderr.splitlines() == ["rewritten <stdin>", NOTE, "1 file rewritten (1 scan call)"]


def test_stdin_unchanged_is_echoed(project: Path) -> None:
    result = invoke("-", input=b"x = 1\r\n")
    assert (result.exit_code, result.stdout_bytes) == (0, b"x = 1\r\n")


@pytest.mark.parametrize(("args", "code"), [(["--check"], 1), (["--diff"], 0), (["--check", "--diff"], 1)])
def test_stdin_check_and_diff(project: Path, args: list[str], code: int) -> None:
    result = invoke(*args, "--stdin-filename", "src/m.py", "-", input=SCAN.encode())
    assert result.exit_code == code
    assert result.stdout.startswith("--- a/src/m.py\n+++ b/src/m.py\n") == ("--diff" in args)
    assert (result.stdout == "") == ("--diff" not in args)


def test_stdin_errors(project: Path) -> None:
    result = invoke("-", input=BROKEN.encode())
    assert result.exit_code == 2
    assert result.stdout == ""
    assert re.match(r"error: <stdin>:\d+: cannot parse: ", result.stderr)


def test_stdin_filename_with_force_exclude_echoes_the_input(project: Path) -> None:
    result = invoke("--force-exclude", "--stdin-filename", "build/x.py", "-", input=SCAN.encode())
    assert (result.exit_code, result.stdout) == (0, SCAN)


def test_stdin_filename_locates_the_configuration(project: Path) -> None:
    write(project, {"sub/pyproject.toml": "[tool.scanrewrite]\nunroll = 7\n"})
    result = invoke("--stdin-filename", "sub/m.py", "-", input=SCAN.encode())
    assert result.stdout_bytes == rewritten(SCAN, unroll=7)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-", "a.py"], "'-' (stdin) cannot be combined with other paths"),
        (["--stdin-filename", "x.py", "a.py"], "--stdin-filename needs '-' among the paths"),
    ],
)
def test_stdin_usage_errors(project: Path, args: list[str], message: str) -> None:
    write(project, {"a.py": SCAN})
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert (project / "a.py").read_text() == SCAN


# --- rewrite options -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "options"),
    [
        (["--unroll", "8"], {"unroll": 8}),
        (["--no-checkpoint"], {"checkpoint": "none"}),
        (["--policy", "dots_saveable"], {"checkpoint": "dots_saveable"}),
        (["--unroll", "2", "--policy", "nothing_saveable"], {"unroll": 2, "checkpoint": "nothing_saveable"}),
        (["--policy", "reductions_saveable"], {"checkpoint": "reductions_saveable"}),
    ],
)
def test_rewrite_options(project: Path, args: list[str], options: dict[str, object]) -> None:
    write(project, {"a.py": SCAN})
    assert invoke(*args, "a.py").exit_code == 0
    assert (project / "a.py").read_bytes() == rewritten(SCAN, **options)
    assert (project / "a.py").read_bytes() != rewritten(SCAN)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--unroll", "0"], "Invalid value for '--unroll'"),
        (["--unroll", "many"], "Invalid value for '--unroll'"),
        (["--policy", "save_anything"], "Invalid value for '--policy'"),
        (["--policy", "dots_saveable", "--no-checkpoint"], "--policy and --no-checkpoint cannot be used together"),
        (["-q", "-v"], "--quiet and --verbose cannot be used together"),
        (["--jobs", "0"], "Invalid value for '-j' / '--jobs'"),
        (["--exclude", "("], "not a valid regular expression"),
        (["--bogus"], "No such option"),  # click 8.2.0 adds ': --bogus', later releases " '--bogus'"
    ],
)
def test_bad_options_exit_2_and_touch_nothing(project: Path, args: list[str], message: str) -> None:
    write(project, {"a.py": SCAN})
    result = invoke(*args, "a.py")
    assert result.exit_code == 2
    assert message in result.stderr
    assert (project / "a.py").read_text() == SCAN


@pytest.mark.parametrize("mode", [[], ["--check"], ["--diff"]])
def test_verbose_names_every_call_and_very_verbose_every_file(project: Path, mode: list[str]) -> None:
    write(project, {"a.py": SKIPPED, "b.py": PLAIN, "c.py": PLAIN, ".gitignore": "d.py\n", "d.py": SCAN})
    would = bool(mode)
    rewritten, skipped = ("would rewrite", "would skip") if would else ("rewritten", "skipped")
    result = invoke("-v", *mode, ".")
    assert result.stderr.splitlines() == [
        "project root: .; configuration: none",
        f"a.py:8: {rewritten}",
        f"a.py:9: {skipped} (unroll may come from **kwargs)",
        # `import jax` stays: the skipped call uses it.
        f"a.py:2: {'would add' if would else 'added'} 'import scanrewrite.runtime'",
        f"{'would rewrite' if would else 'rewritten'} a.py",
        WOULD_NOTE if would else NOTE,
        (
            "1 file would be rewritten (1 scan call), 2 would be left unchanged, 1 call would be skipped"
            if would
            else "1 file rewritten (1 scan call), 2 left unchanged, 1 call skipped"
        ),
    ]
    write(project, {"a.py": SKIPPED})
    lines = invoke("-vv", *mode, ".").stderr.splitlines()
    unchanged = "would be left unchanged" if would else "left unchanged"
    # -vv adds each path left out (folders and Python files only) and each file left unchanged.
    assert lines[1:3] == [".git: ignored (matches --exclude)", "d.py: ignored (matches .gitignore)"]
    assert lines[7:9] == [f"b.py: {unchanged}", f"c.py: {unchanged}"]
    assert len(lines) == 11


def test_verbosity_from_the_configuration(project: Path) -> None:
    write(project, {"a.py": SKIPPED, "b.py": PLAIN})
    for setting, calls, files in [("true", True, False), ("1", True, False), ("2", True, True), ("false", False, False)]:
        write(project, {"pyproject.toml": f"[tool.scanrewrite]\nverbose = {setting}\n"})
        lines = invoke("--check", ".").stderr.splitlines()
        assert ("a.py:8: would rewrite" in lines, "b.py: would be left unchanged" in lines) == (calls, files), setting
    write(project, {"pyproject.toml": "[tool.scanrewrite]\nverbose = -1\n"})
    assert invoke("--check", ".").exit_code == 2


def test_quiet_prints_nothing_but_errors(project: Path) -> None:
    write(project, {"a.py": SCAN, "bad.py": BROKEN})
    result = invoke("-q", ".")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: bad.py:") and len(result.stderr.splitlines()) == 1


def test_color(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(project, {"a.py": SCAN})
    assert "\x1b[" not in invoke("--diff", "a.py").output
    colored = invoke("--diff", "--color", "a.py")
    assert "\x1b[31m-out = jax.lax.scan" in colored.stdout
    assert "\x1b[1m" in colored.stderr
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in invoke("--diff", "a.py").output
    assert "\x1b[" in invoke("--diff", "--color", "a.py").output


def test_version() -> None:
    result = invoke("--version")
    assert (result.exit_code, result.stdout) == (0, f"scanrewrite {__version__}\n")


def test_no_paths_is_nothing_to_do(project: Path) -> None:
    result = invoke()
    assert (result.exit_code, result.stderr) == (0, "no paths given; nothing to do\n")


# --- configuration -------------------------------------------------------------------------------


def test_pyproject_configures_and_the_command_line_wins(project: Path) -> None:
    write(project, {"pyproject.toml": "[tool.scanrewrite]\nunroll = 8\npolicy = 'dots_saveable'\n", "src/a.py": SCAN})
    assert invoke("src/a.py").exit_code == 0
    assert (project / "src/a.py").read_bytes() == rewritten(SCAN, unroll=8, checkpoint="dots_saveable")
    write(project, {"src/a.py": SCAN})
    assert invoke("--unroll", "3", "--no-checkpoint", "src/a.py").exit_code == 0
    assert (project / "src/a.py").read_bytes() == rewritten(SCAN, unroll=3, checkpoint="none")


def test_nearest_pyproject_walking_up_from_the_paths(project: Path) -> None:
    write(project, {"pyproject.toml": "[tool.scanrewrite]\nunroll = 8\n"})
    write(project, {"sub/pyproject.toml": "[tool.scanrewrite]\nunroll = 5\n", "sub/pkg/a.py": SCAN, "b.py": SCAN})
    invoke("sub/pkg")
    assert (project / "sub/pkg/a.py").read_bytes() == rewritten(SCAN, unroll=5)
    invoke("b.py")
    assert (project / "b.py").read_bytes() == rewritten(SCAN, unroll=8)


def test_config_option_names_the_file(project: Path) -> None:
    write(project, {"pyproject.toml": "[tool.scanrewrite]\nunroll = 8\n", "other.toml": "[tool.scanrewrite]\nunroll = 6\n"})
    write(project, {"a.py": SCAN})
    invoke("--config", "other.toml", "a.py")
    assert (project / "a.py").read_bytes() == rewritten(SCAN, unroll=6)


def test_config_excludes_and_flags(project: Path) -> None:
    toml = "[tool.scanrewrite]\nextend-exclude = '''\n_pb2\\.py$  # generated\n'''\nforce-exclude = true\nquiet = true\n"
    write(project, {"pyproject.toml": toml, "x_pb2.py": SCAN, "a.py": SCAN})
    result = invoke("--check", "x_pb2.py", "a.py")
    assert (result.exit_code, result.stderr) == (1, "")
    assert invoke("--check", "-v", "x_pb2.py").stderr.splitlines()[1] == "x_pb2.py: ignored (matches --extend-exclude)"


def test_policy_in_config_yields_to_no_checkpoint_on_the_command_line(project: Path) -> None:
    write(project, {"pyproject.toml": "[tool.scanrewrite]\npolicy = 'dots_saveable'\n", "a.py": SCAN})
    assert invoke("--no-checkpoint", "a.py").exit_code == 0
    assert (project / "a.py").read_bytes() == rewritten(SCAN, checkpoint="none")


def test_a_runtime_policy_from_config_is_written_without_jax_and_reverted(project: Path) -> None:
    write(project, {"pyproject.toml": "[tool.scanrewrite]\npolicy = 'reductions_saveable'\n", "a.py": SCAN})
    assert invoke("a.py").exit_code == 0
    text = (project / "a.py").read_text()
    assert "checkpoint=scanrewrite.runtime.reductions_saveable" in text
    # The policy reads no `jax`: the import the scan used goes with it.
    assert "import jax\n" not in text
    result = invoke("--revert", "-v", "a.py")
    dropped = "dropped checkpoint=scanrewrite.runtime.reductions_saveable: memory as jax.lax.scan's again"
    assert f"a.py:8: reverted ({dropped})" in result.stderr.splitlines()
    assert (project / "a.py").read_text() == SCAN


def test_unknown_config_keys_warn_with_a_suggestion(project: Path) -> None:
    toml = "[tool.scanrewrite]\nunrol = 8\nextend_exclude = 'x'\nfrobnicate = 1\n"
    write(project, {"pyproject.toml": toml, "a.py": SCAN})
    result = invoke("a.py")
    assert result.exit_code == 0
    assert result.stderr.splitlines()[:3] == [
        "warning: pyproject.toml: unknown key 'unrol' in [tool.scanrewrite] (did you mean 'unroll'?)",
        "warning: pyproject.toml: unknown key 'extend_exclude' in [tool.scanrewrite] (did you mean 'extend-exclude'?)",
        "warning: pyproject.toml: unknown key 'frobnicate' in [tool.scanrewrite]",
    ]
    assert (project / "a.py").read_bytes() == rewritten(SCAN)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("unroll = 0", "error: pyproject.toml: [tool.scanrewrite] unroll: must be a positive integer, got 0\n"),
        ("unroll = true", "error: pyproject.toml: [tool.scanrewrite] unroll: expected a value, not true/false"),
        (
            "policy = 'dots_savable'",
            "error: pyproject.toml: [tool.scanrewrite] policy: must be one of checkpoint_dots, "
            "checkpoint_dots_with_no_batch_dims, dots_saveable, dots_with_no_batch_dims_saveable, everything_saveable, "
            "nothing_saveable, reductions_saveable, dots_with_no_batch_dims_and_reductions_saveable, "
            "dots_and_reductions_saveable; got 'dots_savable' (did you mean 'dots_saveable'?)\n",
        ),
        ("exclude = '('", "error: pyproject.toml: [tool.scanrewrite] exclude: not a valid regular expression"),
        ("force-exclude = 'yes please'", "error: pyproject.toml: [tool.scanrewrite] force-exclude: expected true or false"),
        ("unroll = = 3", "error: pyproject.toml:2: invalid TOML: "),
        ("policy = 'dots_saveable'\nno-checkpoint = true", "--policy and --no-checkpoint cannot be used together"),
    ],
)
def test_bad_config_values_exit_2(project: Path, setting: str, message: str) -> None:
    write(project, {"pyproject.toml": f"[tool.scanrewrite]\n{setting}\n", "a.py": SCAN})
    result = invoke("a.py")
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert (project / "a.py").read_text() == SCAN


def test_missing_config_file_exits_2(project: Path) -> None:
    write(project, {"a.py": SCAN})
    result = invoke("--config", "nope.toml", "a.py")
    assert result.exit_code == 2
    assert result.stderr == "error: nope.toml: cannot read: No such file or directory\n"


def test_a_rewrite_that_does_not_parse_is_refused(monkeypatch):
    """The command line checks what it would write with Python's parser: a broken result is an
    error at the line Python names, and nothing is written."""
    import scanrewrite.per_file as per_file
    from scanrewrite.codemod import RewriteResult, Rewritten, SourceError

    broken = RewriteResult(b"import jax\n\ny = (\n", (Rewritten(3, "jax.lax.scan"),), ())
    monkeypatch.setattr(per_file, "transform", lambda mode: lambda source: broken)
    with pytest.raises(SourceError) as caught:
        per_file.rewrite_checked(b"import jax\n\ny = jax.lax.scan(f, c, xs)\n", Mode())
    assert caught.value.line == 3
    assert "does not parse" in caught.value.message


@pytest.mark.parametrize(
    ("pyproject", "named"),
    [
        pytest.param('[project]\nname = "pkg"\n', "none", id="no table"),
        pytest.param("[tool.scanrewrite]\nunroll = 2\n", "pyproject.toml", id="a table"),
    ],
)
def test_verbose_names_the_configuration_only_where_it_configures(project: Path, pyproject: str, named: str) -> None:
    write(project, {"pyproject.toml": pyproject, "a.py": PLAIN})
    assert invoke("-v", "a.py").stderr.splitlines()[0] == f"project root: .; configuration: {named}"
