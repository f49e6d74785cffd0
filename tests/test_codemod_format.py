"""A file that ruff format and black leave unchanged, they leave unchanged once rewritten
(and once the rewrite is reverted).

Checked with the formatters themselves, at the default line length and a configured one,
on every fixture and every before/after case of the codemod tests: each case as it is
(when the formatter leaves it alone) and as the formatter lays it out. Then the layout
itself: a call that still fits stays on one line, one that does not is split as the
formatters split it, and a statement they would not leave alone is not touched.
"""

import functools
import importlib
import subprocess
import sys
import textwrap

import pytest
from _pytest.mark.structures import ParameterSet
from update_goldens import FIXTURE_DIR

from scanrewrite.codemod import SourceError, revert, rewrite
from scanrewrite.targets import TARGET_NAMES

black = pytest.importorskip("black", reason="black is in the test extras")
pytest.importorskip("ruff", reason="ruff is in the test extras")

LENGTHS = (88, 79)
#: The modules whose before/after cases are checked too.
CASE_MODULES = (
    "test_codemod",
    "test_codemod_checkpoints",
    "test_codemod_imports",
    "test_codemod_levels",
    "test_codemod_skips",
    "test_codemod_targets",
)


@functools.cache
def _cases() -> dict[str, str]:
    """Every fixture, and the first source of every `pytest.param` case in `CASE_MODULES`."""
    cases = {f"fixtures/{path.name}": path.read_text() for path in sorted(FIXTURE_DIR.glob("*.py"))}
    for name in CASE_MODULES:
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if not (isinstance(value, list) and value and all(isinstance(case, ParameterSet) for case in value)):
                continue
            for case in value:
                source = next((item for item in case.values if isinstance(item, str) and "\n" in item), None)
                if source is not None:
                    cases[f"{name}.{attribute}[{case.id}]"] = textwrap.dedent(source)
    return cases


def _black(sources: list[str], line_length: int) -> list[str | None]:
    mode = black.Mode(line_length=line_length)
    out = []
    for source in sources:
        try:
            out.append(black.format_str(source, mode=mode))
        except Exception:  # noqa: BLE001 - a case black cannot parse is not one it leaves alone
            out.append(None)
    return out


def _ruff(sources: list[str], line_length: int, folder) -> list[str | None]:
    """ruff format on all of `sources` in one run."""
    paths = [folder / f"case_{index}.py" for index in range(len(sources))]
    for path, source in zip(paths, sources):
        path.write_text(source)
    command = [sys.executable, "-m", "ruff", "format", "--isolated", "--quiet", f"--line-length={line_length}"]
    subprocess.run([*command, str(folder)], capture_output=True, check=False)
    return [path.read_text() for path in paths]


@functools.cache  # most cases are the same text for both formatters
def _rewritten(source: str, line_length: int) -> str | None:
    try:
        return rewrite(source.encode(), targets=TARGET_NAMES, line_length=line_length).code.decode()
    except SourceError:
        return None


@functools.cache
def _reverted(code: str, line_length: int) -> str:
    return revert(code.encode(), line_length=line_length).code.decode()


@functools.cache
def _checked(formatter: str, line_length: int, folder) -> tuple[int, list[str]]:
    """How many (case, layout) pairs the formatter left alone before the rewrite, and
    those it changes after it, or after the revert of the rewrite, with the diff."""
    cases = _cases()
    names = list(cases)

    def run(sources: list[str]) -> list[str | None]:
        if formatter == "black":
            return _black(sources, line_length)
        folder.mkdir(exist_ok=True)
        return _ruff(sources, line_length, folder)

    first = run([cases[name] for name in names])
    second = run([text or "" for text in first])
    candidates = []
    for name, original, formatted, again in zip(names, (cases[name] for name in names), first, second):
        if formatted == original:
            candidates.append((name, original))
        elif formatted is not None and again == formatted:
            candidates.append((f"{name} (as {formatter} lays it out)", formatted))
    rewritten = [(name, _rewritten(source, line_length)) for name, source in candidates]
    rewritten = [(name, code) for name, code in rewritten if code is not None]
    checked = len(rewritten)
    rewritten += [(f"{name}, reverted", _reverted(code, line_length)) for name, code in rewritten if "scanrewrite" in code]
    after = run([code for _, code in rewritten])
    broken = []
    for (name, code), formatted in zip(rewritten, after):
        if formatted != code:
            import difflib

            diff = "".join(difflib.unified_diff(code.splitlines(True), (formatted or "").splitlines(True), n=1))
            broken.append(f"{name}:\n{diff}")
    return checked, broken


@pytest.mark.parametrize("line_length", LENGTHS)
@pytest.mark.parametrize("formatter", ["ruff", "black"])
def test_formatted_stays_formatted(formatter, line_length, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"{formatter}{line_length}")
    checked, broken = _checked(formatter, line_length, folder)
    assert checked > 150
    assert not broken, "\n".join(broken)


LAYOUTS = [
    pytest.param(
        "import jax\nc, ys = jax.lax.scan(step, c, xs)\n",
        "import scanrewrite.runtime\nc, ys = scanrewrite.runtime.scan(step, c, xs, unroll=4)\n",
        88,
        id="still fits: one line",
    ),
    pytest.param(
        "import jax\n\n\ndef f(step_fn, carry, inputs):\n    final_carry, outputs = jax.lax.scan(step_fn, carry, inputs)\n",
        "import scanrewrite.runtime\n\n\ndef f(step_fn, carry, inputs):\n"
        "    final_carry, outputs = scanrewrite.runtime.scan(\n        step_fn, carry, inputs, unroll=4\n    )\n",
        79,
        id="too long: the arguments on one line of their own",
    ),
    pytest.param(
        "from jax.lax import scan\ny = scan(step_function, carry, inputs, length=n)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(\n"
        "    step_function,\n    carry,\n    inputs,\n    length=n,\n    unroll=4,\n)\n",
        50,
        id="still too long: one argument per line, trailing comma",
    ),
    pytest.param(
        "import jax\nreturn_value = jax.lax.scan(step_fn, carry_in, inputs)[1]\n",
        "import scanrewrite.runtime\nreturn_value = scanrewrite.runtime.scan(\n    step_fn, carry_in, inputs, unroll=4\n)[1]\n",
        60,
        id="a subscript after the call",
    ),
    pytest.param(
        "import jax\ny = jax.lax.scan(\n    step,\n    c,\n    xs,\n)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(\n    step,\n    c,\n    xs,\n    unroll=4,\n)\n",
        88,
        id="exploded with a magic trailing comma: stays exploded",
    ),
    pytest.param(
        "import jax\nfinal_carry, outputs = jax.lax.scan(step_fn, carry, inputs)  # the rollout\n",
        "import scanrewrite.runtime\nfinal_carry, outputs = scanrewrite.runtime.scan(\n"
        "    step_fn, carry, inputs, unroll=4\n)  # the rollout\n",
        88,
        id="a comment at the end stays at the end",
    ),
    pytest.param(
        "import jax\nfinal_carry, outputs = jax.lax.scan(step_fn, carry, inputs)  # noqa: F841\n",
        "import scanrewrite.runtime\nfinal_carry, outputs = scanrewrite.runtime.scan(step_fn, carry, inputs, unroll=4)  # noqa: F841\n",
        88,
        id="a noqa comment, which ruff does not count and black does: left as it is",
    ),
    pytest.param(
        "import jax\nfinal_carry, outputs = jax.lax.scan( step_fn, carry, inputs )\n",
        "import scanrewrite.runtime\nfinal_carry, outputs = scanrewrite.runtime.scan( step_fn, carry, inputs, unroll=4 )\n",
        70,
        id="not formatted before: not formatted after",
    ),
    pytest.param(
        "import jax\n# fmt: off\nfinal_carry, outputs = jax.lax.scan(step_fn, carry, inputs)\n",
        "import scanrewrite.runtime\n# fmt: off\nfinal_carry, outputs = scanrewrite.runtime.scan(step_fn, carry, inputs, unroll=4)\n",
        70,
        id="fmt: off",
    ),
    pytest.param(
        "import jax\nfinal_carry, outputs = jax.lax.scan(step_fn, carry, inputs)\n",
        "import scanrewrite.runtime\nfinal_carry, outputs = scanrewrite.runtime.scan(step_fn, carry, inputs, unroll=4)\n",
        None,
        id="no line length: the call's own layout",
    ),
]


@pytest.mark.parametrize(("before", "after", "line_length"), LAYOUTS)
def test_layout(before, after, line_length):
    result = rewrite(before.encode(), line_length=line_length)
    assert result.code.decode() == after
    assert rewrite(result.code, line_length=line_length).code == result.code
