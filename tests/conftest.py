import os
from pathlib import Path

import pytest
from hypothesis import settings

# CI gets a fixed, derandomized profile so a run is reproducible; locally, more examples.
settings.register_profile("ci", max_examples=25, derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder (with `.git`, as a root marker) that is the current folder."""
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return tmp_path
