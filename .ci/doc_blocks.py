"""Run the code blocks that the documentation marks as runnable, so an example that stops working
fails CI. A mark is an HTML comment on the line just above a fenced block (invisible on the site
and on GitHub):

    <!-- run -->             the next block (```python, ```bash or ```sh) must run;
    <!-- run exit=1 -->      ... and exit with that status (shell blocks);
    <!-- rewrite: ARGS -->   the next two ```python blocks are a file before and after
                             `scanrewrite ARGS FILE` (ARGS may be empty).

Each page runs in a fresh temporary project: a git repository (one commit) holding a copy of
`fixtures/` and, as `src/`, of three of its programs (a user's own code, small enough to rewrite
quickly). A page's blocks run in order, in that folder,
with this interpreter's environment first on PATH and `JAX_PLATFORMS=cpu`: its Python blocks in
one interpreter, sharing their names as a notebook's cells do; each shell block in `bash -e -o
pipefail`; each rewrite pair on a file of its own. The first failure ends the page and names
the page and the line of its block (a traceback points into the page itself).

    python .ci/doc_blocks.py                 # README.md and every docs/*.md
    python .ci/doc_blocks.py docs/runtime.md # or the pages named
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"^\s*<!--\s*(run(?:\s+exit=(\d+))?|rewrite:(.*?))\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+)\s*([\w+-]*)")
SHELL = {"bash", "sh", "shell"}
# Seconds one page may take; the examples use tiny arrays.
TIMEOUT = 300
# Pages run at once (CI has two cores).
WORKERS = int(os.environ.get("SCANREWRITE_CI_WORKERS", "2"))
# The fixtures copied to the project's `src/`.
SRC = ("transformer_block.py", "rnn_pytree_carry.py", "kalman_filter.py")


@dataclasses.dataclass(frozen=True)
class Block:
    """A fenced block: its page, the line of its first code line (1-based), language, code."""

    page: str
    line: int
    language: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclasses.dataclass(frozen=True)
class Check:
    """What to do with one or two blocks: `run` (with the exit status expected) or `rewrite`."""

    kind: str
    blocks: tuple[Block, ...]
    exit: int = 0
    args: tuple[str, ...] = ()


def fenced_blocks(page: str, text: str) -> list[tuple[int, Block]]:
    """(line of the opening fence, block) for every fenced block, in order; indentation (a block
    in a list or an admonition) is removed."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, language = match.groups()
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        blocks.append((start, Block(page, start + 2, language, "\n".join(body) + "\n")))
        i += 1
    return blocks


def checks(page: str, text: str) -> list[Check]:
    """The checks a page asks for; a mark with no block (or the wrong blocks) after it is an error."""
    lines = text.splitlines()
    blocks = fenced_blocks(page, text)
    found = []
    for number, line in enumerate(lines):
        mark = MARK.match(line)
        if not mark:
            continue
        following = [block for start, block in blocks if start > number]
        where = f"{page}:{number + 1}"
        if mark.group(1).startswith("run"):
            if not following or following[0].line != number + 3:
                raise ValueError(f"{where}: a run mark must stand on the line just above a fenced block")
            block = following[0]
            if block.language != "python" and block.language not in SHELL:
                raise ValueError(f"{where}: cannot run a {block.language or 'plain'} block")
            found.append(Check("run", (block,), exit=int(mark.group(2) or 0)))
        else:
            pair = tuple(following[:2])
            if len(pair) < 2 or any(block.language != "python" for block in pair) or pair[0].line != number + 3:
                raise ValueError(f"{where}: a rewrite mark must stand just above two python blocks")
            found.append(Check("rewrite", pair, args=tuple(shlex.split(mark.group(3)))))
    return found


def make_project(folder: Path) -> None:
    """The temporary project a page's blocks run in."""
    shutil.copytree(ROOT / "fixtures", folder / "fixtures")
    (folder / "src").mkdir()
    for name in SRC:
        shutil.copy(ROOT / "fixtures" / name, folder / "src" / name)
    git = ["git", "-c", "user.name=docs", "-c", "user.email=docs@example.com"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the project"]):
        subprocess.run([*git, *command], cwd=folder, check=True, capture_output=True)


def environment() -> dict[str, str]:
    env = dict(os.environ, JAX_PLATFORMS="cpu", NO_COLOR="1")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def run_page(page: str) -> list[str]:
    """Run every check of one page (a path relative to the repository root), in a child
    interpreter; the failure, if any (the first ends the page)."""
    found = checks(page, (ROOT / page).read_text())
    if not found:
        return []
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp) / "project"
        folder.mkdir()
        make_project(folder)
        spec = Path(temp) / "checks.json"
        spec.write_text(json.dumps([dataclasses.asdict(check) for check in found]))
        try:
            done = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--exec", str(spec)],
                cwd=folder,
                env=environment(),
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            return [f"error: {page}: its blocks took more than {TIMEOUT} s\n"]
        return [] if done.returncode == 0 else [done.stdout + done.stderr]


def exec_checks(spec: Path) -> int:
    """The child of `run_page`, in the page's project: the checks in order, Python blocks in one
    namespace, each compiled with its page as the file name and its own line numbers, so a
    traceback shows the page's lines."""
    namespace: dict = {"__name__": "__main__"}
    for fields in json.loads(spec.read_text()):
        check = Check(**{**fields, "blocks": tuple(Block(**block) for block in fields["blocks"])})
        block = check.blocks[0]
        if check.kind == "rewrite":
            failure = run_rewrite(check)
        elif block.language in SHELL:
            failure = run_shell(check)
        else:
            try:
                exec(compile("\n" * (block.line - 1) + block.code, str(ROOT / block.page), "exec"), namespace)
                failure = None
            except BaseException:
                import traceback

                failure = f"{block.where}: python block failed\n{traceback.format_exc()}"
        if failure:
            print(f"error: {failure}", file=sys.stderr)
            return 1
    return 0


def run_shell(check: Check) -> str | None:
    block = check.blocks[0]
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], capture_output=True, text=True)
    if done.returncode == check.exit:
        return None
    return f"{block.where}: shell block exited {done.returncode}, not {check.exit}\n{done.stdout}{done.stderr}"


def run_rewrite(check: Check) -> str | None:
    before, after = check.blocks
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "example.py"
        path.write_text(before.code)
        command = ["scanrewrite", "-q", *check.args, "example.py"]
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
        got = path.read_text()
    if done.returncode == 0 and got == after.code:
        return None
    import difflib

    diff = "".join(difflib.unified_diff(after.code.splitlines(True), got.splitlines(True), "documented", "actual"))
    return (
        f"{before.where}: `{shlex.join(command[:-1])}` (exit {done.returncode}) does not give the block at "
        f"line {after.line}\n{done.stderr}{diff}"
    )


def pages(names: list[str]) -> list[str]:
    if names:
        return [str(Path(name).resolve().relative_to(ROOT)) for name in names]
    return ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))]


def check_page(page: str) -> tuple[str, bool]:
    """What to print about one page, and whether it failed."""
    start = time.monotonic()
    try:
        count = len(checks(page, (ROOT / page).read_text()))
        failures = run_page(page)
    except ValueError as error:
        count, failures = 0, [f"error: {error}\n"]
    if not (count or failures):
        return "", False
    status = "failed" if failures else "passed"
    return "".join(failures) + f"{page}: {count} blocks {status} in {time.monotonic() - start:.1f} s\n", bool(failures)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--exec"]:
        return exec_checks(Path(argv[1]))
    # Pages run side by side (each in its own project and interpreter), reported in order.
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(check_page, pages(argv)))
    for text, _ in results:
        print(text, end="", file=sys.stderr)
    return 1 if any(failed for _, failed in results) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
