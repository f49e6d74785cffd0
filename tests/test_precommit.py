"""The pre-commit hooks, installed by pre-commit itself from this checkout (`pre-commit try-repo`).

pre-commit builds the hook's environment from PyPI (libcst, click, pathspec): this test
needs the network, as CI has.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.gitrepo import commit_all, git_repo
from tests.test_cli import SCAN, rewritten, write
from tests.test_notebook import make, sources

ROOT = Path(__file__).resolve().parents[1]


def test_hooks_declare_what_the_issue_asks() -> None:
    hooks = {hook["id"]: hook for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"scanrewrite", "scanrewrite-check"}
    for hook in hooks.values():
        assert (hook["language"], hook["types_or"], hook["require_serial"]) == ("python", ["python", "pyi", "jupyter"], True)
        assert "--force-exclude" in hook["entry"].split()
    assert hooks["scanrewrite"]["entry"].split()[0] == "scanrewrite"
    assert {"--check", "--diff"} <= set(hooks["scanrewrite-check"]["entry"].split())


def test_try_repo(tmp_path: Path) -> None:
    # The hooks come from a snapshot of this working tree, committed in a repository of its
    # own, so the test runs the code under test rather than the last commit.
    hooks = git_repo(tmp_path / "hooks")
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy(ROOT / name, hooks / name)
    shutil.copytree(ROOT / "scanrewrite", hooks / "scanrewrite", ignore=shutil.ignore_patterns("__pycache__"))
    commit_all(hooks)

    user = git_repo(tmp_path / "user")
    notebook = make("import jax", "def step(c, x):\n    return c + x, c", "c = jax.lax.scan(step, 0, None, length=3)")
    write(user, {"model.py": SCAN, "build/generated.py": SCAN, "notes.txt": "jax.lax.scan\n", "demo.ipynb": notebook})
    commit_all(user)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "NO_COLOR": "1"}

    def try_repo() -> subprocess.CompletedProcess[str]:
        # Both hooks in one run: try-repo installs their environment afresh on every run.
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "try-repo", str(hooks), "--all-files", "--color", "never"],
            cwd=user,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    first = try_repo()
    assert first.returncode == 1, first.stdout + first.stderr
    # In place first (hooks run in id order): it rewrites and fails; the check then passes.
    assert re.search(r"^scanrewrite\.+Failed$", first.stdout, re.M), first.stdout
    assert "files were modified by this hook" in first.stdout
    assert "2 files rewritten (2 scan calls)" in first.stdout
    assert re.search(r"^scanrewrite \(check\)\.+Passed$", first.stdout, re.M), first.stdout
    assert (user / "model.py").read_bytes() == rewritten(SCAN)
    # Notebooks too (pre-commit's `jupyter` type).
    assert sources((user / "demo.ipynb").read_bytes())[2] == "c = scanrewrite.runtime.scan(step, 0, None, length=3, unroll=4)"
    # --force-exclude: pre-commit names every file, and the default excludes still hold.
    assert (user / "build" / "generated.py").read_text() == SCAN

    second = try_repo()
    assert second.returncode == 0, second.stdout + second.stderr
    assert len(re.findall(r"\.Passed$", second.stdout, re.M)) == 2
