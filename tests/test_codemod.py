"""Before/after and no-op cases for the rewrite: spellings, shadowing, layout, imports."""

import re
import textwrap
from pathlib import Path

import pytest

from scanrewrite.codemod import rewrite


def _src(text):
    return textwrap.dedent(text).encode()


def _assert_rewrites(before, after, **options):
    result = rewrite(_src(before), **options)
    assert result.code.decode() == textwrap.dedent(after)
    assert result.changed
    again = rewrite(result.code, **options)
    assert again.code == result.code, "not idempotent"
    assert not again.changed


def _assert_noop(source, **options):
    result = rewrite(_src(source), **options)
    assert result.code == _src(source)
    assert not result.changed
    assert result.rewritten == ()


SPELLINGS = [
    pytest.param(
        """\
        import jax
        y = jax.lax.scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="import jax",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="from jax import lax",
    ),
    pytest.param(
        """\
        from jax import lax as L
        y = L.scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="from jax import lax as L",
    ),
    pytest.param(
        """\
        import jax.lax as jl
        y = jl.scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="import jax.lax as jl",
    ),
    pytest.param(
        """\
        import jax.lax
        y = jax.lax.scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="import jax.lax",
    ),
    pytest.param(
        """\
        from jax.lax import scan
        y = scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="from jax.lax import scan",
    ),
    pytest.param(
        """\
        from jax.lax import scan as s
        y = s(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="from jax.lax import scan as s",
    ),
    pytest.param(
        """\
        import equinox.internal as eqxi
        y = eqxi.scan(f, c, xs, kind="checkpointed")
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="checkpointed", unroll=4)
        """,
        id="import equinox.internal as eqxi",
    ),
    pytest.param(
        """\
        from equinox import internal
        y = internal.scan(f, c, xs, kind="lax")
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="lax", unroll=4)
        """,
        id="from equinox import internal",
    ),
    pytest.param(
        """\
        from equinox.internal import scan
        y = scan(f, c, xs, kind="lax")
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="lax", unroll=4)
        """,
        id="from equinox.internal import scan",
    ),
    pytest.param(
        """\
        import equinox as eqx
        y = eqx.internal.scan(f, c, xs, kind="lax")
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="lax", unroll=4)
        """,
        id="import equinox as eqx",
    ),
    pytest.param(
        """\
        import equinox.internal
        y = equinox.internal.scan(f, c, xs, kind="lax")
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="lax", unroll=4)
        """,
        id="import equinox.internal",
    ),
    pytest.param(
        """\
        import jax as j
        y = j.lax.scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="import jax as j",
    ),
    pytest.param(
        """\
        import jax
        import jax.numpy as jnp
        y = jax.lax.scan(f, jnp.zeros(3), xs)
        """,
        """\
        import jax.numpy as jnp
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, jnp.zeros(3), xs, unroll=4)
        """,
        id="import jax removed when only the scan used it",
    ),
    pytest.param(
        """\
        from functools import partial

        from jax import jit, lax

        state, history = jit(partial(lax.scan, one_step))(state, keys)
        """,
        """\
        from functools import partial

        import scanrewrite.runtime
        from jax import jit

        state, history = jit(partial(scanrewrite.runtime.scan, one_step, unroll=4))(state, keys)
        """,
        id="functools.partial of the scan, called later (blackjax's inference loop)",
    ),
    pytest.param(
        """\
        import functools

        import jax

        scan_four = functools.partial(jax.lax.scan, length=4)
        y = jax.jit(scan_four)(f, c)
        """,
        """\
        import functools

        import jax
        import scanrewrite.runtime

        scan_four = functools.partial(scanrewrite.runtime.scan, length=4, unroll=4)
        y = jax.jit(scan_four)(f, c)
        """,
        id="functools.partial of the scan with a keyword",
    ),
    pytest.param(
        """\
        from functools import partial

        import equinox.internal as eqxi

        run = partial(eqxi.scan, kind="checkpointed", checkpoints="all")
        """,
        """\
        from functools import partial

        import scanrewrite.runtime

        run = partial(
            scanrewrite.runtime.eqxi_scan, kind="checkpointed", checkpoints="all", unroll=4
        )
        """,
        id="functools.partial of eqxi.scan",
    ),
]


@pytest.mark.parametrize(("before", "after"), SPELLINGS)
def test_spellings(before, after):
    _assert_rewrites(before, after)


PLACES = [
    pytest.param(
        """\
        from jax import lax
        def outer(c, xs):
            def inner(c, x):
                return lax.scan(g, c, x)
            return lax.scan(inner, c, xs)
        """,
        """\
        import scanrewrite.runtime
        def outer(c, xs):
            def inner(c, x):
                return scanrewrite.runtime.scan(g, c, x, unroll=4)
            return scanrewrite.runtime.scan(inner, c, xs, unroll=4)
        """,
        id="nested functions",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(lambda c, x: lax.scan(g, c, x), c, xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            lambda c, x: scanrewrite.runtime.scan(g, c, x, unroll=4), c, xs, unroll=4
        )
        """,
        id="nested scan in a lambda",
    ),
    pytest.param(
        """\
        import jax
        from jax import lax
        class Model:
            y = lax.scan(f, c, xs)
            def __call__(self, c, xs):
                return lax.scan(self.step, c, xs)
            @staticmethod
            def run(c, xs):
                return lax.scan(f, c, xs)
            @jax.jit
            def jitted(self, c, xs):
                return lax.scan(f, c, xs)
        """,
        """\
        import jax
        import scanrewrite.runtime
        class Model:
            y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
            def __call__(self, c, xs):
                return scanrewrite.runtime.scan(self.step, c, xs, unroll=4)
            @staticmethod
            def run(c, xs):
                return scanrewrite.runtime.scan(f, c, xs, unroll=4)
            @jax.jit
            def jitted(self, c, xs):
                return scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="class body, method, staticmethod, jitted method",
    ),
    pytest.param(
        """\
        from jax import lax
        ys = [lax.scan(f, c, x)[1] for x in xss]
        d = {k: lax.scan(f, c, x) for k, x in items}
        """,
        """\
        import scanrewrite.runtime
        ys = [scanrewrite.runtime.scan(f, c, x, unroll=4)[1] for x in xss]
        d = {k: scanrewrite.runtime.scan(f, c, x, unroll=4) for k, x in items}
        """,
        id="comprehensions",
    ),
    pytest.param(
        """\
        import jax
        from jax import lax
        @jax.jit
        def run(c, xs):
            return jax.vmap(lambda x: lax.scan(f, c, x))(xs)
        """,
        """\
        import jax
        import scanrewrite.runtime
        @jax.jit
        def run(c, xs):
            return jax.vmap(lambda x: scanrewrite.runtime.scan(f, c, x, unroll=4))(xs)
        """,
        id="under jit and vmap",
    ),
]


@pytest.mark.parametrize(("before", "after"), PLACES)
def test_places(before, after):
    _assert_rewrites(before, after)


LAYOUT = [
    pytest.param(
        "from jax import lax\ny = lax.scan(f, c, xs )\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4 )\n",
        id="space before the closing paren",
    ),
    pytest.param(
        "from jax import lax\ny = lax.scan(f,c,xs)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f,c,xs,unroll=4)\n",
        id="tight commas",
    ),
    pytest.param(
        "from jax import lax\ny = lax.scan(f, c, xs,)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=4,)\n",
        id="trailing comma on one line",
    ),
    pytest.param(
        "from jax import lax\ny = lax.scan (f, c, xs)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan (f, c, xs, unroll=4)\n",
        id="space before the opening paren",
    ),
    pytest.param(
        "from jax import lax\ny = (lax.scan)(f, c, xs)\n",
        "import scanrewrite.runtime\ny = (scanrewrite.runtime.scan)(f, c, xs, unroll=4)\n",
        id="parenthesised callee",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(
            f,  # the step
            c,
            xs,  # inputs
        )
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            f,  # the step
            c,
            xs,  # inputs
            unroll=4,
        )
        """,
        id="one per line with trailing comma and comments",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(
            f,
            c,
            xs
        )
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            f,
            c,
            xs,
            unroll=4
        )
        """,
        id="one per line without trailing comma",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(
            f,
            c,
            xs  # inputs
            # last words
        )
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            f,
            c,
            xs,  # inputs
            # last words
            unroll=4
        )
        """,
        id="comment after the last argument stays on its line",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(
            f, c, xs
        )
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            f, c, xs, unroll=4
        )
        """,
        id="arguments on one line inside a broken call",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(
            f, c, xs,
        )
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            f, c, xs, unroll=4,
        )
        """,
        id="arguments on one line with trailing comma",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(f,
                     c,
                     xs)
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f,
                     c,
                     xs,
                     unroll=4)
        """,
        id="hanging indent",
    ),
    pytest.param(
        """\
        from jax import lax
        def g():
        \ty = lax.scan(
        \t\tf,
        \t\tc,
        \t)
        \treturn y
        """,
        """\
        import scanrewrite.runtime
        def g():
        \ty = scanrewrite.runtime.scan(
        \t\tf,
        \t\tc,
        \t\tunroll=4,
        \t)
        \treturn y
        """,
        id="tabs",
    ),
    pytest.param(
        """\
        from jax import lax
        y = lax.scan(
            f,
            c,
            xs=xs,
            length=None,
        )
        """,
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            f,
            c,
            xs=xs,
            length=None,
            unroll=4,
        )
        """,
        id="keyword arguments",
    ),
    pytest.param(
        "from jax import lax\ny = lax.scan(f, c, *rest_before_unroll, unroll=2)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, *rest_before_unroll, unroll=2)\n",
        id="star args with explicit unroll keyword",
    ),
    pytest.param(
        "from jax import lax\ny = lax.scan(f, c, xs, **options, unroll=2)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, **options, unroll=2)\n",
        id="double star with explicit unroll keyword",
    ),
    pytest.param(
        "from jax import lax\ny = lax.scan(f, c, xs, None, False, 8)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, None, False, 8)\n",
        id="positional unroll kept",
    ),
    pytest.param(
        "from jax import lax\ny = lax.scan(f, c, xs, None, True)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, None, True, unroll=4)\n",
        id="positional reverse",
    ),
    pytest.param(
        "from jax import lax\ny = lax.scan(f, c, xs, unroll=True)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=True)\n",
        id="unroll keyword kept",
    ),
    pytest.param(
        "import equinox.internal as eqxi\ny = eqxi.scan(f, c, *xs_and_length, kind='lax')\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.eqxi_scan(f, c, *xs_and_length, kind='lax', unroll=4)\n",
        id="star args cannot reach a keyword-only unroll",
    ),
    pytest.param(
        "import equinox.internal as eqxi\ny = eqxi.scan(f, c, xs, **scan_options)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.eqxi_scan(f, c, xs, **scan_options, unroll=4)\n",
        id="double star cannot carry unroll to eqxi.scan, which has none",
    ),
]


@pytest.mark.parametrize(("before", "after"), LAYOUT)
def test_layout(before, after):
    if before == after:
        _assert_noop(before)
    else:
        _assert_rewrites(before, after)


IMPORTS = [
    pytest.param(
        '''\
        """Docstring mentioning lax.scan(f, c, xs)."""
        from __future__ import annotations

        from jax import lax

        # a comment about the scan
        y = lax.scan(f, c, xs)
        ''',
        '''\
        """Docstring mentioning lax.scan(f, c, xs)."""
        from __future__ import annotations

        import scanrewrite.runtime

        # a comment about the scan
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        ''',
        id="after docstring and future import",
    ),
    pytest.param(
        """\
        import os
        from jax import lax
        y = lax.scan(f, c, xs)
        z = lax.cond(p, a, b)
        """,
        """\
        import os
        import scanrewrite.runtime
        from jax import lax
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        z = lax.cond(p, a, b)
        """,
        id="import still used elsewhere is kept",
    ),
    pytest.param(
        """\
        from jax.lax import cond, scan  # control flow
        y = scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        from jax.lax import cond  # control flow
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="one name removed from a from-import",
    ),
    pytest.param(
        """\
        from jax.lax import (
            cond,
            scan,
        )

        y = scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        from jax.lax import (
            cond,
        )

        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="the last name removed from an exploded from-import: it still ends in a comma",
    ),
    pytest.param(
        """\
        import numpy as np
        import scanrewrite.runtime
        from jax import lax
        y = lax.scan(f, c, xs)
        """,
        """\
        import numpy as np
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="runtime already imported",
    ),
    pytest.param(
        """\
        import scanrewrite
        from scanrewrite import runtime
        from jax import lax
        y = lax.scan(f, c, xs)
        """,
        """\
        import scanrewrite
        import scanrewrite.runtime
        from scanrewrite import runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="import scanrewrite alone does not load the runtime",
    ),
    pytest.param(
        """\
        import os

        # Section comment
        from jax import lax

        def g(c, xs):
            return lax.scan(f, c, xs)
        """,
        """\
        import os

        # Section comment
        import scanrewrite.runtime

        def g(c, xs):
            return scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="comment above a removed import stays",
    ),
    pytest.param(
        """\
        import unused_module
        from jax import lax
        y = lax.scan(f, c, xs)
        """,
        """\
        import scanrewrite.runtime
        import unused_module
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="other unused import untouched",
    ),
    pytest.param(
        """\
        import os
        def g(c, xs):
            # local import
            from jax.lax import scan
            return scan(f, c, xs)
        """,
        """\
        import os

        import scanrewrite.runtime
        def g(c, xs):
            # local import
            return scanrewrite.runtime.scan(f, c, xs, unroll=4)
        """,
        id="function-local import",
    ),
    pytest.param(
        """\
        import equinox.internal as eqxi
        y = eqxi.scan(f, c, xs, kind="lax")
        z = eqxi.while_loop(cond, body, init, kind="lax")
        """,
        """\
        import equinox.internal as eqxi
        import scanrewrite.runtime
        y = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="lax", unroll=4)
        z = eqxi.while_loop(cond, body, init, kind="lax")
        """,
        id="eqxi kept while something else uses it",
    ),
    pytest.param(
        """\
        from jax import jit, lax


        def run(f, s, xs):
            y = lax.scan(f, s, xs)
            return jit(f)(y)
        """,
        """\
        import scanrewrite.runtime
        from jax import jit


        def run(f, s, xs):
            y = scanrewrite.runtime.scan(f, s, xs, unroll=4)
            return jit(f)(y)
        """,
        id="only the unused name leaves a from-import whose other name the same function reads",
    ),
]


@pytest.mark.parametrize(("before", "after"), IMPORTS)
def test_imports(before, after):
    _assert_rewrites(before, after)


NOOP = [
    pytest.param("", id="empty"),
    pytest.param("import jax\nx = jax.numpy.zeros(3)\n", id="no scan"),
    pytest.param(
        '''\
        """Use lax.scan(f, c, xs) like this."""
        from jax import lax
        doc = "lax.scan(f, c, xs)"
        # lax.scan(f, c, xs)
        ''',
        id="strings docstrings comments",
    ),
    pytest.param(
        """\
        def scan(f, c, xs):
            return c, xs
        y = scan(f, c, xs)
        """,
        id="local function named scan",
    ),
    pytest.param(
        """\
        from jax.lax import scan
        def g():
            def scan(f, c, xs):
                return c, xs
            return scan(f, c, xs)
        """,
        id="local function shadows imported scan",
    ),
    pytest.param(
        """\
        class lax:
            @staticmethod
            def scan(f, c, xs):
                return c, xs
        y = lax.scan(f, c, xs)
        """,
        id="local class named lax",
    ),
    pytest.param(
        """\
        class jax:
            class lax:
                @staticmethod
                def scan(f, c, xs):
                    return c, xs
        y = jax.lax.scan(f, c, xs)
        """,
        id="local classes spelling jax.lax.scan",
    ),
    pytest.param(
        """\
        from jax import lax
        def g(lax):
            return lax.scan(f, c, xs)
        """,
        id="parameter named lax",
    ),
    pytest.param(
        """\
        from jax import lax
        def g():
            lax = make_fake()
            return lax.scan(f, c, xs)
        """,
        id="local variable named lax",
    ),
    pytest.param(
        """\
        import jax.lax
        def g(jax):
            return jax.lax.scan(f, c, xs)
        def h():
            jax = make_fake()
            return jax.lax.scan(f, c, xs)
        """,
        id="parameter and local variable named jax, beside import jax.lax",
    ),
    pytest.param(
        """\
        class Model:
            def scan(self, f, c, xs):
                return c, xs
            def run(self):
                return self.scan(f, c, xs)
        """,
        id="method named scan",
    ),
    pytest.param(
        """\
        from foo import scan
        from bar import lax
        import baz as jax
        y = scan(f, c, xs)
        z = lax.scan(f, c, xs)
        w = jax.lax.scan(f, c, xs)
        """,
        id="other libraries",
    ),
    pytest.param(
        """\
        from jax import numpy as jnp
        y = jnp.scan(f, c, xs)
        """,
        id="a scan elsewhere in jax",
    ),
    pytest.param(
        """\
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(f, c, xs, unroll=4)
        z = scanrewrite.runtime.eqxi_scan(f, c, xs, kind="lax", unroll=4)
        """,
        id="already rewritten",
    ),
    pytest.param(
        """\
        from jax.lax import scan
        """,
        id="unused import of scan untouched",
    ),
]


@pytest.mark.parametrize("source", NOOP)
def test_noop(source):
    _assert_noop(source)


def test_unroll_option():
    _assert_rewrites(
        "from jax import lax\ny = lax.scan(f, c, xs)\n",
        "import scanrewrite.runtime\ny = scanrewrite.runtime.scan(f, c, xs, unroll=16)\n",
        unroll=16,
    )


def test_report_lines_and_apis():
    source = _src(
        """\
        import jax
        import equinox.internal as eqxi

        a = jax.lax.scan(f, c, xs)
        b = eqxi.scan(
            f, c, xs, kind="lax"
        )
        """
    )
    result = rewrite(source)
    assert [(r.line, r.api) for r in result.rewritten] == [
        (4, "jax.lax.scan"),
        (5, "equinox.internal.scan"),
    ]
    assert result.skipped == ()


def test_documented_example_is_what_the_rewrite_does():
    page = (Path(__file__).resolve().parents[1] / "docs" / "rewrite.md").read_text()
    before, after = re.findall(r"```python\n(.*?)```", page, re.S)[:2]
    assert rewrite(before.encode()).code.decode() == after


@pytest.mark.parametrize(
    ("call", "note"),
    [
        pytest.param("jax.lax.scan(f, c, xs)", None, id="unroll written by the rewrite"),
        pytest.param("jax.lax.scan(f, c, xs, unroll=unroll)", "unroll kept as written", id="by keyword"),
        pytest.param("jax.lax.scan(f, c, xs, None, False, 2)", "unroll kept as written", id="positionally"),
        pytest.param("jax.lax.scan(f, c, xs)  # scanrewrite: unroll=8", None, id="pragma"),
    ],
)
def test_a_call_that_passes_its_own_unroll_says_so(call, note):
    # haliax's scan passes `unroll=unroll` to jax.lax.scan: --unroll 4 does not reach it, and
    # -v says so (`path:line: rewritten (unroll kept as written)`) instead of a bare `rewritten`.
    result = rewrite(_src(f"import jax\ny = {call}\n"), unroll=4)
    assert [(r.line, r.note) for r in result.rewritten] == [(2, note)]


def test_verbose_says_that_a_call_kept_its_unroll(project):
    from tests.test_cli import invoke, write

    write(project, {"a.py": "import jax\ny = jax.lax.scan(f, c, xs, unroll=unroll)\n"})
    assert "a.py:2: would rewrite (unroll kept as written)" in invoke("-v", "--diff", ".").stderr.splitlines()
