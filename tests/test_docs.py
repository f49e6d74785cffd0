"""The documentation's own checks: the README's first commands are CI's, and the runner of the
blocks the pages mark as runnable (.ci/doc_blocks.py) finds them and names a failure's page and
line. CI runs every marked block (.ci/run's docs part); these tests never import jax."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))]


def load_runner():
    spec = importlib.util.spec_from_file_location("doc_blocks", ROOT / ".ci" / "doc_blocks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["doc_blocks"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


doc_blocks = load_runner()


def test_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text()) <= 12_000


def test_readme_starts_with_the_commands_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    first = doc_blocks.fenced_blocks("README.md", readme)[0][1]
    assert readme.index("```") < readme.index("\n## ")  # before any section
    install, test = first.code.splitlines()
    # .ci/run's main part runs the second (its pip quietly).
    ci = re.search(r"main_suite\(\) \{\n\s*(.*)\n", (ROOT / ".ci" / "run").read_text()).group(1)
    assert ci.replace("python -m pip install -q", "pip install") == test
    assert install.startswith("pip install -e . && scanrewrite ")
    command = install.split(" && ", 1)[1].split()
    scanrewrite = Path(sys.executable).parent / "scanrewrite"
    done = subprocess.run([str(scanrewrite), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "+++ b/fixtures/" in done.stdout and "scanrewrite.runtime.scan(" in done.stdout


@pytest.mark.parametrize("page", PAGES)
def test_marks_stand_above_runnable_blocks(page: str) -> None:
    doc_blocks.checks(page, (ROOT / page).read_text())


def test_the_docs_mark_blocks_of_every_kind() -> None:
    found = [check for page in PAGES for check in doc_blocks.checks(page, (ROOT / page).read_text())]
    kinds = {(check.kind, check.blocks[0].language) for check in found}
    assert {("run", "python"), ("run", "bash"), ("rewrite", "python")} <= kinds


PAGE = '''\
# A page

<!-- run -->
```python
x = 1
```

Text.

<!-- run -->
```python
assert x == 1
y = [][0]
```
'''


def test_checks_find_marks_and_lines() -> None:
    found = doc_blocks.checks("page.md", PAGE)
    assert [(c.kind, c.blocks[0].line, c.blocks[0].code) for c in found] == [
        ("run", 5, "x = 1\n"),
        ("run", 12, "assert x == 1\ny = [][0]\n"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("<!-- run -->\n\n```python\nx = 1\n```\n", id="blank line between"),
        pytest.param("<!-- run -->\nText.\n", id="no block"),
        pytest.param("<!-- run -->\n```text\nx\n```\n", id="not code"),
        pytest.param("<!-- rewrite: --unroll 4 -->\n```python\nx = 1\n```\n", id="one block of a pair"),
    ],
)
def test_a_misplaced_mark_is_an_error(text: str) -> None:
    with pytest.raises(ValueError, match=r"^page\.md:1: "):
        doc_blocks.checks("page.md", text)


def test_blocks_in_a_list_are_dedented() -> None:
    text = "- item\n\n    <!-- run -->\n    ```bash\n    echo hi\n    ```\n"
    (check,) = doc_blocks.checks("page.md", text)
    assert (check.blocks[0].line, check.blocks[0].code) == (5, "echo hi\n")


def test_a_failing_python_block_names_its_page_and_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    (failure,) = doc_blocks.run_page(str(page))
    assert f"{page}:12: python block failed" in failure
    # The traceback points at the failing line of the page, and shows it.
    assert f'File "{page}", line 13' in failure and "y = [][0]" in failure


def test_shell_blocks_run_in_a_project_with_fixtures_and_src(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- run -->\n```bash\ntest -d fixtures && scanrewrite -j1 --diff src/kalman_filter.py > scan.patch\n"
        "git apply scan.patch\n```\n\n"
        "<!-- run exit=1 -->\n```bash\ngit diff --quiet\n```\n\n"
        "<!-- run -->\n```bash\nscanrewrite -j1 --check src/kalman_filter.py\n```\n"
    )
    assert doc_blocks.run_page(str(page)) == []
    page.write_text("Text.\n\n<!-- run -->\n```bash\nscanrewrite -j1 --check fixtures/kalman_filter.py\n```\n")
    (failure,) = doc_blocks.run_page(str(page))
    assert failure.startswith(f"error: {page}:5: shell block exited 1, not 0\n")


def test_a_rewrite_pair_is_what_the_command_writes(tmp_path: Path) -> None:
    before = "import jax\n\nc, ys = jax.lax.scan(f, c, xs)\n"
    after = "import scanrewrite.runtime\n\nc, ys = scanrewrite.runtime.scan(f, c, xs, unroll=2)\n"
    page = tmp_path / "page.md"
    page.write_text(f"<!-- rewrite: --unroll 2 -->\n```python\n{before}```\n\n```python\n{after}```\n")
    assert doc_blocks.run_page(str(page)) == []
    page.write_text(f"<!-- rewrite: --unroll 3 -->\n```python\n{before}```\n\n```python\n{after}```\n")
    (failure,) = doc_blocks.run_page(str(page))
    assert f"{page}:3: `scanrewrite -q --unroll 3` (exit 0) does not give the block at line 9" in failure
    assert "+c, ys = scanrewrite.runtime.scan(f, c, xs, unroll=3)" in failure


def _offline_site(tmp_path: Path, page: str, css: str = "") -> subprocess.CompletedProcess[str]:
    (tmp_path / "index.html").write_text(page)
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "main.css").write_text(css)
    return subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "offline_site.py"), str(tmp_path)], capture_output=True, text=True
    )


def test_the_offline_check_passes_a_site_that_loads_only_its_own_files(tmp_path: Path) -> None:
    page = (
        '<link rel="stylesheet" href="assets/main.css"><a href="https://example.org">a link</a>'
        '<pre class="mermaid">flowchart LR</pre><script src="javascripts/mermaid.min.js"></script>'
        '<link rel="canonical" href="https://example.org/"><img src="img/a.png">'
    )
    result = _offline_site(tmp_path, page, css='@font-face { src: url("fonts/a.woff2") }')
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("page", "css", "found"),
    [
        ('<script src="https://cdn.example/x.js"></script>', "", "index.html:1: <script src=https://cdn.example/x.js>"),
        ('<link rel="stylesheet" href="//fonts.example/css">', "", "index.html:1: <link href=//fonts.example/css>"),
        ('\n<link rel="preconnect" href="https://fonts.gstatic.com">', "", "index.html:2: <link href=https://fonts.gstatic.com>"),
        ('<img srcset="a.png 1x, https://x.example/b.png 2x">', "", "index.html:1: <img srcset=https://x.example/b.png>"),
        ('<p style="background: url(http://x.example/a.png)">', "", "index.html:1: url(http://x.example/a.png)"),
        ("", "a {}\n@import 'https://x.example/a.css';", "assets/main.css:2: url(https://x.example/a.css)"),
        ('<pre class="mermaid">flowchart LR</pre>', "", "index.html:1: a mermaid diagram, and no mermaid script"),
    ],
    ids=["script", "stylesheet", "font host", "srcset", "style attribute", "css import", "mermaid from a CDN"],
)
def test_the_offline_check_names_what_comes_from_outside(tmp_path: Path, page: str, css: str, found: str) -> None:
    result = _offline_site(tmp_path, page, css)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: {found}")
