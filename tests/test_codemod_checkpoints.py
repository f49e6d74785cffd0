"""Per-step checkpoints around the scanned function, and loops chunked and checkpointed by hand.

A per-step wrapper (`jax.checkpoint(f)`, `jax.remat`, `eqx.filter_checkpoint`, a decorator,
a name bound to one, a conditional) is left in the source: the runtime takes it over at trace
time. The rewrite only swaps the callee and appends `unroll=`, and says what became of the
wrapper; a wrapper with an option the runtime cannot carry over leaves the call as it is. An
outer scan over a checkpointed inner scan is left alone, inner scan included.
"""

import textwrap

import pytest

from scanrewrite.codemod import Rewritten, Skipped, rewrite
from scanrewrite.targets import TARGET_NAMES

CHUNKED = "already a checkpointed, chunked scan"


def _src(text: str) -> bytes:
    return textwrap.dedent(text).encode()


def _absorbed(api: str) -> str:
    return f"per-step {api} absorbed: the runtime checkpoints chunks instead"


def _rewrite(before: str, **options):
    result = rewrite(_src(before), **options)
    again = rewrite(result.code, **options)
    assert (again.code, again.changed) == (result.code, False), "not idempotent"
    return result


ABSORBED = [
    pytest.param(
        """\
        import jax
        y = jax.lax.scan(jax.checkpoint(layer), x, params)
        """,
        """\
        import jax
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(jax.checkpoint(layer), x, params, unroll=4)
        """,
        "jax.checkpoint",
        id="jax.checkpoint in the call",
    ),
    pytest.param(
        """\
        import jax
        from jax import lax
        y = lax.scan(jax.remat(layer, policy=jax.checkpoint_policies.dots_saveable), x, ps)
        """,
        """\
        import jax
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            jax.remat(layer, policy=jax.checkpoint_policies.dots_saveable), x, ps, unroll=4
        )
        """,
        "jax.remat",
        id="jax.remat with a policy",
    ),
    pytest.param(
        """\
        from jax import lax
        from jax.ad_checkpoint import checkpoint
        y = lax.scan(checkpoint(layer, prevent_cse=False), x, ps)
        """,
        """\
        import scanrewrite.runtime
        from jax.ad_checkpoint import checkpoint
        y = scanrewrite.runtime.scan(checkpoint(layer, prevent_cse=False), x, ps, unroll=4)
        """,
        "jax.ad_checkpoint.checkpoint",
        id="jax.ad_checkpoint.checkpoint (older jax)",
    ),
    pytest.param(
        """\
        from jax import checkpoint as remat
        from jax import lax
        y = lax.scan(remat(layer), x, ps)
        """,
        """\
        import scanrewrite.runtime
        from jax import checkpoint as remat
        y = scanrewrite.runtime.scan(remat(layer), x, ps, unroll=4)
        """,
        "jax.checkpoint",
        id="from jax import checkpoint as remat",
    ),
    pytest.param(
        """\
        import equinox as eqx
        import jax
        y = jax.lax.scan(eqx.filter_checkpoint(step), x, ps)
        z = jax.lax.scan(eqx.filter_checkpoint(policy=policy)(step), x, ps)
        """,
        """\
        import equinox as eqx
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(eqx.filter_checkpoint(step), x, ps, unroll=4)
        z = scanrewrite.runtime.scan(
            eqx.filter_checkpoint(policy=policy)(step), x, ps, unroll=4
        )
        """,
        "equinox.filter_checkpoint",
        id="eqx.filter_checkpoint, also as a decorator factory",
    ),
    pytest.param(
        """\
        import functools
        import jax
        y = jax.lax.scan(functools.partial(jax.checkpoint, prevent_cse=False)(layer), x, ps)
        """,
        """\
        import functools
        import jax
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            functools.partial(jax.checkpoint, prevent_cse=False)(layer), x, ps, unroll=4
        )
        """,
        "jax.checkpoint",
        id="functools.partial(jax.checkpoint, ...)(f)",
    ),
    pytest.param(
        """\
        import functools
        import jax
        @functools.partial(jax.checkpoint, prevent_cse=False)
        def layer(x, p):
            return x @ p, None
        y = jax.lax.scan(layer, x, ps)
        """,
        """\
        import functools
        import jax
        import scanrewrite.runtime
        @functools.partial(jax.checkpoint, prevent_cse=False)
        def layer(x, p):
            return x @ p, None
        y = scanrewrite.runtime.scan(layer, x, ps, unroll=4)
        """,
        "jax.checkpoint",
        id="@functools.partial(jax.checkpoint, prevent_cse=False)",
    ),
    pytest.param(
        """\
        import jax
        from functools import partial
        def forward(x, ps):
            @jax.remat
            def layer(x, p):
                return x @ p, None
            @partial(jax.checkpoint, policy=jax.checkpoint_policies.nothing_saveable)
            def other(x, p):
                return x, None
            return jax.lax.scan(layer, x, ps)[0] + jax.lax.scan(other, x, ps)[0]
        """,
        """\
        import jax
        import scanrewrite.runtime
        from functools import partial
        def forward(x, ps):
            @jax.remat
            def layer(x, p):
                return x @ p, None
            @partial(jax.checkpoint, policy=jax.checkpoint_policies.nothing_saveable)
            def other(x, p):
                return x, None
            return (
                scanrewrite.runtime.scan(layer, x, ps, unroll=4)[0]
                + scanrewrite.runtime.scan(other, x, ps, unroll=4)[0]
            )
        """,
        {"jax.remat", "jax.checkpoint"},
        id="decorated defs in a function",
    ),
    pytest.param(
        """\
        import equinox as eqx
        import equinox.internal as eqxi
        @eqx.filter_checkpoint(prevent_cse=False)
        def step(h, x):
            return h + x, h
        def run(h, xs):
            return eqxi.scan(step, h, xs, kind="lax")
        """,
        """\
        import equinox as eqx
        import scanrewrite.runtime
        @eqx.filter_checkpoint(prevent_cse=False)
        def step(h, x):
            return h + x, h
        def run(h, xs):
            return scanrewrite.runtime.eqxi_scan(step, h, xs, kind="lax", unroll=4)
        """,
        "equinox.filter_checkpoint",
        id="module-level decorated step, eqxi.scan kind=lax",
    ),
    pytest.param(
        """\
        import jax
        def forward(step, x, ps):
            step = jax.checkpoint(step)
            return jax.lax.scan(step, x, ps)
        """,
        """\
        import jax
        import scanrewrite.runtime
        def forward(step, x, ps):
            step = jax.checkpoint(step)
            return scanrewrite.runtime.scan(step, x, ps, unroll=4)
        """,
        "jax.checkpoint",
        id="a name bound a few lines above",
    ),
    pytest.param(
        """\
        import jax
        def forward(step, x, ps, rematerialize):
            if rematerialize:
                step = jax.checkpoint(step, prevent_cse=False)
            return jax.lax.scan(step, x, ps)
        """,
        """\
        import jax
        import scanrewrite.runtime
        def forward(step, x, ps, rematerialize):
            if rematerialize:
                step = jax.checkpoint(step, prevent_cse=False)
            return scanrewrite.runtime.scan(step, x, ps, unroll=4)
        """,
        "jax.checkpoint",
        id="a name bound under a flag",
    ),
    pytest.param(
        """\
        import jax
        def forward(layer, x, ps, cfg):
            body = jax.checkpoint(layer) if cfg.remat else layer
            y, _ = jax.lax.scan(body, x, ps)
            z, _ = jax.lax.scan(layer if not cfg.remat else jax.remat(layer), x, ps)
            return y, z
        """,
        """\
        import jax
        import scanrewrite.runtime
        def forward(layer, x, ps, cfg):
            body = jax.checkpoint(layer) if cfg.remat else layer
            y, _ = scanrewrite.runtime.scan(body, x, ps, unroll=4)
            z, _ = scanrewrite.runtime.scan(
                layer if not cfg.remat else jax.remat(layer), x, ps, unroll=4
            )
            return y, z
        """,
        {"jax.checkpoint", "jax.remat"},
        id="a conditional, bound to a name or in the call",
    ),
    pytest.param(
        """\
        import jax
        y = jax.lax.scan(init=c, xs=xs, f=jax.checkpoint(f, static_argnums=(), concrete=False))
        """,
        """\
        import jax
        import scanrewrite.runtime
        y = scanrewrite.runtime.scan(
            init=c, xs=xs, f=jax.checkpoint(f, static_argnums=(), concrete=False), unroll=4
        )
        """,
        "jax.checkpoint",
        id="by keyword; options with their do-nothing values",
    ),
]


@pytest.mark.parametrize(("before", "after", "api"), ABSORBED)
def test_a_per_step_checkpoint_is_absorbed(before, after, api):
    result = _rewrite(before)
    assert result.code.decode() == textwrap.dedent(after)
    assert result.rewritten and result.skipped == ()
    apis = api if isinstance(api, set) else {api}
    assert {(call.absorbed, call.note) for call in result.rewritten} == {(api, _absorbed(api)) for api in apis}


NOT_WRAPPED = [
    pytest.param("import jax\ny = jax.lax.scan(jax.jit(jax.checkpoint(step)), c, xs)\n", id="jit outside"),
    pytest.param(
        "import jax\n@jax.jit\n@jax.checkpoint\ndef step(c, x):\n    return c, x\ny = jax.lax.scan(step, c, xs)\n",
        id="checkpoint not the outermost decorator",
    ),
    pytest.param(
        "import jax\ndef checkpoint(f):\n    return f\ny = jax.lax.scan(checkpoint(step), c, xs)\n",
        id="a local function named checkpoint",
    ),
    pytest.param(
        "import jax\ndef f(step):\n    y = jax.lax.scan(step, c, xs)\n    step = jax.checkpoint(step)\n    return y\n",
        id="bound after the call",
    ),
    pytest.param(
        "import jax\ndef f(step):\n    step = jax.checkpoint(step)\n    step = wrap(step)\n    return jax.lax.scan(step, c, xs)\n",
        id="bound again since",
    ),
    pytest.param("import jax\ny = jax.lax.scan(jax.checkpoint, c, xs)\n", id="the wrapper itself"),
]


@pytest.mark.parametrize("before", NOT_WRAPPED)
def test_only_a_wrapper_that_wraps_the_scanned_function_counts(before):
    result = _rewrite(before)
    assert result.changed
    assert all(call.absorbed is None and call.note is None for call in result.rewritten)


def test_no_checkpoint_keeps_the_wrapper_and_says_so():
    result = _rewrite("import jax\ny = jax.lax.scan(jax.checkpoint(layer), x, ps)\n", checkpoint="none")
    assert b"scanrewrite.runtime.scan(jax.checkpoint(layer), x, ps, unroll=4, checkpoint=False)" in result.code
    note = "per-step jax.checkpoint kept: chunks are not checkpointed again"
    assert result.rewritten == (Rewritten(2, "jax.lax.scan", note),)


def test_eqxi_scan_absorbs_only_where_it_checkpoints_chunks():
    source = """\
        import equinox.internal as eqxi
        import jax
        a = eqxi.scan(jax.checkpoint(f), c, xs, kind="lax")
        b = eqxi.scan(jax.checkpoint(f), c, xs, kind="checkpointed")
        c = eqxi.scan(jax.checkpoint(f), c, xs, kind=kind)
        """
    result = _rewrite(source)
    kept = "per-step jax.checkpoint kept: chunks are not checkpointed again"
    assert [(call.line, call.note, call.absorbed) for call in result.rewritten] == [
        (3, _absorbed("jax.checkpoint"), "jax.checkpoint"),
        (4, kept, None),
        (5, None, None),
    ]


def test_fori_loop_body_and_map_function():
    source = "import jax\ny = jax.lax.fori_loop(0, n, jax.checkpoint(body), y0)\nz = jax.lax.map(jax.remat(f), xs)\n"
    result = _rewrite(source, targets=TARGET_NAMES)
    assert [call.absorbed for call in result.rewritten] == ["jax.checkpoint", "jax.remat"]


SKIPS = [
    pytest.param(
        "import jax\ny = jax.lax.scan(jax.checkpoint(step, static_argnums=(1,)), c, xs)\n",
        "per-step jax.checkpoint with static_argnums, which the runtime cannot carry over",
        id="static_argnums",
    ),
    pytest.param(
        "import jax\ny = jax.lax.scan(jax.remat(step, concrete=True), c, xs)\n",
        "per-step jax.remat with concrete, which the runtime cannot carry over",
        id="concrete=True",
    ),
    pytest.param(
        "import jax\ny = jax.lax.scan(jax.checkpoint(step, **remat_options), c, xs)\n",
        "per-step jax.checkpoint may get options from **kwargs",
        id="**kwargs",
    ),
    pytest.param(
        "import jax\ny = jax.lax.scan(jax.checkpoint(step, save_names=True), c, xs)\n",
        "per-step jax.checkpoint with an unknown option save_names",
        id="unknown option",
    ),
    pytest.param(
        "import jax\ny = jax.lax.scan(jax.checkpoint(step, True), c, xs)\n",
        "per-step jax.checkpoint with an argument besides the function",
        id="positional option",
    ),
    pytest.param(
        "import jax\nfrom functools import partial\n@partial(jax.checkpoint, static_argnums=(2,))\ndef step(c, x, n):\n"
        "    return c, x\nif True:\n    y = jax.lax.scan(step, c, xs)\n",
        "per-step jax.checkpoint with static_argnums, which the runtime cannot carry over",
        id="decorator",
    ),
    pytest.param(
        "import jax\ny = jax.lax.scan(jax.checkpoint(step, static_argnames='n') if r else step, c, xs)\n",
        "per-step jax.checkpoint with static_argnames, which the runtime cannot carry over",
        id="conditional",
    ),
]


@pytest.mark.parametrize(("before", "reason"), SKIPS)
def test_a_wrapper_the_runtime_cannot_take_over_leaves_the_call(before, reason):
    result = rewrite(before.encode())
    assert (result.code, result.rewritten) == (before.encode(), ())
    assert [skip.reason for skip in result.skipped] == [reason]


HAND_CHUNKED = [
    pytest.param(
        """\
        import jax
        from functools import partial
        def scan_remat_every_n_iterations_scan(f, n, carry, x_grouped):
            return jax.lax.scan(jax.remat(partial(jax.lax.scan, f), prevent_cse=False), carry, x_grouped)
        """,
        [4, 4],
        id="remat of partial(lax.scan, f)",
    ),
    pytest.param(
        """\
        import jax
        from jax import lax
        def solve(inner, X0, no, ni):
            def outer_body(c, _):
                return lax.scan(inner, c, None, length=ni)[0], None
            return lax.scan(jax.checkpoint(outer_body), X0, None, length=no)[0]
        """,
        [5, 6],
        id="checkpoint of a def that runs a scan",
    ),
    pytest.param(
        """\
        import jax
        @jax.checkpoint
        def chunk(c, xs):
            return jax.lax.scan(step, c, xs)
        y = jax.lax.scan(chunk, c, xs_grouped)
        """,
        [4, 5],
        id="decorated def",
    ),
    pytest.param(
        """\
        import jax
        y = jax.lax.scan(jax.checkpoint(lambda c, xs: jax.lax.scan(step, c, xs)), c, xs_grouped)
        """,
        [2, 2],
        id="lambda",
    ),
    pytest.param(
        """\
        import jax
        import equinox as eqx
        def run(step, c, xs_grouped, remat):
            def chunk(c, xs):
                return jax.lax.scan(step, c, xs)
            chunk = eqx.filter_checkpoint(chunk) if remat else chunk
            return jax.lax.scan(chunk, c, xs_grouped)
        """,
        [5, 7],
        id="bound to a name, under a flag",
    ),
]


@pytest.mark.parametrize(("before", "lines"), HAND_CHUNKED)
def test_a_hand_chunked_loop_is_left_alone(before, lines):
    result = rewrite(_src(before))
    assert (result.code, result.rewritten) == (_src(before), ())
    assert result.skipped == tuple(Skipped(line, CHUNKED) for line in lines)


def test_nested_scans_without_a_checkpoint_are_both_rewritten():
    source = "import jax\ndef chunk(c, xs):\n    return jax.lax.scan(step, c, xs)\ny = jax.lax.scan(chunk, c, g)\n"
    result = rewrite(source.encode())
    assert len(result.rewritten) == 2 and result.skipped == ()


def test_a_pragma_wins_over_the_hand_chunked_reason():
    source = "import jax\ny = jax.lax.scan(jax.checkpoint(lambda c, xs: jax.lax.scan(f, c, xs)), c, g)  # scanrewrite: skip\n"
    assert {skip.reason for skip in rewrite(source.encode()).skipped} == {"skip pragma"}


def test_verbose_and_summary_say_what_was_absorbed_and_left(project, capsys):
    from scanrewrite.cli import main

    (project / "model.py").write_text(
        "import jax\n"
        "y = jax.lax.scan(jax.checkpoint(layer), x, ps)\n"
        "z = jax.lax.scan(layer, x, ps)\n"
        "w = jax.lax.scan(jax.remat(lambda c, xs: jax.lax.scan(f, c, xs)), c, g)\n"
    )
    with pytest.raises(SystemExit) as exited:
        main(["-v", "model.py"])
    assert exited.value.code == 0
    err = capsys.readouterr().err
    assert "model.py:2: rewritten (per-step jax.checkpoint absorbed: the runtime checkpoints chunks instead)\n" in err
    assert "model.py:3: rewritten\n" in err
    assert err.count("model.py:4: skipped (already a checkpointed, chunked scan)\n") == 2
    assert err.endswith("1 file rewritten (2 scan calls, 1 per-step checkpoint absorbed), 2 calls skipped\n")


def _case_sources():
    for case in [*ABSORBED, *NOT_WRAPPED, *SKIPS, *HAND_CHUNKED]:
        values = case.values if hasattr(case, "values") else (case,)
        yield _src(values[0])


def test_the_survey_index_answers_as_walks_of_each_scope():
    """The survey's `NodeIndex` (one walk of the module) gives every case the same per-step
    checkpoints and hand-chunked loops as walking each function on its own."""
    import libcst as cst

    from scanrewrite.codemod._checkpoints import read_bodies
    from scanrewrite.codemod._discovery import Resolver, take_survey
    from scanrewrite.codemod._scopes import module_scopes
    from scanrewrite.targets import select

    checked = 0
    for source in _case_sources():
        module = cst.parse_module(source)
        scopes = module_scopes(module, module.code)
        resolver = Resolver(scopes, {target.qualified_name: target for target in select(TARGET_NAMES)})
        survey = take_survey(module, scopes, resolver.resolve, index=True)
        assert survey.index is not None
        walked = read_bodies(scopes.analysed, scopes, resolver, survey.found)
        indexed = read_bodies(scopes.analysed, scopes, resolver, survey.found, survey.index)
        assert indexed == walked, source
        checked += bool(walked[0] or walked[1])
    assert checked > 10
