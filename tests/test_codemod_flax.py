"""Flax's scans in every spelling: `nnx.scan` as a call, a decorator (bare, with options,
through `functools.partial`) and Linen `nn.scan` of a module class (over `nn.remat`), before
and after the rewrite, and back with `--revert`."""

import textwrap

import pytest

from scanrewrite.codemod import Skipped, revert, rewrite

FLAX = "nnx.scan,linen.scan"
ABSORBED = "per-step {} absorbed: the runtime checkpoints chunks instead"


def _src(text: str) -> bytes:
    return textwrap.dedent(text).encode()


CASES = [
    pytest.param(
        """\
        from flax import nnx

        y = nnx.scan(body, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)(x, layers)
        """,
        """\
        import scanrewrite.runtime
        from flax import nnx

        y = scanrewrite.runtime.nnx_scan(
            body, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry, unroll=4
        )(x, layers)
        """,
        None,
        id="from flax import nnx, a call",
    ),
    pytest.param(
        """\
        import flax.nnx as nnx


        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        @nnx.remat
        def forward(x, block):
            return block(x)
        """,
        """\
        import flax.nnx as nnx
        import scanrewrite.runtime


        @scanrewrite.runtime.nnx_scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry, unroll=4)
        @nnx.remat
        def forward(x, block):
            return block(x)
        """,
        ABSORBED.format("flax.nnx.remat"),
        id="import flax.nnx as nnx, a decorator over nnx.remat",
    ),
    pytest.param(
        """\
        import flax


        @flax.nnx.scan
        def forward(x, block):
            return block(x), None
        """,
        """\
        import scanrewrite.runtime


        @scanrewrite.runtime.nnx_scan(unroll=4)
        def forward(x, block):
            return block(x), None
        """,
        None,
        id="flax.nnx.scan, a bare decorator (the import only it used goes)",
    ),
    pytest.param(
        """\
        import functools

        from flax import nnx


        @functools.partial(nnx.scan, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def forward(x, block):
            return block(x)
        """,
        """\
        import functools

        import scanrewrite.runtime
        from flax import nnx


        @functools.partial(
            scanrewrite.runtime.nnx_scan, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry, unroll=4
        )
        def forward(x, block):
            return block(x)
        """,
        None,
        id="functools.partial(nnx.scan, ...)",
    ),
    pytest.param(
        """\
        import flax.linen as nn

        Stack = nn.scan(
            nn.remat(Block, static_argnums=(2,)),
            variable_axes={"params": 0},
            split_rngs={"params": True, "dropout": True},
            in_axes=nn.broadcast,
            length=12,
        )
        """,
        """\
        import flax.linen as nn
        import scanrewrite.runtime

        Stack = scanrewrite.runtime.linen_scan(
            nn.remat(Block, static_argnums=(2,)),
            variable_axes={"params": 0},
            split_rngs={"params": True, "dropout": True},
            in_axes=nn.broadcast,
            length=12,
            unroll=4,
        )
        """,
        ABSORBED.format("flax.linen.remat"),
        id="import flax.linen as nn, nn.scan(nn.remat(Block))",
    ),
    pytest.param(
        """\
        import flax

        S = flax.linen.scan(flax.linen.checkpoint(Block), variable_axes={"params": 0}, length=3)
        """,
        """\
        import flax
        import scanrewrite.runtime

        S = scanrewrite.runtime.linen_scan(
            flax.linen.checkpoint(Block), variable_axes={"params": 0}, length=3, unroll=4
        )
        """,
        ABSORBED.format("flax.linen.checkpoint"),
        id="flax.linen.scan of nn.checkpoint",
    ),
]


@pytest.mark.parametrize(("before", "after", "note"), CASES)
def test_rewrite_and_revert(before, after, note):
    result = rewrite(_src(before), targets=FLAX)
    assert result.code.decode() == textwrap.dedent(after)
    assert [r.note for r in result.rewritten] == [note]
    again = rewrite(result.code, targets=FLAX)
    assert (again.code, again.changed) == (result.code, False), "not idempotent"
    assert revert(result.code).code == _src(before)


def test_not_rewritten_by_default():
    source = _src("from flax import nnx\ny = nnx.scan(body)(x, layers)\n")
    assert not rewrite(source).changed


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("from flax import nnx\nscan = nnx.scan\n", "reference to flax.nnx.scan that is not a call"),
        ("from flax import nnx\ny = nnx.scan(body, **options)\n", "unroll may come from **kwargs"),
        ("import flax.linen as nn\nS = nn.scan(Block, *rest)\n", "unroll may come from *args"),
        ("from flax import nnx\n@nnx.scan  # scanrewrite: skip\ndef f(x, b):\n    return b(x)\n", "skip pragma"),
    ],
    ids=["a bare reference", "**kwargs", "*args", "a skip pragma on a decorator"],
)
def test_left_alone_with_the_reason(source, reason):
    result = rewrite(source.encode(), targets=FLAX)
    assert not result.changed
    assert [s.reason for s in result.skipped] == [reason]
    assert isinstance(result.skipped[0], Skipped)


def test_pragma_unroll_on_a_bare_decorator():
    source = _src(
        """\
        from flax import nnx


        @nnx.scan  # scanrewrite: unroll=2
        def f(x, b):
            return b(x)
        """
    )
    assert b"@scanrewrite.runtime.nnx_scan(unroll=2)  # scanrewrite: unroll=2" in rewrite(source, targets=FLAX).code


def test_a_runtime_policy_on_a_decorator_and_back():
    before = _src(
        """\
        from flax import nnx


        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def forward(x, layer):
            return layer(x), None
        """
    )
    after = _src(
        """\
        import scanrewrite.runtime
        from flax import nnx


        @scanrewrite.runtime.nnx_scan(
            in_axes=(nnx.Carry, 0),
            out_axes=nnx.Carry,
            unroll=4,
            checkpoint=scanrewrite.runtime.reductions_saveable,
        )
        def forward(x, layer):
            return layer(x), None
        """
    )
    result = rewrite(before, targets=FLAX, checkpoint="reductions_saveable")
    assert result.code == after
    assert not rewrite(after, targets=FLAX, checkpoint="reductions_saveable").changed
    assert revert(after).code == before
