"""ksqlDB's folding of an IN list's values into one type (``plan.ksql_coercion``), from the rules of its
``CoercionUtil`` and ``DefaultSqlValueCoercer``. No Spark needed; the values' conversion runs in the conformance
case ``ksql IN lists convert their values to one type``."""
from __future__ import annotations

from decimal import Decimal

import pytest

from streamjoin.plan import ksql_coercion
from streamjoin.plan.expressions import transform
from streamjoin.plan.nodes import Ref, expr_text
from streamjoin.sql import ast
from streamjoin.sql.parser import parse_expression

COLUMNS = {"I": "int", "B": "bigint", "D": "double", "DEC": "decimal(4,2)", "S": "string", "BOOL": "boolean",
           "AB": "array<bigint>", "AI": "array<int>", "MB": "map<string,bigint>", "MI": "map<string,int>",
           "SAB": "struct<`A`:bigint,`B`:bigint>", "SI": "struct<`F0`:int>", "TS": "timestamp"}

FOLDED = [  # (x IN (...), the type its values fold into)
    ("I IN (1, 2)", "int"),
    ("I IN (B)", "bigint"),
    ("B IN (I)", "bigint"),
    ("I IN (1, '2147483648')", "bigint"),  # the string's number is a BIGINT
    ("I IN ('4.000')", "decimal(13,3)"),  # INTEGER is DECIMAL(10, 0), '4.000' DECIMAL(4, 3)
    ("I IN (1, 2.0, 3.00, '4.000', 5.10)", "decimal(13,3)"),
    ("I IN (2.0, B)", "decimal(20,1)"),
    ("I IN (2.0, D)", "double"),
    ("DEC IN (0.5)", "decimal(4,2)"),  # 0.5 is DECIMAL(2, 1)
    ("D IN ('1e3')", "double"),
    ("S IN (true, 10, '10.1', 10.30)", "string"),  # literals may become strings
    ("BOOL IN (true, 'TrUe', 'tr', 'Y', 'no')", "boolean"),
    ("TS IN ('2020-01-01T00:00:00')", "timestamp"),
    ("AB IN (ARRAY[1, 2], ARRAY['3', NULL], AI)", "array<bigint>"),
    ("AI IN (ARRAY[5, 123456789000])", "array<bigint>"),  # a constructed array widens the element type
    ("MB IN (MAP('a' := 1), MAP('c' := CAST(NULL AS BIGINT)), MI)", "map<string,bigint>"),
    ("SAB IN (STRUCT(B := 2, A := 4), STRUCT(A := '7'))", "struct<`A`:bigint,`B`:bigint>"),
    ("SAB IN (STRUCT(A := 3, C := 4))", "struct<`A`:bigint,`C`:int,`B`:bigint>"),  # fields: the union, by name
    ("SI IN (SAB)", "struct<`A`:bigint,`B`:bigint,`F0`:int>"),  # STRUCTs coerce to the union of their fields
    ("I IN (NULL)", "int"),
]

REFUSED = [  # (x IN (...), what cannot join the list)
    ("BOOL IN ('maybe')", "BadLiteral: maybe BOOLEAN"),
    ("I IN ('ten')", "BadLiteral: ten INTEGER"),
    ("I IN (S)", "NotCoercible: S"),  # an expression is never read from a string
    ("S IN (I)", "NotCoercible: I"),  # nor written as one
    ("I IN (true)", "NotCoercible: TRUE"),
    ("AB IN (MAP('a' := 1))", "NotCoercible: MAP"),
    ("AB IN (ARRAY['x'])", "BadLiteral: x BIGINT"),
    ("SAB IN (STRUCT(A := true))", "NotCoercible: STRUCT"),
]


def bound(text: str):
    def bind(node):
        if isinstance(node, ast.Column):
            return Ref(node.name.text, COLUMNS[node.name.text], node.name.text)
        return None

    e = transform(parse_expression(text), bind)
    return (e.operand, *e.items)


@pytest.mark.parametrize("text, folded", FOLDED)
def test_values_fold_into_one_type(text, folded):
    assert ksql_coercion.common_type(bound(text)) == folded


@pytest.mark.parametrize("text, refused", REFUSED)
def test_values_that_cannot_join_the_list(text, refused):
    kind, _, detail = refused.partition(": ")
    with pytest.raises(getattr(ksql_coercion, kind)) as raised:
        ksql_coercion.common_type(bound(text))
    err = raised.value
    shown = f"{err.text} {err.base}" if kind == "BadLiteral" else expr_text(err.item)
    assert shown.startswith(detail)


LITERALS = [  # (literal, the type it is read as, the value)
    ("'4.000'", "int", 4),
    ("'4.000'", "decimal(13,3)", Decimal("4.000")),
    ("'10.5'", "double", 10.5),
    ("' yes '", "boolean", True),
    ("'F'", "boolean", False),
    ("true", "string", "true"),
    ("10.30", "string", "10.30"),  # a DECIMAL's digits as written
    ("10", "string", "10"),
    ("2.50", "decimal(5,2)", Decimal("2.50")),
]


@pytest.mark.parametrize("text, target, value", LITERALS)
def test_literals_are_read_as_the_lists_type(text, target, value):
    literal = parse_expression(text)
    assert ksql_coercion.literal_value(literal, target) == value
