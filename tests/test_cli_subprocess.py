"""The command as users run it: real processes, the process pool, a terminal, no jax."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli import BROKEN, NOTE, PLAIN, SCAN, TWO_SCANS, WOULD_NOTE, rewritten, write
from tests.test_notebook_cli import NOTEBOOK

SCRIPT = Path(sys.executable).parent / "scanrewrite"


def run(cwd: Path, *args: str, input: bytes | None = None, command: tuple[str, ...] = ()) -> subprocess.CompletedProcess[bytes]:
    env = {key: value for key, value in os.environ.items() if key != "NO_COLOR"}
    return subprocess.run(
        [*(command or (sys.executable, "-m", "scanrewrite")), *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        env=env,
        timeout=120,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A project of several files, so that `-j2` parses them in a process pool."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, {"pkg/a.py": SCAN, "pkg/b.py": TWO_SCANS, "pkg/c.py": PLAIN, "pkg/d.py": SCAN.replace("3", "9")})
    return tmp_path


@pytest.mark.parametrize(
    ("args", "code", "written", "diff"),
    [
        pytest.param([], 0, True, False, id="in place"),
        pytest.param(["--check"], 1, False, False, id="check"),
        pytest.param(["--diff"], 0, False, True, id="diff"),
        pytest.param(["--check", "--diff"], 1, False, True, id="check diff"),
    ],
)
def test_modes_in_a_process_pool(tree: Path, args: list[str], code: int, written: bool, diff: bool) -> None:
    before = {path: path.read_bytes() for path in sorted(tree.glob("pkg/*.py"))}
    result = run(tree, "-j2", *args, "pkg")
    assert result.returncode == code, result.stderr
    for path, content in before.items():
        assert path.read_bytes() == (rewritten(content) if written else content)
    stderr = result.stderr.decode().splitlines()
    verb = "rewritten" if written else "would rewrite"
    assert stderr[:3] == [f"{verb} pkg/a.py", f"{verb} pkg/b.py", f"{verb} pkg/d.py"]
    assert stderr[3] == (NOTE if written else WOULD_NOTE)
    assert stderr[4].endswith(" (4 scan calls), 1 left unchanged" if written else " (4 scan calls), 1 would be left unchanged")
    assert bool(result.stdout) == diff
    assert result.stdout.count(b"\n--- a/pkg/") + result.stdout.startswith(b"--- a/pkg/") == (3 if diff else 0)


def test_errors_do_not_stop_the_pool(tree: Path) -> None:
    write(tree, {"pkg/bad.py": BROKEN, "pkg/latin.py": b"# caf\xe9\n" + SCAN.encode()})
    result = run(tree, "-j2", "pkg")
    assert result.returncode == 2
    stderr = result.stderr.decode()
    assert re.search(r"^error: pkg/bad\.py:\d+: cannot parse: ", stderr, re.M)
    assert "error: pkg/latin.py:1: cannot decode as utf-8 (no coding cookie): " in stderr
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1] == "3 files rewritten (4 scan calls), 1 left unchanged, 2 files failed"
    assert (tree / "pkg/bad.py").read_text() == BROKEN
    assert (tree / "pkg/a.py").read_bytes() == rewritten(SCAN)


def _without_root_powers() -> tuple[str, ...] | None:
    """A command prefix under which permission bits apply (root ignores them), or None."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    caps = "-dac_override,-dac_read_search"
    return (setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}") if setpriv else None


def test_bad_paths_in_a_tree_are_one_error_each(tree: Path) -> None:
    prefix = _without_root_powers()
    if prefix is None:
        pytest.skip("running as root without setpriv: permission bits cannot be tested")
    write(tree, {"pkg/locked/hidden.py": SCAN, "pkg/sub/e.py": SCAN})
    (tree / "pkg/loop").symlink_to("loop")
    (tree / "pkg/ping.py").symlink_to("pong.py")
    (tree / "pkg/pong.py").symlink_to("ping.py")
    (tree / "pkg/dangling.py").symlink_to("missing.py")
    (tree / "pkg/locked").chmod(0)
    try:
        result = run(tree, "-j2", "pkg", command=(*prefix, sys.executable, "-m", "scanrewrite"))
    finally:
        (tree / "pkg/locked").chmod(0o755)
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [
        "error: pkg/dangling.py: cannot read: No such file or directory",
        "error: pkg/locked: cannot list: Permission denied",
        "error: pkg/loop: cannot read: Too many levels of symbolic links",
        "error: pkg/ping.py: cannot read: Too many levels of symbolic links",
        "error: pkg/pong.py: cannot read: Too many levels of symbolic links",
        "rewritten pkg/a.py",
        "rewritten pkg/b.py",
        "rewritten pkg/d.py",
        "rewritten pkg/sub/e.py",
        NOTE,
        "4 files rewritten (5 scan calls), 1 left unchanged, 5 files failed",
    ]
    assert (tree / "pkg/locked/hidden.py").read_text() == SCAN


@pytest.mark.parametrize("where", ["in a folder", "named"])
def test_a_link_to_itself_is_an_error_and_the_rest_is_rewritten(tree: Path, where: str) -> None:
    (tree / "pkg/loop").symlink_to("loop")
    (tree / "pkg/there").symlink_to("back")  # a folder's name, looping through another link
    (tree / "pkg/back").symlink_to("there")
    (tree / "pkg/up").symlink_to(".")  # a link back up the tree: what it leads to is found directly
    paths = ["pkg"] if where == "in a folder" else ["pkg/back", "pkg/loop", "pkg/a.py", "pkg/b.py", "pkg/c.py", "pkg/d.py"]
    result = run(tree, "-j2", *paths)
    assert result.returncode == 2
    loop = "cannot read: Too many levels of symbolic links"
    assert result.stderr.decode().splitlines() == [
        f"error: pkg/back: {loop}",
        f"error: pkg/loop: {loop}",
        *([f"error: pkg/there: {loop}"] if where == "in a folder" else []),
        "rewritten pkg/a.py",
        "rewritten pkg/b.py",
        "rewritten pkg/d.py",
        NOTE,
        f"3 files rewritten (4 scan calls), 1 left unchanged, {3 if where == 'in a folder' else 2} files failed",
    ]
    assert (tree / "pkg/a.py").read_bytes() == rewritten(SCAN)


def test_a_comment_above_a_kept_import_stays_above_it_and_revert_restores_the_file(tree: Path) -> None:
    before = (
        "import os\n\n# lax is re-exported for plugins; keep it\nfrom jax import lax  # noqa: F401\n\n\n"
        "def step(carry, x):\n    return carry + x, carry\n\n\nout = lax.scan(step, 0, os.sep)\n"
    )
    write(tree, {"plugins.py": before})
    result = run(tree, "plugins.py")
    assert result.returncode == 0, result.stderr
    assert (tree / "plugins.py").read_text() == (
        "import os\n\nimport scanrewrite.runtime\n\n"
        "# lax is re-exported for plugins; keep it\nfrom jax import lax  # noqa: F401\n\n\n"
        "def step(carry, x):\n    return carry + x, carry\n\n\n"
        "out = scanrewrite.runtime.scan(step, 0, os.sep, unroll=4)\n"
    )
    assert run(tree, "--revert", "plugins.py").returncode == 0
    assert (tree / "plugins.py").read_text() == before


BOUND_SCAN = """\
import json
from functools import partial

import jax
import jax.numpy as jnp


def step(total, x):
    return 0.5 * total + jnp.sin(x), total


def integrate(xs):
    # Every argument by position, as lax.scan takes them (init, xs, length, reverse, unroll).
    return partial(jax.lax.scan, step)(0.0, xs, None, False, 2)


xs = jnp.linspace(0.0, 1.0, 7)
print(json.dumps([jax.tree.map(lambda a: a.tolist(), out) for out in (integrate(xs), jax.jit(integrate)(xs))]))
"""


def test_a_bound_scan_called_with_unroll_by_position_runs_as_the_original(tmp_path: Path) -> None:
    """The rewrite gives the partial `unroll=4`; the call's own unroll, by position, does not
    collide with it, and the rewritten program prints the original's numbers."""
    pytest.importorskip("jax", reason="the programs run jax (the command itself never imports it)")
    import numpy as np

    write(tmp_path, {"bound.py": BOUND_SCAN})
    python = [sys.executable, "bound.py"]
    original = subprocess.run(python, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert original.returncode == 0, original.stderr
    assert run(tmp_path, "bound.py").returncode == 0
    rewritten_source = (tmp_path / "bound.py").read_text()
    assert "    return partial(scanrewrite.runtime.scan, step, unroll=4)(0.0, xs, None, False, 2)\n" in rewritten_source
    after = subprocess.run(python, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert after.returncode == 0, after.stderr
    expected, actual = json.loads(original.stdout), json.loads(after.stdout)
    for want, got in zip(expected, actual, strict=True):  # outside jit, then inside
        for leaf_want, leaf_got in zip(want, got, strict=True):  # the carry, then the outputs
            np.testing.assert_allclose(leaf_got, leaf_want, rtol=1e-6, atol=1e-6)
    assert run(tmp_path, "--revert", "bound.py").returncode == 0
    assert (tmp_path / "bound.py").read_text() == BOUND_SCAN


def test_diff_is_a_patch_that_git_apply_and_patch_apply(tree: Path) -> None:
    """`--diff > scan.patch; git apply scan.patch` gives, byte for byte, what writing in place gives."""
    shutil.rmtree(tree / ".git")
    files = {
        "crlf.py": TWO_SCANS.replace("\n", "\r\n").encode(),
        "no final newline.py": TWO_SCANS.rstrip("\n").encode(),
        "bom.py": b"\xef\xbb\xbf" + SCAN.replace("\n", "\r\n").rstrip().encode(),
        "pkg/latin.py": b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + SCAN.encode(),
        "nb/demo.ipynb": NOTEBOOK,
        "nb/crlf.ipynb": NOTEBOOK.replace(b"\n", b"\r\n"),
    }
    write(tree, files)
    names = [*files, "pkg/a.py", "pkg/b.py", "pkg/d.py"]
    git = ["git", "-c", "core.autocrlf=false", "-c", "user.name=t", "-c", "user.email=t@t"]
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "init"]):
        subprocess.run([*git, *command], cwd=tree, check=True)
    patch = run(tree, "-j2", "--diff", ".")
    assert patch.returncode == 0, patch.stderr
    (tree.parent / "scan.patch").write_bytes(patch.stdout)
    assert run(tree, "-j2", ".").returncode == 0
    in_place = {name: (tree / name).read_bytes() for name in names}
    assert all(in_place[name] != content for name, content in files.items())
    patch_file = str(tree.parent / "scan.patch")
    appliers = [[*git, "apply", patch_file], ["patch", "-p1", "--quiet", "--batch", "-i", patch_file]]
    for applier in appliers if shutil.which("patch") else appliers[:1]:
        subprocess.run([*git, "checkout", "-q", "--", "."], cwd=tree, check=True)
        subprocess.run(applier, cwd=tree, check=True)
        assert {name: (tree / name).read_bytes() for name in names} == in_place, applier[0]


def test_a_read_only_file_is_reported_and_a_hard_link_written_through(tree: Path) -> None:
    write(tree, {"pkg/ro.py": SCAN, "elsewhere/same.py": TWO_SCANS})
    (tree / "pkg/ro.py").chmod(0o444)
    os.link(tree / "elsewhere/same.py", tree / "pkg/linked.py")
    ro, linked = (tree / "pkg/ro.py").stat(), (tree / "pkg/linked.py").stat()
    result = run(tree, "-j2", "pkg")
    assert result.returncode == 2
    stderr = result.stderr.decode().splitlines()
    assert "error: pkg/ro.py: cannot write: the file is read-only; left as it is" in stderr
    assert stderr[-1] == "4 files rewritten (6 scan calls), 1 left unchanged, 1 file failed"
    after = (tree / "pkg/ro.py").stat()
    assert ((tree / "pkg/ro.py").read_text(), after.st_ino, after.st_mode) == (SCAN, ro.st_ino, ro.st_mode)
    # Written through, as black and ruff write: both links still share the one, rewritten file.
    assert (tree / "elsewhere/same.py").read_bytes() == (tree / "pkg/linked.py").read_bytes() == rewritten(TWO_SCANS)
    assert (tree / "pkg/linked.py").stat().st_ino == linked.st_ino
    assert not list(tree.rglob("*.scanrewrite"))


def test_messages_name_the_place_and_the_cause(tree: Path) -> None:
    unclosed = "import jax\n\n\nx = foo(\n    1,\n    jax.lax.scan(f, 0, None, length=3)\n\ny = 2\n"
    cells = json.dumps({"cells": "jax.lax.scan(f, 0, None)", "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    outside = tree.parent / f"{tree.name}-outside.py"
    outside.write_text(SCAN)
    write(tree, {"pkg/bad.py": unclosed, "nb/cells.ipynb": cells, "build/b.py": SCAN})
    (tree / "link.py").symlink_to(outside)
    result = run(tree, "--force-exclude", "pkg/bad.py", "nb/cells.ipynb", "link.py", "build/b.py")
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [
        "link.py: ignored (symbolic link out of the project root)",
        "build/b.py: ignored (matches --exclude)",
        "error: pkg/bad.py:4: cannot parse: '(' was never closed",  # as compile() says it
        "error: nb/cells.ipynb: not a valid nbformat 4 notebook: cells: a string, not an array",
        "2 files failed",
    ]
    # Named paths left out are no error, as for black and ruff; but never left out silently.
    result = run(tree, "--force-exclude", "link.py", "build/b.py")
    assert result.returncode == 0
    assert result.stderr.decode().splitlines() == [
        "link.py: ignored (symbolic link out of the project root)",
        "build/b.py: ignored (matches --exclude)",
        "no Python files found",
    ]
    assert run(tree, "-q", "--force-exclude", "link.py", "build/b.py").stderr == b""
    assert outside.read_text() == (tree / "build/b.py").read_text() == SCAN


@pytest.mark.parametrize("args", [["--diff"], []], ids=["diff", "in place"])
def test_verbose_names_every_call_in_a_process_pool(tree: Path, args: list[str]) -> None:
    """`-v`: one line per call rewritten or skipped, in the order of the files, and none for
    a file left unchanged; `-vv` names that file too. With `--diff`, every message says "would"."""
    write(tree, {"pkg/b.py": TWO_SCANS + "kept = jax.lax.scan(step, 0, None, length=3, **options)\n"})
    would = bool(args)
    rewrote, skipped, file_verb = ("would rewrite", "would skip", "would rewrite") if would else ("rewritten", "skipped", "rewritten")
    removed, added = ("would remove", "would add") if would else ("removed", "added")
    result = run(tree, "-j2", "-v", *args, "pkg")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.decode().splitlines() if not line.startswith("note: ")]
    assert lines == [
        "project root: .; configuration: none",
        f"pkg/a.py:8: {rewrote}",
        f"pkg/a.py:1: {removed} 'import jax'",
        f"pkg/a.py:1: {added} 'import scanrewrite.runtime'",
        f"{file_verb} pkg/a.py",
        f"pkg/b.py:8: {rewrote}",
        f"pkg/b.py:9: {rewrote}",
        f"pkg/b.py:10: {skipped} (unroll may come from **kwargs)",
        f"pkg/b.py:2: {added} 'import scanrewrite.runtime'",
        f"{file_verb} pkg/b.py",
        f"pkg/d.py:8: {rewrote}",
        f"pkg/d.py:1: {removed} 'import jax'",
        f"pkg/d.py:1: {added} 'import scanrewrite.runtime'",
        f"{file_verb} pkg/d.py",
        (
            "3 files would be rewritten (4 scan calls), 1 would be left unchanged, 1 call would be skipped"
            if would
            else "3 files rewritten (4 scan calls), 1 left unchanged, 1 call skipped"
        ),
    ]
    # Run again: in place, every file is now left unchanged.
    again = run(tree, "-j2", "-vv", *args, "pkg").stderr.decode().splitlines()
    expected = ["pkg/c.py: would be left unchanged"] if would else [f"pkg/{name}.py: left unchanged" for name in "abcd"]
    assert [line for line in again if line.endswith(" left unchanged")] == expected


def test_verbose_says_what_changes_in_the_imports_and_what_a_revert_will_not_restore(tmp_path: Path) -> None:
    """The rewrite removes `from jax.lax import scan`; `-v` says so, and that `--revert` will
    write `import jax` instead, once per file; the revert then does what it said."""
    original = "from jax.lax import scan\n\n\ndef f(c, xs):\n    return scan(lambda c, x: (c, x), c, xs)\n\n\ng = scan\n"
    write(tmp_path, {"a.py": original, "b.py": SCAN})
    result = run(tmp_path, "-j2", "-v", ".")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.decode().splitlines() if line.startswith(("a.py", "b.py"))]
    assert lines == [
        "a.py:5: rewritten",
        "a.py:8: skipped (reference to jax.lax.scan that is not a call)",
        "a.py:1: added 'import scanrewrite.runtime'",
        "b.py:8: rewritten",
        "b.py:1: removed 'import jax'",
        "b.py:1: added 'import scanrewrite.runtime'",
    ]
    # `scan` is still read at line 8, so its import stays: nothing for a revert to restore.
    assert (tmp_path / "a.py").read_bytes() == rewritten(original)
    write(tmp_path, {"a.py": original.replace("\n\ng = scan\n", "")})
    result = run(tmp_path, "-v", "a.py")
    assert result.stderr.decode().splitlines()[1:5] == [
        "a.py:5: rewritten",
        "a.py:1: removed 'from jax.lax import scan'",
        "a.py:1: added 'import scanrewrite.runtime'",
        "a.py: --revert and scanrewrite-tune's write-back of the original will not restore"
        " 'from jax.lax import scan'; they write 'import jax' instead",
    ]
    result = run(tmp_path, "-v", "--revert", ".")
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().splitlines()[1:5] == [
        "a.py:5: reverted",
        "a.py:1: removed 'import scanrewrite.runtime'",
        "a.py:1: added 'import jax'",
        "reverted a.py",
    ]
    assert (tmp_path / "a.py").read_text() == (
        "import jax\n\n\ndef f(c, xs):\n    return jax.lax.scan(lambda c, x: (c, x), c, xs)\n"
    )
    assert (tmp_path / "b.py").read_text() == SCAN


def test_console_script_and_bad_option(tree: Path) -> None:
    assert SCRIPT.exists(), "install the package: pip install -e ."
    result = run(tree, "--check", "pkg/a.py", command=(str(SCRIPT),))
    assert (result.returncode, result.stderr.decode().splitlines()[0]) == (1, "would rewrite pkg/a.py")
    result = run(tree, "--unroll", "0", "pkg", command=(str(SCRIPT),))
    assert result.returncode == 2
    assert b"Invalid value for '--unroll'" in result.stderr
    assert (tree / "pkg/a.py").read_text() == SCAN


def test_stdin(tree: Path) -> None:
    result = run(tree, "-", input=SCAN.replace("\n", "\r\n").encode())
    assert (result.returncode, result.stdout) == (0, rewritten(SCAN.replace("\n", "\r\n")))
    result = run(tree, "--check", "-", input=SCAN.encode())
    assert (result.returncode, result.stdout) == (1, b"")


#: Runs the command (its arguments after the first two), then prints its exit code, whether the
#: module named second was imported, and the imported modules whose names start with one of the
#: comma-separated prefixes named first.
_PROBE = (
    "import runpy, sys\n"
    "unwanted, needed = tuple(sys.argv[1].split(',')), sys.argv[2]\n"
    "sys.argv = ['scanrewrite', *sys.argv[3:]]\n"
    "try:\n"
    "    runpy.run_module('scanrewrite', run_name='__main__')\n"
    "except SystemExit as exit:\n"
    "    code = exit.code\n"
    "loaded = sorted(name for name in sys.modules if name.startswith(unwanted))\n"
    "print(code, needed in sys.modules, loaded)\n"
)


def probed(cwd: Path, unwanted: tuple[str, ...], needed: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _PROBE, ",".join(unwanted), needed, *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_jax_is_never_imported(tree: Path) -> None:
    result = probed(tree, ("jax", "jaxlib"), "scanrewrite.codemod", "-j1", "pkg")
    assert result.stdout == "0 True []\n", result.stderr
    assert (tree / "pkg/a.py").read_bytes() == rewritten(SCAN)
    importtime = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "scanrewrite", "--help"], capture_output=True, text=True, timeout=120
    )
    imported = {line.split("|")[-1].strip() for line in importtime.stderr.splitlines() if "|" in line}
    assert "scanrewrite.cli" in imported
    assert not {name for name in imported if name == "jax" or name.startswith("jax.")}
    # --help does not even load the rewrite (libcst): the command starts at once.
    assert "libcst" not in imported


@pytest.mark.parametrize("args", [["--check"], [], ["--revert"]], ids=["check", "in place", "revert"])
def test_a_run_imports_only_what_it_uses(tree: Path, args: list[str]) -> None:
    """A run on one file spends much of its time importing: it imports no part of libcst's
    codemod framework (`libcst.matchers` alone costs more than parsing 1,000 lines), no
    pathspec where there is no `.gitignore`, no notebook support and no process pool for
    Python files on one job, and never jax."""
    if args == ["--revert"]:
        (tree / "pkg/a.py").write_bytes(rewritten(SCAN))
    unwanted = (
        "jax",
        "jaxlib",
        "libcst.codemod",
        "libcst.matchers",
        "pathspec",
        "scanrewrite.notebook",
        "concurrent.futures.process",
        "multiprocessing",
    )
    result = probed(tree, unwanted, "libcst", *args, "-j1", "pkg/a.py")
    code = 1 if args == ["--check"] else 0
    assert result.stdout == f"{code} True []\n", result.stderr
    assert (tree / "pkg/a.py").read_bytes() == (rewritten(SCAN) if args == [] else SCAN.encode())


@pytest.mark.parametrize(("no_color", "colored"), [(None, True), ("1", False)])
def test_colour_on_a_terminal_unless_no_color(tree: Path, no_color: str | None, colored: bool) -> None:
    env = {key: value for key, value in os.environ.items() if key != "NO_COLOR"}
    if no_color:
        env["NO_COLOR"] = no_color
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "scanrewrite", "--diff", "pkg/a.py"],
        cwd=tree,
        stdout=follower,
        stderr=subprocess.DEVNULL,
        env=env,
    ) as process:
        os.close(follower)
        output = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closes when the process ends
                break
            if not chunk:
                break
            output += chunk
        assert process.wait(timeout=120) == 0
    os.close(leader)
    assert b"unroll=4" in output
    assert (b"\x1b[32m+" in output) == colored
