"""Flink ON conditions evaluated on candidate pairs (operators.pair_condition): SQL's three-valued logic,
a pair passes only when its condition is TRUE. No Spark."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamjoin.operators.pair_condition import compile_condition, supported
from streamjoin.plan.nodes import Ref
from streamjoin.sql import ast

A, B, S = Ref("a", "int", "l.a"), Ref("b", "int", "r.b"), Ref("s", "string", "r.s")
FRAME = pd.DataFrame({"a": [1, 5, None, 4, 7], "b": [2, 5, 3, None, 2], "s": ["x", "Y", None, "y", "z"]})


def lit(v):
    kind = {str: "string", int: "integer", bool: "boolean", type(None): "null"}[type(v)]
    return ast.Literal(v, kind)


def op(o, left, right):
    return ast.BinaryOp(o, left, right)


# (what, condition, which of FRAME's rows pass)
CASES = [
    ("a comparison; NULL on either side does not pass", op("<", A, B), [True, False, False, False, False]),
    ("<> with a NULL is not TRUE", op("<>", A, B), [True, False, False, False, True]),
    ("arithmetic", op("=", op("+", A, lit(1)), B), [True, False, False, False, False]),
    ("integer division truncates", op("=", op("/", A, lit(2)), lit(3)), [False, False, False, False, True]),
    ("OR: TRUE wins over NULL", op("OR", op("<", A, B), op("=", S, lit("z"))), [True, False, False, False, True]),
    ("AND: FALSE wins over NULL", ast.UnaryOp("NOT", op("AND", op("<", A, B), op("=", S, lit("q")))),
     [True, True, False, True, True]),
    ("IS NULL", ast.IsNull(A), [False, False, True, False, False]),
    ("IS NOT DISTINCT FROM", op("<=>", A, B), [False, True, False, False, False]),
    ("BETWEEN", ast.Between(B, A, op("+", A, lit(1))), [True, True, False, False, False]),
    ("IN a list", ast.InList(S, (lit("x"), lit("z"))), [True, False, False, False, True]),
    ("UPPER", op("=", ast.Call("UPPER", (S,)), lit("Y")), [False, True, False, True, False]),
    ("COALESCE", op(">", ast.Call("COALESCE", (A, lit(10))), lit(6)), [False, False, True, False, True]),
]


@pytest.mark.parametrize("what,condition,expected", CASES, ids=[c[0] for c in CASES])
def test_pairs_pass_only_when_the_condition_is_true(what, condition, expected):
    assert supported(condition)
    assert compile_condition(condition)(FRAME).tolist() == expected


def test_what_cannot_be_evaluated_on_pairs_is_reported():
    assert not supported(ast.Call("SUBSTRING", (S, lit(1), lit(2))))
    assert not supported(ast.Cast(A, ast.TypeName("STRING")))
    assert compile_condition(op("<", A, B))(FRAME.iloc[0:0]).dtype == np.bool_
