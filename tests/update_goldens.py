"""Regenerate the golden files: `tests/golden/<fixture>.py` is `rewrite(fixtures/<fixture>.py)`,
and `tests/golden/<notebook>.ipynb` is `rewrite_notebook(fixtures/<notebook>.ipynb)`.

Run from anywhere, after changing the codemod or a fixture on purpose:

    python tests/update_goldens.py            # every fixture
    python tests/update_goldens.py nested_scans ode_reverse_rollout

Then read `git diff tests/golden` line by line before committing: a golden is the output a
user would commit, so it must be right, not merely what the codemod happens to produce today.
Goldens whose fixture no longer exists are deleted.
"""

import sys
from pathlib import Path

from scanrewrite.codemod import rewrite
from scanrewrite.notebook import rewrite_notebook

REPO = Path(__file__).resolve().parent.parent
FIXTURE_DIR = REPO / "fixtures"
GOLDEN_DIR = REPO / "tests" / "golden"
#: The options the goldens are made with: the command line's defaults.
GOLDEN_OPTIONS = {"unroll": 4}
#: Fixtures of the targets rewritten only on request, with the selection (`--targets`) they
#: are rewritten with.
TARGETS = {
    "fori_loop_rollout": "lax.scan,eqxi.scan,lax.fori_loop",
    "lax_map_per_example": "lax.scan,eqxi.scan,lax.map",
    "flax_nnx_transformer": "lax.scan,eqxi.scan,nnx.scan,linen.scan",
    "flax_linen_remat_scan": "lax.scan,eqxi.scan,nnx.scan,linen.scan",
}


def golden_options(name: str) -> dict[str, object]:
    """The options fixture `name`'s golden is made with."""
    return {**GOLDEN_OPTIONS, "targets": TARGETS[name]} if name in TARGETS else GOLDEN_OPTIONS


def fixture_names() -> list[str]:
    """The fixtures, by file stem, in a stable order."""
    return sorted(path.stem for path in FIXTURE_DIR.glob("*.py"))


def notebook_names() -> list[str]:
    """The notebook fixtures, by file stem, in a stable order."""
    return sorted(path.stem for path in FIXTURE_DIR.glob("*.ipynb"))


def _suffix(name: str) -> str:
    return ".ipynb" if (FIXTURE_DIR / f"{name}.ipynb").exists() else ".py"


def render(name: str) -> bytes:
    """The rewritten source of fixture `name`, as its golden file should hold it."""
    source = (FIXTURE_DIR / f"{name}{_suffix(name)}").read_bytes()
    if _suffix(name) == ".ipynb":
        return rewrite_notebook(source, **golden_options(name)).code
    return rewrite(source, **golden_options(name)).code


def main(argv: list[str]) -> int:
    known = fixture_names() + notebook_names()
    unknown = sorted(set(argv) - set(known))
    if unknown:
        print(f"error: no such fixture: {', '.join(unknown)} (known: {', '.join(known)})", file=sys.stderr)
        return 2
    GOLDEN_DIR.mkdir(exist_ok=True)
    written = 0
    for name in argv or known:
        golden = GOLDEN_DIR / f"{name}{_suffix(name)}"
        code = render(name)
        if not golden.exists() or golden.read_bytes() != code:
            golden.write_bytes(code)
            written += 1
            print(f"wrote {golden.relative_to(REPO)}")
    removed = 0
    if not argv:
        golden_paths = [*GOLDEN_DIR.glob("*.py"), *GOLDEN_DIR.glob("*.ipynb")]
        for stale_path in sorted(path for path in golden_paths if path.stem not in known):
            stale_path.unlink()
            removed += 1
            print(f"removed {stale_path.relative_to(REPO)} (no such fixture)")
    print(f"{written} golden(s) written, {removed} removed, {len(argv or known) - written} unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
