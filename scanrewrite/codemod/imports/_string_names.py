"""The names a module writes in strings that libcst counts as uses of an import: those listed
in ``__all__``, and those in string annotations.

Adapted from LibCST's `GatherExportsVisitor` and `GatherNamesFromStringAnnotationsVisitor`
(libcst/codemod/visitors/_gather_exports.py and _gather_string_annotation_names.py, LibCST 1.9,
Copyright (c) Meta Platforms, Inc. and affiliates, MIT license), with the same answers: their
matchers are written out as `isinstance` and attribute checks, because importing
`libcst.matchers` costs more than parsing a 1,000-line file.
"""

from __future__ import annotations

from collections.abc import Collection

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import QualifiedNameProvider
from libcst.metadata.scope_provider import _gen_dotted_names

__all__ = ["STRING_ANNOTATION_FUNCTIONS", "Exports", "StringAnnotationNames"]

#: The calls whose string arguments are annotations (libcst's `FUNCS_CONSIDERED_AS_STRING_ANNOTATIONS`).
STRING_ANNOTATION_FUNCTIONS = frozenset({"typing.TypeVar"})

_Sequence = cst.List | cst.Tuple | cst.Set


class Exports(cst.CSTVisitor):
    """After visiting a module, `names` are the string literals in the lists, tuples and sets
    it assigns to ``__all__`` (``=``, annotated, in a tuple assignment) or adds to it (``+=``)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()
        self._is_assigned_export: set[_Sequence] = set()
        self._in_assigned_export: set[_Sequence] = set()

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        return node.value is not None and self._handle_assign_target(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        if (
            isinstance(node.target, cst.Name)
            and node.target.value == "__all__"
            and isinstance(node.operator, cst.AddAssign)
            and isinstance(node.value, (cst.List, cst.Tuple))
        ):
            self._is_assigned_export.add(node.value)
            return True
        return False

    def visit_Assign(self, node: cst.Assign) -> bool:
        return any(self._handle_assign_target(target.target, node.value) for target in node.targets)

    def _handle_assign_target(self, target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
        if get_full_name_for_node(target) == "__all__":
            if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
                self._is_assigned_export.add(value)
                return True
        elif isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple):
            # `__all__, x = ["os"], []`
            for index, element in enumerate(target.elements):
                if get_full_name_for_node(element.value) == "__all__":
                    element_value = value.elements[index].value
                    if isinstance(element_value, (cst.List, cst.Tuple, cst.Set)):
                        self._is_assigned_export.add(value)
                        self._is_assigned_export.add(element_value)
                        return True
        return False

    def _enter(self, node: _Sequence) -> bool:
        if node in self._is_assigned_export:
            self._in_assigned_export.add(node)
            return True
        return False

    def _leave(self, node: _Sequence) -> None:
        self._is_assigned_export.discard(node)
        self._in_assigned_export.discard(node)

    visit_List = visit_Tuple = visit_Set = _enter
    leave_List = leave_Tuple = leave_Set = _leave

    def visit_SimpleString(self, node: cst.SimpleString) -> bool:
        self._handle_string(node)
        return False

    def visit_ConcatenatedString(self, node: cst.ConcatenatedString) -> bool:
        self._handle_string(node)
        return False

    def _handle_string(self, node: cst.SimpleString | cst.ConcatenatedString) -> None:
        if self._in_assigned_export:
            name = node.evaluated_value
            if isinstance(name, str):
                self.names.add(name)


class StringAnnotationNames(cst.CSTVisitor):
    """After visiting a module through a `MetadataWrapper`, `names` are the names and dotted
    names written in its string annotations (``x: "np.ndarray"``) and in the string arguments
    of `functions` (``TypeVar("T", "Foo")``), but not inside ``Literal[...]``."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self, functions: Collection[str] = STRING_ANNOTATION_FUNCTIONS) -> None:
        super().__init__()
        self._functions = functions
        self._annotation_stack: list[cst.CSTNode] = []
        self.names: set[str] = set()

    def visit_Annotation(self, node: cst.Annotation) -> bool:
        self._annotation_stack.append(node)
        return True

    def leave_Annotation(self, original_node: cst.Annotation) -> None:
        self._annotation_stack.pop()

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        # ``Literal["foo"]`` does not use the name ``foo``.
        return not any(name.name == "typing.Literal" for name in self.get_metadata(QualifiedNameProvider, node))

    def visit_Call(self, node: cst.Call) -> bool:
        if any(name.name in self._functions for name in self.get_metadata(QualifiedNameProvider, node)):
            self._annotation_stack.append(node)
            return True
        return False

    def leave_Call(self, original_node: cst.Call) -> None:
        if self._annotation_stack and self._annotation_stack[-1] == original_node:
            self._annotation_stack.pop()

    def visit_ConcatenatedString(self, node: cst.ConcatenatedString) -> bool:
        if self._annotation_stack:
            self._handle_string(node)
        return False

    def visit_SimpleString(self, node: cst.SimpleString) -> bool:
        if self._annotation_stack:
            self._handle_string(node)
        return False

    def _handle_string(self, node: cst.SimpleString | cst.ConcatenatedString) -> None:
        value = node.evaluated_value
        if value is None:
            return
        try:
            module = cst.parse_module(value)
        except cst.ParserSyntaxError:
            return  # not every string in an annotation is code
        found = _NamesAndAttributes()
        module.visit(found)
        self.names.update(found.names)


class _NamesAndAttributes(cst.CSTVisitor):
    """`names`: every name that is not part of an attribute (``a``, not the ``b`` or ``c`` of
    ``b.c``), and every attribute with its prefixes (``b.c`` and ``b``)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()
        #: The names that are the value or attribute of an attribute (their parent is one).
        self._in_attribute: set[cst.Name] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.names.update(name for name, _ in _gen_dotted_names(node))
        self._in_attribute.add(node.attr)
        if isinstance(node.value, cst.Name):
            self._in_attribute.add(node.value)

    def visit_Name(self, node: cst.Name) -> None:
        if node not in self._in_attribute:
            self.names.add(node.value)
