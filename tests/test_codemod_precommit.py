"""The `scanrewrite` hook and an import sorter in the same pre-commit run: the sorter has
nothing to change after the rewrite, and a second run of both changes nothing.

Both hooks are `repo: local` with `language: system`, run by this interpreter, so the test
needs no network (the real ruff-pre-commit repository would have to be fetched).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pre_commit", reason="pre-commit is in the test extras")
pytest.importorskip("ruff", reason="ruff is in the test extras")
pytest.importorskip("isort", reason="isort is in the test extras")

from tests.gitrepo import commit_all, git_repo  # noqa: E402 - after the skips

CONFIG = f"""\
repos:
  - repo: local
    hooks:
      - id: scanrewrite
        name: scanrewrite
        entry: {sys.executable} -m scanrewrite --force-exclude
        language: system
        types_or: [python, pyi]
        require_serial: true
      - id: ruff-imports
        name: ruff imports
        entry: {sys.executable} -m ruff check --select I --fix
        language: system
        types_or: [python, pyi]
      - id: isort
        name: isort
        entry: {sys.executable} -m isort --profile black
        language: system
        types_or: [python, pyi]
"""

FILES = {
    "mypkg/__init__.py": "",
    "mypkg/helpers.py": "def tree(x):\n    return x\n",
    "mypkg/model.py": '''\
"""A model whose imports are sorted: standard library, third-party, first-party, relative."""

from __future__ import annotations

import functools

import equinox as eqx
import jax
from jax import lax

from mypkg.helpers import tree

from . import helpers


@functools.partial(jax.jit, static_argnums=2)
def run(c, xs, n):
    return lax.scan(lambda c, x: (tree(c) + x, c), c, xs, length=n), lax.stop_gradient, eqx, helpers
''',
    "mypkg/local_import.py": '''\
"""Only the standard library and a relative import at the top."""

import os

from . import helpers


def run(c, xs):
    import jax

    return jax.lax.scan(lambda c, x: (c + x, c), c, xs), os, helpers
''',
    "mypkg/first_party.py": '''\
"""A first-party import at the top, jax only inside a function: the command line knows
`mypkg` is the project's own, as the sorters do."""

import os

import mypkg


def run(c, xs):
    from jax import lax

    return lax.scan(lambda c, x: (c + x, c), c, xs), lax.cond, os, mypkg
''',
}


def _pre_commit(repo: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(repo.parent / "cache"), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_sorter_after_the_rewrite_changes_nothing(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "user")
    (repo / ".pre-commit-config.yaml").write_text(CONFIG)
    for name, text in FILES.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    commit_all(repo)

    first = _pre_commit(repo)
    output = first.stdout + first.stderr
    assert first.returncode == 1, output
    assert re.search(r"^scanrewrite\.+Failed$", first.stdout, re.M), output
    assert "3 files rewritten (3 scan calls)" in first.stdout, output
    assert re.search(r"^ruff imports\.+Passed$", first.stdout, re.M), output
    assert re.search(r"^isort\.+Passed$", first.stdout, re.M), output
    model = (repo / "mypkg/model.py").read_text()
    assert "import jax\nimport scanrewrite.runtime\nfrom jax import lax\n\nfrom mypkg" in model
    local = (repo / "mypkg/local_import.py").read_text()
    assert "import os\n\nimport scanrewrite.runtime\n\nfrom . import helpers\n" in local
    first_party = (repo / "mypkg/first_party.py").read_text()
    assert "import os\n\nimport scanrewrite.runtime\n\nimport mypkg\n" in first_party

    commit_all(repo)
    second = _pre_commit(repo)
    assert second.returncode == 0, second.stdout + second.stderr
    assert len(re.findall(r"\.Passed$", second.stdout, re.M)) == 3, second.stdout

    # The same hook with `args: [--revert]` undoes it, and the sorters still pass.
    (repo / ".pre-commit-config.yaml").write_text(CONFIG.replace("--force-exclude", "--force-exclude --revert"))
    commit_all(repo)
    reverted = _pre_commit(repo)
    output = reverted.stdout + reverted.stderr
    assert reverted.returncode == 1, output
    assert "3 files reverted (3 scan calls)" in reverted.stdout, output
    assert re.search(r"^ruff imports\.+Passed$", reverted.stdout, re.M), output
    assert re.search(r"^isort\.+Passed$", reverted.stdout, re.M), output
    # Byte for byte where the rewrite kept the import the call used.
    for name in ("mypkg/model.py", "mypkg/first_party.py"):
        assert (repo / name).read_text() == FILES[name]
    local = (repo / "mypkg/local_import.py").read_text()
    assert "import os\n\nimport jax\n\nfrom . import helpers\n" in local
    assert "return jax.lax.scan(lambda c, x: (c + x, c), c, xs), os, helpers" in local
    commit_all(repo)
    assert _pre_commit(repo).returncode == 0
