"""The revert (`revert`): before/after pairs, no-op cases, skips, notes and layout."""

from __future__ import annotations

import textwrap

import pytest

from scanrewrite.codemod import SourceError, revert, rewrite
from scanrewrite.codemod._writeback import NO_CALL
from tests import test_codemod_imports


def _src(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else textwrap.dedent(text).encode()


REVERT = [
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        z = jax.jit(g)
        """,
        """\
        import jax

        y = jax.lax.scan(f, c, xs)
        z = jax.jit(g)
        """,
        id="import jax kept: jax.lax.scan",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        from jax import lax

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        z = lax.cond(p, a, b)
        """,
        """\
        from jax import lax

        y = lax.scan(f, c, xs)
        z = lax.cond(p, a, b)
        """,
        id="from jax import lax kept: lax.scan",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime
        from jax import lax as L

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        z = L.cond(p, a, b), jax.jit
        """,
        """\
        import jax
        from jax import lax as L

        y = L.scan(f, c, xs)
        z = L.cond(p, a, b), jax.jit
        """,
        id="the most specific import in reach",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        from jax import lax
        from jax.lax import scan

        z = lax.cond
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        """\
        from jax import lax
        from jax.lax import scan

        z = lax.cond
        y = scan(f, c, xs)
        """,
        id="the most specific import in reach, though nothing reads it",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime
        from jax.lax import scan

        z = jax.jit, scan
        y = scanrewrite.runtime.scan(
            lambda c, x: scanrewrite.runtime.scan(f, c, xs, length=n, unroll=4), init=c, xs=xs, unroll=4
        )
        """,
        """\
        import jax
        from jax.lax import scan

        z = jax.jit, scan
        y = scan(
            lambda c, x: scan(f, c, xs, length=n), init=c, xs=xs
        )
        """,
        id="a statement not laid out as the formatters do keeps its layout, the callees spelled anew",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        from jax.lax import scan

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        z = scan(f, c, xs)  # scanrewrite: skip
        """,
        """\
        from jax.lax import scan

        y = scan(f, c, xs)
        z = scan(f, c, xs)  # scanrewrite: skip
        """,
        id="from jax.lax import scan kept for a skipped call",
    ),
    pytest.param(
        """\
        import equinox as eqx
        import scanrewrite.runtime

        y = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="checkpointed", unroll=4)
        m = eqx.Module
        """,
        """\
        import equinox as eqx

        y = eqx.internal.scan(f, c, xs, kind="checkpointed")
        m = eqx.Module
        """,
        id="eqxi through import equinox as eqx",
    ),
    pytest.param(
        """\
        import jax.numpy as jnp
        import scanrewrite.runtime
        from jax import jit, vmap

        y = scanrewrite.runtime.scan(f, jnp.zeros(2), xs, unroll=4)
        """,
        """\
        import jax.numpy as jnp
        from jax import jit, lax, vmap

        y = lax.scan(f, jnp.zeros(2), xs)
        """,
        id="import removed: the name goes back into the from line, in order",
    ),
    pytest.param(
        """\
        from functools import partial

        import scanrewrite.runtime
        from jax import jit

        state, history = jit(partial(scanrewrite.runtime.scan, one_step, unroll=4))(state, keys)
        """,
        """\
        from functools import partial

        from jax import jit, lax

        state, history = jit(partial(lax.scan, one_step))(state, keys)
        """,
        id="functools.partial of the runtime's scan",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        from jax import (
            jit,
            vmap,
        )

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        """\
        from jax import (
            jit,
            lax,
            vmap,
        )

        y = lax.scan(f, c, xs)
        """,
        id="into a parenthesized from line, in its layout",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        from jax import Array, jit

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        """\
        from jax import Array, jit, lax

        y = lax.scan(f, c, xs)
        """,
        id="after the classes, among the functions, at the end",
    ),
    pytest.param(
        """\
        import os

        import jax.numpy as jnp
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, jnp.zeros(2), xs, unroll=4)
        """,
        """\
        import os

        import jax
        import jax.numpy as jnp

        y = jax.lax.scan(f, jnp.zeros(2), xs)
        """,
        id="import removed, no from line: import jax where the sorters put it",
    ),
    pytest.param(
        """\
        import os

        import scanrewrite.runtime

        from . import helpers


        def run(c, xs):
            return scanrewrite.runtime.scan(f, c, xs, unroll=4), os, helpers
        """,
        """\
        import os

        import jax

        from . import helpers


        def run(c, xs):
            return jax.lax.scan(f, c, xs), os, helpers
        """,
        id="a section of its own stays one",
    ),
    pytest.param(
        """\
        import os

        import scanrewrite.runtime

        from . import helpers

        y = scanrewrite.runtime.override
        z = helpers.scan(os)
        """,
        """\
        import os

        import scanrewrite.runtime

        from . import helpers

        y = scanrewrite.runtime.override
        z = helpers.scan(os)
        """,
        id="no runtime call: nothing changes",
    ),
    pytest.param(
        """\
        import os

        import jax
        import scanrewrite.runtime

        from . import helpers

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4), os, helpers
        """,
        """\
        import os

        import jax

        from . import helpers

        y = jax.lax.scan(f, c, xs), os, helpers
        """,
        id="the runtime import goes with no blank line left behind",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        z = scanrewrite.runtime.override(unroll=2)
        """,
        """\
        import jax
        import scanrewrite.runtime

        y = jax.lax.scan(f, c, xs)
        z = scanrewrite.runtime.override(unroll=2)
        """,
        id="the runtime import stays while something uses it",
    ),
    pytest.param(
        """\
        import jax
        from scanrewrite.runtime import scan

        y = scan(f, c, xs, unroll=4)
        """,
        """\
        import jax

        y = jax.lax.scan(f, c, xs)
        """,
        id="a runtime name imported by hand",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=jax.checkpoint_policies.dots_saveable, levels=2)
        """,
        """\
        import jax

        y = jax.lax.scan(f, c, xs)
        """,
        id="checkpoint and levels dropped",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=scanrewrite.runtime.reductions_saveable)
        """,
        """\
        import jax

        y = jax.lax.scan(f, c, xs)
        """,
        id="a runtime policy dropped",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=1, store=4)
        """,
        """\
        import jax

        y = jax.lax.scan(f, c, xs)
        """,
        id="stored steps dropped",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime
        from jax import lax

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=jax.checkpoint_policies.dots_saveable)
        z = lax.cond(p, a, b)
        """,
        """\
        from jax import lax

        y = lax.scan(f, c, xs)
        z = lax.cond(p, a, b)
        """,
        id="the import jax a policy needed goes with it",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, None, False, 2)
        z = scanrewrite.runtime.scan(f, c, xs, unroll=k)
        w = scanrewrite.runtime.scan(f, c, xs, unroll=True)
        """,
        """\
        import jax

        y = jax.lax.scan(f, c, xs, None, False, 2)
        z = jax.lax.scan(f, c, xs, unroll=k)
        w = jax.lax.scan(f, c, xs, unroll=True)
        """,
        id="an unroll the rewrite never writes is the user's and stays",
    ),
    pytest.param(
        """\
        import equinox.internal as eqxi
        import scanrewrite.runtime

        y = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="lax", unroll=k)
        z = eqxi.while_loop
        """,
        """\
        import equinox.internal as eqxi

        y = eqxi.scan(f, c, xs, kind="lax")
        z = eqxi.while_loop
        """,
        id="equinox.internal.scan takes no unroll at all",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime

        h, ys = scanrewrite.runtime.scan(
            step,  # the body
            h0,
            xs,
            unroll=4,  # picked by scanrewrite-tune
            checkpoint=False,
        )
        """,
        """\
        import jax

        h, ys = jax.lax.scan(
            step,  # the body
            h0,
            xs,
        )
        """,
        id="one per line with a magic trailing comma stays so",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime


        def f():
            h, ys = scanrewrite.runtime.scan(
                step_function, initial_hidden_state, inputs_sequence, unroll=4
            )[0]
            return h
        """,
        """\
        import jax


        def f():
            h, ys = jax.lax.scan(step_function, initial_hidden_state, inputs_sequence)[0]
            return h
        """,
        id="a hugged call that fits on one line again is joined",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime


        def f():
            hidden_states, outputs = scanrewrite.runtime.scan(
                step_function, initial_hidden_state, inputs_sequence, length=n, unroll=4
            )
            return h
        """,
        """\
        import jax


        def f():
            hidden_states, outputs = jax.lax.scan(
                step_function, initial_hidden_state, inputs_sequence, length=n
            )
            return h
        """,
        id="a hugged call still too long stays hugged",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime


        def f():
            return (
                scanrewrite.runtime.scan(
                    step,
                    initial_state,
                    inputs,
                    unroll=4,
                    checkpoint=jax.checkpoint_policies.dots_saveable,
                ),
                jax.lax.cond,
            )
        """,
        """\
        import jax


        def f():
            return jax.lax.scan(step, initial_state, inputs), jax.lax.cond
        """,
        id="commas and parentheses the formatters add to a split go when it fits again",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime

        h, ys = scanrewrite.runtime.scan(
            step,
            h0,
            xs,
            unroll=4,
        )
        z = (scanrewrite.runtime.scan(f, c, xs, unroll=4), jax.lax.cond)
        """,
        """\
        import jax

        h, ys = jax.lax.scan(
            step,
            h0,
            xs,
        )
        z = (jax.lax.scan(f, c, xs), jax.lax.cond)
        """,
        id="the user's magic trailing comma and parentheses stay",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime

        y = jax.lax.scan(
            lambda c, x: scanrewrite.runtime.scan(f, c, xs, unroll=4), c, xs
        )  # scanrewrite: skip
        """,
        """\
        import jax

        y = jax.lax.scan(
            lambda c, x: jax.lax.scan(f, c, xs), c, xs
        )  # scanrewrite: skip
        """,
        id="a call off a skip pragma's line is not joined onto it",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(
            lambda c, x: scanrewrite.runtime.scan(f, c, xs, unroll=4), c, xs, unroll=4, levels=2
        )  # scanrewrite: levels=2
        """,
        """\
        import jax

        y = jax.lax.scan(
            lambda c, x: jax.lax.scan(f, c, xs), c, xs
        )  # scanrewrite: levels=2
        """,
        id="nor onto a pragma's line that would give it other settings",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(
            lambda c, x: scanrewrite.runtime.scan(f, c, xs, unroll=4, levels=2),
            c,
            xs,
            unroll=4,
            levels=2,
        )  # scanrewrite: levels=2
        """,
        """\
        import jax

        y = jax.lax.scan(lambda c, x: jax.lax.scan(f, c, xs), c, xs)  # scanrewrite: levels=2
        """,
        id="but joined onto one whose settings it has",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        from jax import lax


        @lax.scan(
            lambda c, x: scanrewrite.runtime.scan(f, c, xs, unroll=4), c, xs
        )  # scanrewrite: skip
        def g():
            pass
        """,
        """\
        from jax import lax


        @lax.scan(
            lambda c, x: lax.scan(f, c, xs), c, xs
        )  # scanrewrite: skip
        def g():
            pass
        """,
        id="a decorator's call off a skip pragma's line is not joined onto it",
    ),
    pytest.param(
        """\
        import jax
        import scanrewrite.runtime

        y = (scanrewrite.runtime.scan)(f, c, xs, unroll=4)
        z = [scanrewrite.runtime.scan(g, c, x, unroll=4)[0] for x in xss]
        """,
        """\
        import jax

        y = (jax.lax.scan)(f, c, xs)
        z = [jax.lax.scan(g, c, x)[0] for x in xss]
        """,
        id="parenthesized callee, in a comprehension",
    ),
    pytest.param(
        """\
        from typing import TYPE_CHECKING

        import scanrewrite.runtime

        if TYPE_CHECKING:
            from jax.lax import scan as typed_scan

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        """\
        from typing import TYPE_CHECKING

        import jax

        if TYPE_CHECKING:
            from jax.lax import scan as typed_scan

        y = jax.lax.scan(f, c, xs)
        """,
        id="a name bound only for type checkers is not used",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime

        try:
            from jax import lax
        except ImportError:
            lax = None

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        """\
        import jax

        try:
            from jax import lax
        except ImportError:
            lax = None

        y = jax.lax.scan(f, c, xs)
        """,
        id="nor one bound in a try",
    ),
    pytest.param(
        """\
        import sys

        import scanrewrite.runtime

        if sys.version_info >= (3, 11):
            import jax


        def run(c, xs):
            return scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        """\
        import sys

        import jax

        if sys.version_info >= (3, 11):
            import jax


        def run(c, xs):
            return jax.lax.scan(f, c, xs)
        """,
        id="an import under a branch gets a sure one beside it",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        from jax.lax import scan
        """,
        """\
        import jax

        y = jax.lax.scan(f, c, xs)
        from jax.lax import scan
        """,
        id="nor one that runs after the call",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime


        def run(c, xs):
            return scanrewrite.runtime.scan(f, c, xs, unroll=4)


        from jax import lax
        """,
        """\
        def run(c, xs):
            return lax.scan(f, c, xs)


        from jax import lax
        """,
        id="but one below a function that runs later is",
    ),
    pytest.param(
        "import jax\nimport scanrewrite.runtime  # noqa: F401\n\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4)\n",
        "import jax\nimport scanrewrite.runtime  # noqa: F401\n\ny = jax.lax.scan(f, c, xs)\n",
        id="a runtime import marked noqa stays",
    ),
    pytest.param(
        "import jax\nfrom scanrewrite.runtime import scan as scan\n\ny = scan(f, c, xs, unroll=4)\n",
        "import jax\nfrom scanrewrite.runtime import scan as scan\n\ny = jax.lax.scan(f, c, xs)\n",
        id="a runtime re-export stays",
    ),
    pytest.param(
        'import jax\nfrom scanrewrite import runtime\n\n__all__ = ("runtime",)\ny = runtime.scan(f, c, xs, unroll=4)\n',
        'import jax\nfrom scanrewrite import runtime\n\n__all__ = ("runtime",)\ny = jax.lax.scan(f, c, xs)\n',
        id="a runtime import in __all__ stays",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        from jax.lax import (
            cond,  # noqa: F401
            while_loop,  # the loop
        )

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        """\
        from jax.lax import (
            cond,  # noqa: F401
            scan,
            while_loop,  # the loop
        )

        y = scan(f, c, xs)
        """,
        id="a name added to a from-import: each comment stays on its name's line",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        from jax.lax import (  # control flow
            cond,  # noqa: F401
        )

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        """\
        from jax.lax import (  # control flow
            cond,  # noqa: F401
            scan,
        )

        y = scan(f, c, xs)
        """,
        id="a name added last: the comment stays on the line of the name before",
    ),
    pytest.param(
        b"import jax\r\nimport scanrewrite.runtime\r\n\r\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4)\r\n",
        b"import jax\r\n\r\ny = jax.lax.scan(f, c, xs)\r\n",
        id="crlf",
    ),
]


@pytest.mark.parametrize(("before", "after"), REVERT)
def test_revert(before: str | bytes, after: str | bytes) -> None:
    result = revert(_src(before))
    assert result.code.decode() == _src(after).decode()
    assert revert(result.code).code == result.code, "not idempotent"


NOOP = [
    pytest.param("import jax\n\ny = jax.lax.scan(f, c, xs)\n", id="no runtime call"),
    pytest.param("x = 1\n", id="no scan at all"),
    pytest.param(
        "import scanrewrite.runtime\n\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4)  # scanrewrite: skip\n",
        id="skip pragma",
    ),
    pytest.param(
        "# scanrewrite: skip-file\nimport scanrewrite.runtime\n\ny = scanrewrite.runtime.scan(f, c, xs)\n",
        id="skip-file pragma",
    ),
    pytest.param(
        "import scanrewrite.runtime\n\nscan = scanrewrite.runtime.scan\n", id="a reference, not a call"
    ),
    pytest.param(
        "import scanrewrite.runtime\n\n\ndef f(jax):\n    return scanrewrite.runtime.scan(g, c, xs, unroll=4)\n",
        id="jax bound to something else",
    ),
]


@pytest.mark.parametrize("source", NOOP)
def test_noop(source: str) -> None:
    result = revert(source.encode())
    assert result.code == source.encode()
    assert not result.changed


@pytest.mark.parametrize(
    ("source", "skipped"),
    [
        pytest.param(NOOP[2].values[0], [(3, "skip pragma")], id="skip pragma"),
        pytest.param(NOOP[3].values[0], [(1, "skip-file pragma")], id="skip-file pragma"),
        pytest.param(NOOP[5].values[0], [(5, "the name `jax` is bound to something else here")], id="jax shadowed"),
    ],
)
def test_skips_say_why(source: str, skipped: list[tuple[int, str]]) -> None:
    result = revert(source.encode())
    assert [(skip.line, skip.reason) for skip in result.skipped] == skipped


def test_lines_reverts_only_the_calls_named():
    source = _src(
        """\
        import jax
        import scanrewrite.runtime

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        z = scanrewrite.runtime.scan(g, c, xs, unroll=2)
        """
    )
    result = revert(source, lines=[5, 9])
    assert result.code == source.replace(b"scanrewrite.runtime.scan(g, c, xs, unroll=2)", b"jax.lax.scan(g, c, xs)")
    assert [call.line for call in result.rewritten] == [5]
    assert [(skip.line, skip.reason) for skip in result.skipped] == [(9, NO_CALL)]


def test_notes_where_dropping_an_option_changes_memory():
    source = _src(
        """\
        import jax
        import scanrewrite.runtime

        a = scanrewrite.runtime.scan(f, c, xs, unroll=4, levels=2)
        b = scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=jax.checkpoint_policies.dots_saveable)
        c = scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=False, levels=2)
        d = scanrewrite.runtime.scan(f, c, xs, unroll=4, checkpoint=True, levels=1)
        e = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="lax", unroll=4)
        """
    )
    notes = {call.line: call.note for call in revert(source).rewritten}
    assert notes == {
        4: "dropped levels=2: memory as jax.lax.scan's again",
        5: "dropped checkpoint=jax.checkpoint_policies.dots_saveable: memory as jax.lax.scan's again",
        # Without checkpointing, nothing was saved and nothing is lost.
        6: None,
        7: None,
        8: None,
    }
    assert [call.api for call in revert(source).rewritten][-1] == "equinox.internal.scan"


def test_bad_source_is_a_source_error():
    with pytest.raises(SourceError, match="cannot parse"):
        revert(b"import scanrewrite.runtime\ny = (\n")


@pytest.mark.parametrize(
    "before", [pytest.param(param.values[0], id=param.id) for param in test_codemod_imports.KEPT if "removed" not in param.id]
)
def test_revert_keeps_the_imports_the_rewrite_kept(before: str) -> None:
    """Where the rewrite kept the import a call used (marked to keep), the revert spells the
    call through it again: the round trip is the original, byte for byte."""
    source = _src(before)
    assert revert(rewrite(source).code).code == source


def test_revert_undoes_rewrite_with_every_option():
    source = _src(
        """\
        import jax.numpy as jnp
        from jax import lax


        def f(c, xs):
            return lax.scan(step, c, xs), lax.cond
        """
    )
    for options in ({"unroll": 3}, {"checkpoint": "none"}, {"checkpoint": "dots_saveable", "levels": "auto"}):
        rewritten = rewrite(source, **options).code
        assert revert(rewritten).code == source, options
        assert rewrite(revert(rewritten).code, **options).code == rewritten, options
