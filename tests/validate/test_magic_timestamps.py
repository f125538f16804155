"""ksqlDB's WHERE reads a string compared with ROWTIME, WINDOWSTART or WINDOWEND as the time it names
(``plan.functions.ksql_magic_timestamps``), as far as the text goes, with its offset or in UTC."""
from __future__ import annotations

import pytest

from streamjoin.plan.functions import ksql_magic_timestamps
from streamjoin.sql import ast

TEXTS = [
    ("2018", 1514764800000),
    ("2018-02", 1517443200000),
    ("2018-01-01T00:00:00.001", 1514764800001),
    ("2018-01-01T00:00:00.1", 1514764800100),
    ("2019-01-01T00:00:00+0445", 1546283700000),
    ("2019-01-01T00:00:00-01:00", 1546304400000),
    ("2020-02-10T08:31:44.001+0000", 1581323504001),
    ("2020-02-10T08:31Z", 1581323460000),
]


def _column(name):
    return ast.Column(ast.Ident(name))


@pytest.mark.parametrize("text, millis", TEXTS)
def test_a_string_compared_with_rowtime_is_the_time_it_names(text, millis):
    where = ast.BinaryOp(">", _column("ROWTIME"), ast.Literal(text, "string"))
    assert ksql_magic_timestamps(where).right == ast.Literal(millis, "integer")


def test_window_bounds_and_between_are_read_too_other_columns_are_not():
    where = ast.BinaryOp("AND", ast.BinaryOp("<=", ast.Literal("2018", "string"), _column("WINDOWSTART")),
                         ast.Between(_column("WINDOWEND"), ast.Literal("2018", "string"), ast.Literal("2019", "string")))
    rewritten = ksql_magic_timestamps(where)
    assert rewritten.left.left == ast.Literal(1514764800000, "integer")
    assert (rewritten.right.low.value, rewritten.right.high.value) == (1514764800000, 1546300800000)
    other = ast.BinaryOp("=", _column("NAME"), ast.Literal("2018", "string"))
    assert ksql_magic_timestamps(other) == other
