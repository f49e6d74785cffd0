"""Throwaway git repositories for the tests that run pre-commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT = ("git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false")


def git_repo(path: Path) -> Path:
    """A new, empty repository at `path`."""
    subprocess.run([*GIT, "init", "-q", str(path)], check=True)
    return path


def commit_all(repo: Path) -> None:
    """Commit everything in `repo`'s working tree."""
    subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", "snapshot"], cwd=repo, check=True)
