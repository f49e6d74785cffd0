"""The unified diff printed by `--diff`, as bytes in the file's own encoding and newlines."""

from __future__ import annotations

import difflib


def _lines(data: bytes) -> list[bytes]:
    """`data` split after each `\\n` only, as git does (a lone `\\r` stays inside its line)."""
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def unified_diff(before: bytes, after: bytes, path: str) -> bytes:
    """A unified diff from `before` to `after` with `--- a/path` and `+++ b/path` headers,
    which `git apply` (and `patch -p1`) accept when `path` is relative to the repository top.
    An absolute `path` (a file outside the current folder) is named from the root, as
    `git diff --no-index` names it (`a/home/user/x.py`): the patch applies from `/`.

    Lines keep their own endings, so a CRLF file gives CRLF lines, and the bytes are not
    decoded, so the patch matches the file in any encoding.
    """
    # Not `a//home/...`: `git apply` rejects it, and `patch -p1` from `/` alone takes it.
    name = path.lstrip("/").encode("utf-8", "surrogateescape")
    # As git writes it: a tab ends a name with a space in it, for GNU patch.
    end = b"\t" if b" " in name else b""
    out = []
    for line in difflib.diff_bytes(
        difflib.unified_diff, _lines(before), _lines(after), b"a/" + name + end, b"b/" + name + end, lineterm=b"\n"
    ):
        if line.endswith(b"\n"):
            out.append(line)
        else:
            out.append(line + b"\n\\ No newline at end of file\n")
    return b"".join(out)


def color_diff(diff: bytes) -> bytes:
    """`diff` with ANSI colours: headers bold, hunks cyan, removals red, additions green."""
    out = []
    for line in _lines(diff):
        body, end = (line[:-1], line[-1:]) if line.endswith(b"\n") else (line, b"")
        if line.startswith((b"+++ ", b"--- ")):
            out.append(b"\x1b[1m" + body + b"\x1b[0m" + end)
        elif line.startswith(b"@@"):
            out.append(b"\x1b[36m" + body + b"\x1b[0m" + end)
        elif line.startswith(b"+"):
            out.append(b"\x1b[32m" + body + b"\x1b[0m" + end)
        elif line.startswith(b"-"):
            out.append(b"\x1b[31m" + body + b"\x1b[0m" + end)
        else:
            out.append(line)
    return b"".join(out)
