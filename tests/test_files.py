"""Project root, configuration, discovery, reading and atomic writing (`scanrewrite.files`)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from scanrewrite.files import (
    DEFAULT_EXCLUDES,
    Discovery,
    Excludes,
    FileError,
    check_decodable,
    display_path,
    find_project_root,
    find_pyproject,
    read_config,
    read_source,
    write_file,
)

DEFAULT_EXCLUDED_DIRS = re.findall(r"[\w.]+", DEFAULT_EXCLUDES.replace("\\", ""))


def make(root: Path, *names: str, content: str = "x = 1\n") -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def found(discovery: Discovery, *paths: Path | str) -> list[str]:
    return [source.path.relative_to(discovery.root.resolve()).as_posix() for source in discovery.collect(map(str, paths))]


@pytest.fixture
def chdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- project root and configuration -------------------------------------------------------


@pytest.mark.parametrize("marker", [".git", ".hg", "pyproject.toml"])
def test_root_is_nearest_folder_with_a_marker(tmp_path: Path, marker: str) -> None:
    (tmp_path / "proj" / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "proj" / marker).mkdir() if marker != "pyproject.toml" else (tmp_path / "proj" / marker).touch()
    paths = [str(tmp_path / "proj" / "src" / "pkg"), str(tmp_path / "proj" / "src" / "a.py")]
    assert find_project_root(paths) == tmp_path / "proj"


def test_root_without_marker_is_the_common_parent(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "c").mkdir()
    # `tmp_path` may itself sit under a folder with a marker: start below a fresh one.
    (tmp_path / "a" / ".hg").mkdir()
    assert find_project_root([str(tmp_path / "a" / "b"), str(tmp_path / "a" / "c" / "x.py")]) == tmp_path / "a"


def test_root_of_no_paths_is_found_from_the_current_folder(chdir: Path) -> None:
    (chdir / "pyproject.toml").touch()
    (chdir / "sub").mkdir()
    os.chdir(chdir / "sub")
    assert find_project_root([]) == chdir


def test_pyproject_is_the_roots(tmp_path: Path) -> None:
    assert find_pyproject(tmp_path) is None
    (tmp_path / "pyproject.toml").touch()
    assert find_pyproject(tmp_path) == tmp_path / "pyproject.toml"


def test_read_config_returns_the_table(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.black]\nline-length = 1\n[tool.scanrewrite]\nunroll = 8\npolicy = "dots_saveable"\n')
    assert read_config(path) == {"unroll": 8, "policy": "dots_saveable"}
    path.write_text("[project]\nname = 'x'\n")
    assert read_config(path) == {}


def test_read_config_names_the_line_of_bad_toml(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.scanrewrite]\nunroll = 8\nunroll = = 3\n")
    with pytest.raises(FileError) as info:
        read_config(path)
    assert info.value.line == 3
    assert info.value.message.startswith("invalid TOML: ")


def test_read_config_of_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileError, match="cannot read: No such file or directory"):
        read_config(tmp_path / "nope.toml")


# --- discovery -------------------------------------------------------------------------


def test_folders_are_searched_for_py_and_pyi(tmp_path: Path) -> None:
    make(tmp_path, "a.py", "b.pyi", "c.txt", "pkg/d.py", "pkg/deep/e.py", "pkg/f.pyc", "pkg/g.py.bak")
    assert found(Discovery(tmp_path), tmp_path) == ["a.py", "b.pyi", "pkg/d.py", "pkg/deep/e.py"]


@pytest.mark.parametrize("name", DEFAULT_EXCLUDED_DIRS)
def test_default_excludes(tmp_path: Path, name: str) -> None:
    make(tmp_path, "keep.py", f"{name}/x.py", f"sub/{name}/y.py")
    assert found(Discovery(tmp_path), tmp_path) == ["keep.py"]


def test_default_excludes_list_is_the_issues() -> None:
    assert sorted(DEFAULT_EXCLUDED_DIRS) == sorted(
        [".git", ".hg", ".venv", "venv", "build", "dist", "__pycache__", ".mypy_cache", ".pytest_cache"]
        + [".tox", ".nox", ".eggs", "node_modules"]
    )


def test_exclude_replaces_the_default_and_extend_exclude_adds(tmp_path: Path) -> None:
    make(tmp_path, "a.py", "build/b.py", "gen/c.py", "d_pb2.py")
    replaced = Excludes(exclude=re.compile(r"/gen/"))
    assert found(Discovery(tmp_path, replaced), tmp_path) == ["a.py", "build/b.py", "d_pb2.py"]
    extended = Excludes(extend_exclude=re.compile(r"_pb2\.py$"))
    assert found(Discovery(tmp_path, extended), tmp_path) == ["a.py", "gen/c.py"]


def test_gitignore_of_root_and_subfolders(tmp_path: Path) -> None:
    make(tmp_path, "a.py", "gen.py", "out/b.py", "pkg/c.py", "pkg/local.py", "pkg/sub/local.py", "pkg/keep_gen.py")
    (tmp_path / ".gitignore").write_text("gen.py\nout/\n*_gen.py\n")
    (tmp_path / "pkg" / ".gitignore").write_text("/local.py\n")
    assert found(Discovery(tmp_path), tmp_path) == ["a.py", "pkg/c.py", "pkg/sub/local.py"]


def test_gitignore_negation(tmp_path: Path) -> None:
    make(tmp_path, "a.py", "b.py", "c.py")
    (tmp_path / ".gitignore").write_text("*.py\n!b.py\n")
    assert found(Discovery(tmp_path), tmp_path) == ["b.py"]


def test_gitignore_above_a_folder_named_explicitly_applies(tmp_path: Path) -> None:
    make(tmp_path, "src/pkg/a.py", "src/pkg/skip.py")
    (tmp_path / ".gitignore").write_text("skip.py\n")
    assert found(Discovery(tmp_path), tmp_path / "src" / "pkg") == ["src/pkg/a.py"]


def test_files_named_explicitly_are_taken_unless_force_exclude(tmp_path: Path) -> None:
    make(tmp_path, "build/a.py", "ignored.py", "notes.txt")
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    named = [tmp_path / "build" / "a.py", tmp_path / "ignored.py", tmp_path / "notes.txt"]
    assert found(Discovery(tmp_path), *named) == ["build/a.py", "ignored.py", "notes.txt"]
    why: list[tuple[str, str]] = []
    forced = Discovery(tmp_path, force_exclude=True, on_ignored=lambda path, reason: why.append(reason))
    assert found(forced, *named) == ["notes.txt"]
    assert why == ["matches --exclude", "matches .gitignore"]


def test_extend_exclude_reason(tmp_path: Path) -> None:
    make(tmp_path, "a_pb2.py")
    why: list[str] = []
    discovery = Discovery(
        tmp_path, Excludes(extend_exclude=re.compile("pb2")), True, on_ignored=lambda p, reason: why.append(reason)
    )
    assert found(discovery, tmp_path / "a_pb2.py") == []
    assert why == ["matches --extend-exclude"]


def test_symlinks_out_of_the_root_are_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    make(outside, "secret.py", "lib/mod.py")
    root = tmp_path / "root"
    make(root, "a.py")
    (root / "link.py").symlink_to(outside / "secret.py")
    (root / "linkdir").symlink_to(outside / "lib")
    ignored: list[tuple[str, str]] = []
    discovery = Discovery(root, on_ignored=lambda path, why: ignored.append((Path(path).name, why)))
    assert found(discovery, root) == ["a.py"]
    assert found(discovery, root / "link.py", root / "linkdir") == []
    reason = "symbolic link out of the project root"
    assert ignored == [("link.py", reason), ("linkdir", reason)] * 2


def test_symlinks_inside_the_root_give_each_file_once(tmp_path: Path) -> None:
    make(tmp_path, "pkg/a.py")
    (tmp_path / "alias.py").symlink_to(tmp_path / "pkg" / "a.py")
    (tmp_path / "pkgalias").symlink_to(tmp_path / "pkg")
    assert found(Discovery(tmp_path), tmp_path) == ["pkg/a.py"]
    sources = Discovery(tmp_path).collect([str(tmp_path / "alias.py")])
    assert [source.path for source in sources] == [(tmp_path / "pkg" / "a.py").resolve()]
    assert sources[0].display.endswith("alias.py")


def test_links_that_cannot_be_followed_are_errors_and_the_rest_is_found(tmp_path: Path) -> None:
    make(tmp_path, "a.py", "pkg/b.py", "build/gone.py")
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "loop.py").symlink_to("loop.py")
    (tmp_path / "ping.py").symlink_to("pong.py")
    (tmp_path / "pong.py").symlink_to("ping.py")
    (tmp_path / "dangling.py").symlink_to("missing.py")
    (tmp_path / "danglingdir").symlink_to("missing")
    (tmp_path / "pkg" / "c.py").symlink_to("../missing.py")
    (tmp_path / "ignored.py").symlink_to("missing.py")
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    errors: list[tuple[str, str]] = []
    ignored: list[tuple[str, str]] = []
    discovery = Discovery(
        tmp_path,
        on_error=lambda path, error: errors.append((Path(path).name, error.message)),
        on_ignored=lambda path, why: ignored.append((Path(path).name, why)),
    )
    assert found(discovery, tmp_path) == ["a.py", "pkg/b.py"]
    loop, missing = "cannot read: Too many levels of symbolic links", "cannot read: No such file or directory"
    assert errors == [
        ("dangling.py", missing),
        ("loop", loop),
        ("loop.py", loop),
        ("ping.py", loop),
        ("c.py", missing),
        ("pong.py", loop),
    ]
    # A dangling link not named as a Python file is no error (as ruff sees it), only noted
    # with -v; a loop is an error whatever its name, since it could have been a folder.
    assert ignored == [
        ("build", "matches --exclude"),
        ("danglingdir", "cannot follow: No such file or directory"),
        ("ignored.py", "matches .gitignore"),
    ]


def test_non_regular_files_are_not_collected_from_folders(tmp_path: Path) -> None:
    make(tmp_path, "a.py")
    os.mkfifo(tmp_path / "pipe.py")
    assert found(Discovery(tmp_path), tmp_path) == ["a.py"]


def test_display_path_is_relative_to_the_current_folder(chdir: Path) -> None:
    assert display_path(chdir / "a" / "b.py") == "a/b.py"
    assert display_path("a/../c.py") == "c.py"
    assert display_path(chdir.parent / "x.py") == (chdir.parent / "x.py").as_posix()


# --- reading and decoding ------------------------------------------------------------------


def test_read_source_returns_the_bytes(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbfx = 1\r\n\ty = 2\r\n"
    (tmp_path / "a.py").write_bytes(data)
    assert read_source(tmp_path / "a.py") == data


def test_read_source_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    with pytest.raises(FileError, match="^cannot read: not a regular file$"):
        read_source(tmp_path / "pipe.py")


@pytest.mark.parametrize("kind", ["missing", "dangling link", "directory"])
def test_read_source_errors(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "x.py"
    if kind == "dangling link":
        path.symlink_to(tmp_path / "gone.py")
    elif kind == "directory":
        path.mkdir()
    with pytest.raises(FileError, match="^cannot read: "):
        read_source(path)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(b"x = 'caf\xc3\xa9'\n", id="utf-8"),
        pytest.param(b"\xef\xbb\xbfx = 'caf\xc3\xa9'\n", id="utf-8 BOM"),
        pytest.param(b"# -*- coding: latin-1 -*-\nx = 'caf\xe9'\n", id="latin-1 cookie"),
        pytest.param(b"#!/usr/bin/env python\n# coding: cp1252\nx = '\x80'\n", id="cookie on line 2"),
        pytest.param(b"", id="empty"),
    ],
)
def test_decodable(source: bytes) -> None:
    check_decodable(source)


@pytest.mark.parametrize(
    ("source", "line", "message"),
    [
        pytest.param(b"x = 1\ny = 2\nz = 'caf\xe9'\n", 3, "cannot decode as utf-8 (no coding cookie): ", id="line 3"),
        pytest.param(b"# caf\xe9\n", 1, "cannot decode as utf-8 (no coding cookie): ", id="line 1"),
        pytest.param(b"# coding: ascii\nx = '\xc3\xa9'\n", 2, "cannot decode as ascii: ", id="ascii cookie"),
        pytest.param(b"# coding: bogus\n", None, "cannot decode: unknown encoding: bogus", id="unknown cookie"),
    ],
)
def test_not_decodable(source: bytes, line: int | None, message: str) -> None:
    with pytest.raises(FileError) as info:
        check_decodable(source)
    assert info.value.line == line
    assert info.value.message.startswith(message)
    assert "\n" not in info.value.message


# --- writing -------------------------------------------------------------------------------


def leftovers(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if path.name.endswith(".scanrewrite"))


def test_write_file_replaces_content_and_keeps_mode(tmp_path: Path) -> None:
    path = tmp_path / "tool.py"
    path.write_bytes(b"old\r\n")
    path.chmod(0o755)
    write_file(path, b"new\r\n", b"old\r\n")
    assert path.read_bytes() == b"new\r\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert leftovers(tmp_path) == []


def test_write_file_refuses_a_file_changed_since_it_was_read(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_bytes(b"edited by someone else\n")
    with pytest.raises(FileError, match="^changed on disk since it was read; not overwritten$"):
        write_file(path, b"rewritten\n", b"as read\n")
    assert path.read_bytes() == b"edited by someone else\n"
    assert leftovers(tmp_path) == []


def test_write_file_error_when_the_file_is_gone(tmp_path: Path) -> None:
    with pytest.raises(FileError, match="^cannot write: No such file or directory$"):
        write_file(tmp_path / "gone.py", b"new\n", b"old\n")
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("mode", [0o444, 0o555], ids=["r--", "r-x"])
def test_write_file_leaves_a_read_only_file_alone(tmp_path: Path, mode: int) -> None:
    # Even for root, who could write it: no write bit for anyone says "do not".
    path = tmp_path / "a.py"
    path.write_bytes(b"old\n")
    path.chmod(mode)
    inode = path.stat().st_ino
    with pytest.raises(FileError, match="^cannot write: the file is read-only; left as it is$"):
        write_file(path, b"new\n", b"old\n")
    assert (path.read_bytes(), path.stat().st_ino, stat.S_IMODE(path.stat().st_mode)) == (b"old\n", inode, mode)
    assert leftovers(tmp_path) == []


def test_write_file_writes_a_hard_linked_file_through(tmp_path: Path) -> None:
    # As black and ruff write: in place, so every link still shares the (new) content.
    path = tmp_path / "a.py"
    path.write_bytes(b"old, and longer than what replaces it\n")
    os.link(path, tmp_path / "b.py")
    inode = path.stat().st_ino
    write_file(path, b"new\n", b"old, and longer than what replaces it\n")
    assert (tmp_path / "b.py").read_bytes() == path.read_bytes() == b"new\n"
    assert (path.stat().st_ino, path.stat().st_nlink) == (inode, 2)
    with pytest.raises(FileError, match="^changed on disk since it was read; not overwritten$"):
        write_file(path, b"newer\n", b"old\n")
    assert path.read_bytes() == b"new\n"
    assert leftovers(tmp_path) == []


def test_hard_links_are_one_file(tmp_path: Path) -> None:
    make(tmp_path, "a.py")
    os.link(tmp_path / "a.py", tmp_path / "b.py")
    assert found(Discovery(tmp_path), tmp_path) == ["a.py"]


def test_write_file_through_a_link_replaces_the_target(tmp_path: Path) -> None:
    target = tmp_path / "real.py"
    target.write_bytes(b"old\n")
    (tmp_path / "link.py").symlink_to(target)
    [source] = Discovery(tmp_path).collect([str(tmp_path / "link.py")])
    write_file(source.path, b"new\n", b"old\n")
    assert (tmp_path / "link.py").is_symlink()
    assert target.read_bytes() == b"new\n"


def test_a_folder_named_explicitly_is_searched_even_if_excluded(tmp_path: Path) -> None:
    # E.g. site-packages inside a git checkout (pyenv) whose .gitignore lists `/versions`.
    make(tmp_path, "versions/lib/a.py", "versions/lib/b_gen.py", "versions/lib/build/c.py", "build/d.py")
    (tmp_path / ".gitignore").write_text("/versions\n")
    (tmp_path / "versions" / "lib" / ".gitignore").write_text("*_gen.py\n")
    discovery = Discovery(tmp_path)
    assert found(discovery, tmp_path) == []
    assert found(discovery, tmp_path / "versions" / "lib") == ["versions/lib/a.py"]
    assert found(discovery, tmp_path / "build") == ["build/d.py"]
    why: list[str] = []
    forced = Discovery(tmp_path, force_exclude=True, on_ignored=lambda path, reason: why.append(reason))
    assert found(forced, tmp_path / "versions" / "lib", tmp_path / "build") == []
    assert why == ["matches .gitignore", "matches --exclude"]
