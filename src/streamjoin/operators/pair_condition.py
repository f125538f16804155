"""A Flink ON condition over both inputs, evaluated inside an operator on its candidate pairs.

Where a condition decides padding (an outer interval join: a record is padded when no pair in its bounds
passes the condition), the operator must know, pair by pair, which ones pass; a filter after the join
cannot tell. ``compile_condition`` turns the bound condition into a vectorised function of a pandas frame
whose columns are the plan's field ids (one row per candidate pair), giving a boolean array: SQL's
three-valued logic, where a pair whose condition is NULL does not pass.

Supported: column references, literals, ``+ - * / %``, comparisons, ``AND``/``OR``/``NOT``, ``IS [NOT]
NULL``, ``IS NOT DISTINCT FROM``, ``[NOT] BETWEEN``, ``[NOT] IN (literals)``, and ``UPPER``, ``LOWER``,
``ABS``, ``COALESCE``. ``supported`` tells validation which conditions those are; any other is refused
before the query starts.
"""
from __future__ import annotations

import operator
from typing import Callable

import numpy as np
import pandas as pd

from ..plan.nodes import Ref
from ..sql import ast

# a compiled node: frame -> (values, null mask)
Compiled = Callable[[pd.DataFrame], tuple[pd.Series, np.ndarray]]

_ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "%": operator.mod}
_COMPARE = {"=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_FUNCTIONS = {"UPPER", "LOWER", "ABS", "COALESCE"}


def supported(expr: ast.Expr) -> bool:
    """Whether ``compile_condition`` can evaluate ``expr``."""
    if isinstance(expr, (Ref, ast.Literal)):
        return not isinstance(expr, ast.Literal) or expr.kind != "decimal"
    if isinstance(expr, ast.BinaryOp):
        return (expr.op in _ARITHMETIC or expr.op in _COMPARE or expr.op in ("AND", "OR", "<=>")) and \
            supported(expr.left) and supported(expr.right)
    if isinstance(expr, ast.UnaryOp):
        return supported(expr.operand)
    if isinstance(expr, ast.IsNull):
        return supported(expr.operand)
    if isinstance(expr, ast.Between):
        return all(supported(e) for e in (expr.operand, expr.low, expr.high))
    if isinstance(expr, ast.InList):
        return supported(expr.operand) and all(isinstance(i, ast.Literal) for i in expr.items)
    if isinstance(expr, ast.Call):
        return expr.name in _FUNCTIONS and not expr.star and all(supported(a) for a in expr.args)
    return False


def compile_condition(expr: ast.Expr) -> Callable[[pd.DataFrame], np.ndarray]:
    """``frame -> bool array``: which rows (candidate pairs) pass ``expr`` (NULL does not)."""
    compiled = _compile(expr)

    def passes(frame: pd.DataFrame) -> np.ndarray:
        if not len(frame):
            return np.zeros(0, dtype=bool)
        values, null = compiled(frame)
        return np.asarray(values.fillna(False).astype(bool).to_numpy(), dtype=bool) & ~null

    return passes


def _compile(e: ast.Expr) -> Compiled:
    if isinstance(e, Ref):
        def column(f):
            s = f[e.id].reset_index(drop=True)
            return s, s.isna().to_numpy()
        return column
    if isinstance(e, ast.Literal):
        def literal(f):
            return pd.Series([e.value] * len(f), dtype=object if e.value is None else None), np.full(len(f), e.value is None)
        return literal
    if isinstance(e, ast.UnaryOp):
        inner = _compile(e.operand)
        if e.op == "NOT":
            def negate(f):
                v, n = inner(f)
                return ~_truth(v), n
            return negate
        def minus(f):
            v, n = inner(f)
            return -_filled(v, n, 0), n
        return minus
    if isinstance(e, ast.IsNull):
        inner = _compile(e.operand)
        def is_null(f):
            _, n = inner(f)
            return pd.Series(~n if e.negated else n), np.zeros(len(f), dtype=bool)
        return is_null
    if isinstance(e, ast.Between):
        low = ast.BinaryOp(">=", e.operand, e.low)
        high = ast.BinaryOp("<=", e.operand, e.high)
        both = ast.BinaryOp("AND", low, high)
        return _compile(ast.UnaryOp("NOT", both) if e.negated else both)
    if isinstance(e, ast.InList):
        inner = _compile(e.operand)
        items = [i.value for i in e.items if i.value is not None]
        def in_list(f):
            v, n = inner(f)
            found = v.isin(items).to_numpy()
            return pd.Series(~found if e.negated else found), n
        return in_list
    if isinstance(e, ast.Call):
        args = [_compile(a) for a in e.args]
        if e.name == "COALESCE":
            def coalesce(f):
                out, null = args[0](f)
                out = out.copy()
                for a in args[1:]:
                    v, n = a(f)
                    out[null] = v[null]
                    null = null & n
                return out, null
            return coalesce
        def call(f):
            v, n = args[0](f)
            if e.name == "ABS":
                return _filled(v, n, 0).abs(), n
            text = v.astype(object).where(~n, "").astype(str)
            return (text.str.upper() if e.name == "UPPER" else text.str.lower()), n
        return call
    if isinstance(e, ast.BinaryOp):
        left, right = _compile(e.left), _compile(e.right)
        if e.op in ("AND", "OR"):
            def logic(f):
                (lv, ln), (rv, rn) = left(f), right(f)
                lt, rt = _truth(lv).to_numpy() & ~ln, _truth(rv).to_numpy() & ~rn
                lf, rf = ~_truth(lv).to_numpy() & ~ln, ~_truth(rv).to_numpy() & ~rn
                if e.op == "AND":  # false wins over NULL
                    value, null = lt & rt, ~(lf | rf) & (ln | rn)
                else:  # true wins over NULL
                    value, null = lt | rt, ~(lt | rt) & (ln | rn)
                return pd.Series(value), null
            return logic
        if e.op == "<=>":
            def same(f):
                (lv, ln), (rv, rn) = left(f), right(f)
                equal = (lv.to_numpy(dtype=object) == rv.to_numpy(dtype=object)) & ~ln & ~rn
                return pd.Series(equal | (ln & rn)), np.zeros(len(f), dtype=bool)
            return same
        op = _COMPARE.get(e.op) or _ARITHMETIC[e.op]
        integral = e.op == "/" and _integral(e.left) and _integral(e.right)
        def binary(f):
            (lv, ln), (rv, rn) = left(f), right(f)
            null = ln | rn
            if e.op in _COMPARE:
                result = np.zeros(len(f), dtype=bool)
                ok = ~null
                if ok.any():
                    result[ok] = op(lv[ok].to_numpy(dtype=object), rv[ok].to_numpy(dtype=object)).astype(bool)
                return pd.Series(result), null
            if e.op in ("/", "%"):
                null = null | (_filled(rv, rn, 1) == 0).to_numpy()
            a, b = _filled(lv, null, 0), _filled(rv, null, 1)
            if integral:  # SQL: INT / INT is an INT, truncated toward zero
                return pd.Series(np.trunc(a.astype(float) / b.astype(float))), null
            return op(a, b), null
        return binary
    raise ValueError(f"cannot evaluate {type(e).__name__} on candidate pairs")


_INTEGERS = ("tinyint", "smallint", "int", "integer", "bigint")


def _integral(e: ast.Expr) -> bool:
    """Whether ``e`` is of an integer type (a pandas column of one may hold floats when it has NULLs)."""
    if isinstance(e, Ref):
        return e.type.lower() in _INTEGERS
    if isinstance(e, ast.Literal):
        return e.kind == "integer"
    if isinstance(e, ast.BinaryOp) and e.op in ("+", "-", "*", "%", "/"):
        return _integral(e.left) and _integral(e.right)
    return isinstance(e, ast.UnaryOp) and e.op == "-" and _integral(e.operand)


def _truth(values: pd.Series) -> pd.Series:
    return values.fillna(False).astype(bool)


def _filled(values: pd.Series, null: np.ndarray, fill) -> pd.Series:
    """Numbers with NULLs replaced (their result is masked as NULL anyway)."""
    return pd.Series(np.where(null, fill, values.to_numpy(dtype=object))).infer_objects()
