"""The names written in ``__all__`` and in string annotations (`imports._string_names`): the same as
libcst's `GatherExportsVisitor` and `GatherNamesFromStringAnnotationsVisitor`, which they adapt
without `libcst.matchers`, on every spelling those visitors read and on the bundled sources."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import GatherExportsVisitor, GatherNamesFromStringAnnotationsVisitor
from libcst.metadata import MetadataWrapper

from scanrewrite.codemod.imports._string_names import Exports, StringAnnotationNames

TESTS = Path(__file__).parent
CASES = [
    pytest.param('__all__ = ["a", "b"]\n', id="list"),
    pytest.param('__all__ = ("a",)\n__all__ += ["b"]\n__all__ += ("c",)\n__all__ -= ["d"]\n', id="added"),
    pytest.param('__all__: list[str] = ["a"]\nother: list[str] = ["b"]\n__all__: list[str]\n', id="annotated"),
    pytest.param('__all__ = other = {"a"}\n__all__, x = ["b"], ["c"]\nx, __all__ = ("d",), ("e",)\n', id="chained and tuples"),
    pytest.param('__all__ = ["a" "b", b"c", f"d", "e" if x else "f", *others]\n', id="odd elements"),
    pytest.param('mod.__all__ = ["a"]\n__all__ = names()\n__all__ += other\n', id="not read"),
    pytest.param('def f():\n    __all__ = ["local"]\n\nclass C:\n    __all__ = ["attr"]\n', id="nested"),
    pytest.param(
        """\
        import typing
        from typing import Literal, TypeVar as TV

        def f(x: "np.ndarray", y: "f().attr.more" = 1) -> "a.b.C":
            z: "List[Foo]" = []
            w: "not code at all" = 2
            v: "a" "b.c"
            u: b"bytes.name"
            t: Literal["literal_name"]
            s: typing.Literal["other_literal"]
            r: "Literal['inner']"
            q: Annotated[int, "meta.data"]
            p: "1 + y.z[k]"

        T = TV("T", bound="Bound.Name")
        U = typing.TypeVar("U", "m.Q", "R")
        V = other("NotAnAnnotation")
        """,
        id="string annotations",
    ),
]


def _sources() -> list:
    bundled = sorted((TESTS / "golden").glob("*.py")) + sorted((TESTS.parent / "fixtures").rglob("*.py"))
    return CASES + [pytest.param(path.read_text(), id=f"{path.parent.name}/{path.name}") for path in bundled]


@pytest.mark.parametrize("code", _sources())
def test_names_agree_with_libcsts_visitors(code: str) -> None:
    module = cst.parse_module(textwrap.dedent(code))
    wrapper = MetadataWrapper(module)
    wrapper.resolve_many(GatherNamesFromStringAnnotationsVisitor.get_inherited_dependencies())
    context = CodemodContext(wrapper=wrapper)
    theirs_exported = GatherExportsVisitor(context)
    wrapper.module.visit(theirs_exported)
    theirs_annotated = GatherNamesFromStringAnnotationsVisitor(context)
    wrapper.module.visit(theirs_annotated)

    exported = Exports()
    module.visit(exported)
    annotated = StringAnnotationNames()
    MetadataWrapper(module, unsafe_skip_copy=True).visit(annotated)
    assert exported.names == theirs_exported.explicit_exported_objects
    assert annotated.names == theirs_annotated.names


def test_the_cases_find_names() -> None:
    """The cases above are not all empty: both visitors find what they should."""
    module = cst.parse_module(textwrap.dedent(CASES[-1].values[0]) + textwrap.dedent(CASES[1].values[0]))
    exported = Exports()
    module.visit(exported)
    annotated = StringAnnotationNames()
    MetadataWrapper(module, unsafe_skip_copy=True).visit(annotated)
    assert exported.names == {"a", "b", "c"}
    assert {"np.ndarray", "np", "a.b.C", "a.b", "a", "Foo", "List", "Bound.Name", "m.Q", "R", "meta.data"} <= annotated.names
    assert not {"literal_name", "other_literal", "NotAnAnnotation", "not", "code"} & annotated.names
