"""Properties: however a call is laid out, the rewrite only inserts, and what it inserts is
the `unroll` argument with a comma and layout; the result is the same call to the runtime.
And over generated programs (`tests/fuzz_programs.py`): no crash, output that compiles,
idempotence, the command line's `--check` agrees, the revert round trip."""

import ast
import os

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scanrewrite.codemod import rewrite
from tests.fuzz_programs import problems, programs

# Comment text avoids the letters and digits of "unroll=4", so that checking "the input
# is a subsequence of the output" cannot pair an input character with an inserted one.
AFTER_OPEN = st.sampled_from(["", " ", "\n    ", "  # zz\n    ", "\n\n        "])
SEPARATOR = st.sampled_from([", ", ",", " , ", ",\n    ", ",  # zz\n    ", ",\n\n    ", ", \\\n    "])
BEFORE_CLOSE = st.sampled_from(["", " ", "\n", "\n    ", "  # zz\n", "\n    # zz\n"])
ARGUMENTS = st.sampled_from(
    [
        ["f", "c"],
        ["f", "c", "xs"],
        ["f", "c", "xs", "length=k"],
        ["f", "c", "xs", "None", "True"],
        ["f", "c", "xs=xs", "reverse=True"],
    ]
)


@st.composite
def calls(draw):
    args = draw(ARGUMENTS)
    text = "lax.scan(" + draw(AFTER_OPEN) + args[0]
    for arg in args[1:]:
        text += draw(SEPARATOR) + arg
    if draw(st.booleans()):
        text += ","
    text += draw(BEFORE_CLOSE) + ")"
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return args, text.replace("\n", newline), newline


def _is_subsequence(small, big):
    """The characters of `big` left over when `small` is matched into it in order, or None."""
    left_over = []
    position = 0
    for char in big:
        if position < len(small) and small[position] == char:
            position += 1
        else:
            left_over.append(char)
    return "".join(left_over) if position == len(small) else None


@settings(max_examples=12, deadline=None)
@given(calls())
def test_rewrite_only_inserts_the_unroll_argument(call):
    args, text, newline = call
    source = f"from jax import lax{newline}y = {text}{newline}"
    result = rewrite(source.encode())

    prefix = f"import scanrewrite.runtime{newline}y = "
    code = result.code.decode()
    assert code.startswith(prefix)
    new_call = code[len(prefix) : -len(newline)]
    inserted = _is_subsequence(text.replace("lax.scan", "scanrewrite.runtime.scan", 1), new_call)
    assert inserted is not None, "something of the original call was removed or moved"
    # Layout copied from the call itself: spaces, line breaks, a backslash continuation.
    assert "".join(inserted.split()).replace(",", "").replace("\\", "") == "unroll=4"
    assert inserted.count(",") == 1

    call_node = ast.parse(code).body[1].value
    expected = ast.parse(f"scanrewrite.runtime.scan({', '.join(args)}, unroll=4)").body[0].value
    assert ast.dump(call_node) == ast.dump(expected)
    assert rewrite(result.code).code == result.code


# --- generated programs ---------------------------------------------------------------------

#: Examples per run (derandomized in CI): 300 cost about 35 s of CPU time there, 50 cost 8 s
#: (`CI=1 /usr/bin/time python -m pytest tests/test_codemod_property.py -k generated_programs_keep`);
#: `benchmarks/fuzz_rewrite.py` runs more. The version matrix's parts (`.ci/matrix.py` sets
#: SCANREWRITE_CI_MATRIX) run 50, since the main suite runs the 300 on every CI run and what
#: those parts change, the Python and libcst, the before/after cases meet there too.
FUZZ_EXAMPLES = 50 if os.environ.get("SCANREWRITE_CI_MATRIX") else 300


def example_each(found):
    """`hypothesis.example` for each program of `found`."""

    def decorate(test):
        for program in reversed(found):
            test = example(program=program)(test)
        return test

    return decorate


#: Programs hypothesis found breaking a property once, kept so that they are tried on every run.
FOUND = [
    # The revert dropped `import jax.lax` under `if TYPE_CHECKING:` once the policy that used
    # `jax` was gone, and rewriting the result could not bring it back (2026-12-07).
    (
        b'"""A module with scans."""\r\n\r\n\r\nfrom typing import TYPE_CHECKING\r\nimport jax\r\nimport jax.lax as L\r\n'
        b"\r\n\r\nz = L.cond\r\nif TYPE_CHECKING:\r\n    import jax.lax\r\n\r\n\r\nclass Model:\r\n    @staticmethod\r\n"
        b"    def __call__(f, c, xs, n=3, *args, **kwargs):\r\n        return jax.lax.scan(\r\n"
        b"            lambda c, x: (c + x, x), c, xs\r\n        )  # scanrewrite: unroll=8\r\n",
        {"checkpoint": "dots_saveable"},
    ),
    # The revert joined the hugged call onto the line of the skip pragma, which then applied
    # to the inner scan too, so rewriting the result left alone what the rewrite had rewritten
    # (2026-12-07).
    (
        b"import jax\n\n\ny = jax.lax.scan(\n    lambda c, x: jax.lax.scan(f, c, xs), c, xs\n)"
        b"  # scanrewrite: skip\n",
        {},
    ),
    # Not byte-identical was expected where an import nothing reads (`from jax.lax import
    # scan`) spelled the call more specifically than the one it used (`lax.scan`): the revert
    # spells it `scan`, as documented; the file reaches the API through two imports (2026-12-07).
    (b"from jax import lax\nfrom jax.lax import scan\n\n\nz = lax.cond\ny = lax.scan(f, c, xs)\n", {}),
    # rewrite(revert(y)) == y was expected where the revert spelled the inner call `scan` (a
    # file with two imports of the API), which brought the hugged line it overflowed within
    # the line length: the formatters' layout, which the rewrite of the result then keeps
    # (2026-12-07).
    (
        b"import jax\nfrom jax.lax import scan\n\nz = jax.jit, scan\ny = jax.lax.scan(\n"
        b"    lambda c, x: jax.lax.scan(f, c, xs, length=n), init=c, xs=xs\n)\n",
        {"line_length": 60},
    ),
    # rewrite(revert(y)) == y was expected where `x` has an import nothing reads (`import jax`
    # under `if TYPE_CHECKING:`), which the round trip excepts, but `g`'s own local `jax` was
    # taken for a read of it: the revert adds `import jax` and spells the call `jax.lax.scan`,
    # which reads both, so the rewrite of the result removes both (2026-12-07).
    (
        b"from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import jax\n\n\ndef run(f, c, xs):\n"
        b"    from jax import lax as L\n    return L.scan(f, c, xs)\n\n\ndef g(f, c, xs):\n    jax = make_jax()\n"
        b"    return jax.lax.scan(f, c, xs)\n",
        {},
    ),
]


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
@example_each(FOUND)
def test_generated_programs_keep_every_property(program):
    """No crash, output that compiles, idempotent, the command line's `--check` agrees, and
    the revert keeps its promises (`tests/fuzz_programs.py`)."""
    source, options = program
    assert problems(source, options) == []


def test_generated_programs_catch_a_broken_rewrite(monkeypatch):
    """The properties can fail: a rewrite that is not idempotent is caught."""
    import tests.fuzz_programs as fuzz

    source = b"from jax import lax\n\ny = lax.scan(f, c, xs)\n"
    assert problems(source, {}) == []

    def twice(code, **options):
        result = rewrite(code, **options)
        return type(result)(result.code + b"\n", result.rewritten, result.skipped)

    monkeypatch.setattr(fuzz, "rewrite", twice)
    assert "the rewrite is not idempotent" in problems(source, {})
