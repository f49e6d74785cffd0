"""The import check that lets `rewrite` skip files (Python's parser, before libcst's
metadata): every import that can make a name resolve to a target keeps the file in."""

import warnings
from pathlib import Path

import pytest

from scanrewrite.codemod import Rewritten, Skipped, may_rewrite, rewrite
from scanrewrite.targets import DEFAULT_TARGETS
from update_goldens import golden_options


@pytest.mark.parametrize(
    ("imports", "call"),
    [
        ("import jax._src.lax", "jax.lax.scan"),  # binds `jax`, so jax.lax is jax's
        ("import numpy, jax.numpy", "jax.lax.scan"),
        ("import jax . lax as L", "L.scan"),
        ("from jax import (\n    numpy,\n    lax,\n)", "lax.scan"),
        ("from jax . lax import scan as s", "s"),
        ("from equinox import internal", "internal.scan"),
        ("if True:\n    from equinox.internal import scan", "scan"),
    ],
)
def test_imports_that_reach_a_target_are_rewritten(imports, call):
    source = f"{imports}\ny = {call}(f, c, xs)\n".encode()
    result = rewrite(source)
    assert [r.api for r in result.rewritten] in (["jax.lax.scan"], ["equinox.internal.scan"])
    assert result.rewritten[0].line == imports.count("\n") + 2


@pytest.mark.parametrize(
    "imports",
    ["from jax._src import lax", "from . import lax", "from .jax import lax", "import lax"],
)
def test_imports_that_cannot_reach_a_target_leave_the_file(imports):
    source = f"import numpy as jax\n{imports}\ny = lax.scan(f, c, xs)\n".encode()
    result = rewrite(source)
    assert (result.code, result.rewritten, result.skipped) == (source, (), ())


def test_pragmas_are_reported_without_a_target_import():
    source = b"from jax._src import lax\ny = lax.scan(f, c, xs)  # scanrewrite: unroll=x\n"
    assert rewrite(source).skipped == (Skipped(2, "malformed pragma 'unroll=x' (ignored)"),)


def test_the_check_warns_about_nothing_in_the_source():
    source = b'import jax\npattern = "\\d+"\ny = jax.lax.scan(f, c, xs)\n'
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # Python's parser warns about the invalid escape "\d"
        assert rewrite(source).rewritten == (Rewritten(3, "jax.lax.scan"),)
    assert caught == []


REACHES = {
    "import jax": "import jax\njax.lax.scan(f, 0, xs)\n",
    "import jax.numpy": "import jax.numpy as jnp\nimport jax.random\njax.lax.scan(f, 0, xs)\n",
    "from jax import lax": "from jax import lax as L\nL.scan(f, 0, xs)\n",
    "from jax.lax import scan as s": "from jax.lax import scan as s\ns(f, 0, xs)\n",
    "from jax.lax import *": "from jax.lax import *\nscan(f, 0, xs)\n",
    "import equinox.internal as eqxi": "import equinox.internal as eqxi\neqxi.scan(f, 0, xs, kind='lax')\n",
    "import in a function": "def g():\n    from jax import lax\n    return lax.scan(f, 0, xs)\n",
    "does not parse": "import jax\njax.lax.scan(f, 0, xs\n",
}
CANNOT_REACH = {
    "internal import": "from jax._src.lax import control_flow\ncontrol_flow.scan(f, 0, xs)\n",
    "relative import": "from . import lax\nlax.scan(f, 0, xs)\n",
    "only in a string": "import jax\n'''jax.lax.scan(f, 0, xs)'''\n# lax.scan\n",
    "no identifier scan": "import jax\nprimitive = jax.lax.scan_p\nname = 'scan'\n",
    "jax.numpy as": "import jax.numpy as jnp\njnp.lax.scan(f, 0, xs)\n",
    "no import": "def scan(f, init, xs):\n    return f\nscan(f, 0, xs)\n",
}


@pytest.mark.parametrize("source", REACHES.values(), ids=REACHES.keys())
def test_files_that_may_hold_a_known_api_go_through_the_rewrite(source: str) -> None:
    assert may_rewrite(source.encode())


@pytest.mark.parametrize("source", CANNOT_REACH.values(), ids=CANNOT_REACH.keys())
def test_files_that_cannot_are_left_out_and_the_rewrite_agrees(source: str) -> None:
    assert not may_rewrite(source.encode())
    result = rewrite(source.encode())
    assert (result.changed, result.rewritten, result.skipped) == (False, (), ())


def test_every_fixture_goes_through_the_rewrite() -> None:
    fixtures = sorted((Path(__file__).resolve().parents[1] / "fixtures").glob("*.py"))
    assert fixtures
    assert all(may_rewrite(path.read_bytes(), golden_options(path.stem).get("targets", DEFAULT_TARGETS)) for path in fixtures)
