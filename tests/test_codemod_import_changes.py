"""`import_changes`: the imported names a file lost and gained, which `-v` reports, as
(before, after) pairs, then through the rewrite and the revert themselves."""

from __future__ import annotations

import pytest

from scanrewrite.codemod import ImportChanges, import_changes, read_unroll, revert, rewrite, write_picks

CALL = "\n\ndef f(c, xs):\n    return {}(lambda c, x: (c, x), c, xs)\n"


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("import jax\n", id="import"),
        pytest.param("from jax import jit, lax\nfrom . import model\n", id="from"),
        pytest.param("def f():\n    from jax.lax import scan\n", id="in a function"),
        pytest.param("x = 1\n", id="no import"),
    ],
)
def test_noop(source: str) -> None:
    assert import_changes(source.encode(), source.encode()) == ImportChanges()
    assert not import_changes(source.encode(), source.encode())


@pytest.mark.parametrize(
    ("before", "after", "removed", "added"),
    [
        pytest.param(
            "from jax.lax import scan\n",
            "import scanrewrite.runtime\n",
            [(1, "from jax.lax import scan")],
            [(1, "import scanrewrite.runtime")],
            id="one for another",
        ),
        pytest.param(
            "import os\nfrom jax import (\n    jit,\n    lax,\n)\n",
            "import os\nfrom jax import jit\n",
            [(4, "from jax import lax")],
            [],
            id="one name of several, on its own line",
        ),
        pytest.param(
            "import jax.lax as L\nfrom .. import model as m\n",
            "from .. import model as m\nimport jax\n",
            [(1, "import jax.lax as L")],
            [(2, "import jax")],
            id="aliases and relative imports, moved lines",
        ),
        pytest.param(
            "import jax\n\n\ndef f():\n    import jax\n",
            "import jax\n\n\ndef f():\n    pass\n",
            [(5, "import jax")],
            [],
            id="imported twice, once after",
        ),
        pytest.param(
            "from jax import lax\n",
            "from jax import lax as lax\n",
            [(1, "from jax import lax")],
            [(1, "from jax import lax as lax")],
            id="an alias is another import",
        ),
    ],
)
def test_before_after(before: str, after: str, removed: list, added: list) -> None:
    changes = import_changes(before.encode(), after.encode())
    assert (list(changes.removed), list(changes.added)) == (removed, added)


@pytest.mark.parametrize(
    ("source", "removed", "added", "restored"),
    [
        pytest.param(
            "from jax.lax import scan\n" + CALL.format("scan"),
            [(1, "from jax.lax import scan")],
            [(1, "import scanrewrite.runtime")],
            False,
            id="from jax.lax import scan",
        ),
        pytest.param(
            "from jax import lax\n" + CALL.format("lax.scan"),
            [(1, "from jax import lax")],
            [(1, "import scanrewrite.runtime")],
            False,
            id="from jax import lax",
        ),
        pytest.param(
            "import jax\n" + CALL.format("jax.lax.scan"),
            [(1, "import jax")],
            [(1, "import scanrewrite.runtime")],
            True,
            id="import jax",
        ),
        pytest.param(
            "import jax\nfrom jax.lax import scan\n\nx = jax.jit(scan)\n" + CALL.format("scan"),
            [],
            [(2, "import scanrewrite.runtime")],
            True,
            id="the import still used",
        ),
    ],
)
def test_through_the_rewrite_and_its_revert(source: str, removed: list, added: list, restored: bool) -> None:
    """What the rewrite changes in the imports, and whether its revert gives them back; where
    it does not, the revert spells the call through `import jax`."""
    result = rewrite(source.encode(), unroll=4)
    changes = import_changes(source.encode(), result.code)
    assert (list(changes.removed), list(changes.added)) == (removed, added)
    back = revert(result.code).code
    lost = import_changes(source.encode(), back)
    assert (back == source.encode(), not lost) == (restored, restored)
    if not restored:
        assert lost == ImportChanges(tuple(removed), ((1, "import jax"),))
        assert b"jax.lax.scan(" in back


def test_through_the_tuners_write_back_of_the_original() -> None:
    """Where the original scan wins, the tuner writes it back as the revert does: through
    `import jax`, which `scanrewrite-tune` names."""
    source = ("from jax.lax import scan\n" + CALL.format("scan")).encode()
    rewritten = rewrite(source, unroll=4).code
    (line,) = read_unroll(rewritten)
    written = write_picks(rewritten, {line: None}).code
    assert written == revert(rewritten).code
    changes = import_changes(rewritten, written)
    assert changes == ImportChanges(((1, "import scanrewrite.runtime"),), ((1, "import jax"),))
