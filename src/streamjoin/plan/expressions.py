"""Helpers over syntax-tree expressions: generic rewriting, conjunct splitting, column references."""
from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Callable, Iterator, Optional

from ..sql import ast


def children(e: ast.Expr) -> Iterator[ast.Expr]:
    for f in dataclasses.fields(e):
        value = getattr(e, f.name)
        if isinstance(value, ast.Expr):
            yield value
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, ast.Expr):
                    yield item
                elif isinstance(item, tuple):
                    yield from (x for x in item if isinstance(x, ast.Expr))


def walk(e: ast.Expr) -> Iterator[ast.Expr]:
    yield e
    for child in children(e):
        yield from walk(child)


def transform(e: ast.Expr, fn: Callable[[ast.Expr], Optional[ast.Expr]]) -> ast.Expr:
    """Rebuild ``e`` bottom-up... top-down: ``fn`` returns a replacement for a node, or None to recurse."""
    replaced = fn(e)
    if replaced is not None:
        return replaced
    changes = {}
    for f in dataclasses.fields(e):
        value = getattr(e, f.name)
        if isinstance(value, ast.Expr):
            changes[f.name] = transform(value, fn)
        elif isinstance(value, tuple) and any(isinstance(v, (ast.Expr, tuple)) for v in value):
            changes[f.name] = tuple(
                transform(v, fn) if isinstance(v, ast.Expr)
                else tuple(transform(x, fn) if isinstance(x, ast.Expr) else x for x in v) if isinstance(v, tuple)
                else v
                for v in value
            )
    return dataclasses.replace(e, **changes) if changes else e


def conjuncts(e: Optional[ast.Expr]) -> list[ast.Expr]:
    """The terms of an AND chain (an absent condition has none)."""
    if e is None:
        return []
    if isinstance(e, ast.BinaryOp) and e.op == "AND":
        return conjuncts(e.left) + conjuncts(e.right)
    return [e]


def conjoin(terms: list[ast.Expr]) -> Optional[ast.Expr]:
    if not terms:
        return None
    out = terms[0]
    for t in terms[1:]:
        out = ast.BinaryOp("AND", out, t, pos=getattr(out, "pos", ast.NOWHERE))
    return out


AGGREGATES = {"COUNT", "SUM", "MIN", "MAX", "AVG", "COLLECT_LIST", "COLLECT_SET", "LATEST_BY_OFFSET", "EARLIEST_BY_OFFSET",
              "TOPK", "TOPKDISTINCT", "STDDEV_SAMPLE", "KSQL_STDDEV_SAMP", "HISTOGRAM",
              "CORRELATION", "ATTR"}
TOP_K = ("TOPK", "TOPKDISTINCT")  # ksqlDB's: (column, k), k an integer literal
BY_OFFSET = ("EARLIEST_BY_OFFSET", "LATEST_BY_OFFSET")  # ksqlDB's: (column [, n] [, ignoreNulls])


def is_aggregate(e: ast.Expr) -> bool:
    return any(isinstance(x, ast.Call) and x.name in AGGREGATES for x in walk(e))


def number_type(text: str) -> str:
    """The type of a number literal with a point or an exponent: in E notation a DOUBLE, else a DECIMAL of exactly
    its digits (``2.345``: DECIMAL(4,3), ``0.5``: DECIMAL(1,1)), as Spark and the dialects type it."""
    if "e" in text.lower():
        return "double"
    digits, exponent = Decimal(text).as_tuple()[1:]
    scale = max(-exponent, 0)
    return f"decimal({max(len(digits), scale, 1)},{scale})"


INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_ARITHMETIC = ("+", "-", "*", "/", "%")
_LOGICAL = ("=", "<>", "<", "<=", ">", ">=", "<=>", "AND", "OR")


def field_name(name: ast.Ident) -> str:
    """The name a ``STRUCT(name := ...)`` field gets: as written when quoted, else upper-cased (ksqlDB)."""
    return name.text if name.quoted else name.text.upper()


def static_type(e: ast.Expr) -> str:
    """The Spark type of ``e`` where the plan knows it without Spark: a resolved column's, a literal's, a CAST's,
    a predicate's (BOOLEAN), a constructed array's, struct's or map's (an array's and a map's by their first
    element), and arithmetic over those (integral with integral stays integral, BIGINT if either is; with a
    DOUBLE or FLOAT it is DOUBLE; ``+`` with a string is a string: ksqlDB concatenates), calls whose signature
    fixes their type (``functions.call_type``), struct fields; "" where it does not."""
    from .nodes import Ref
    from .types import spark_type

    if isinstance(e, (Ref, ast.LambdaVar)):
        return e.type
    if isinstance(e, ast.Lambda):
        return static_type(e.body)
    if isinstance(e, ast.Literal):
        if e.kind == "integer":
            return "int" if -2**31 <= e.value < 2**31 else "bigint"
        if e.kind == "decimal":
            return number_type(e.value)
        return {"string": "string", "boolean": "boolean"}.get(e.kind, "")
    if isinstance(e, ast.BinaryOp) and e.op in _LOGICAL or isinstance(e, (ast.IsNull, ast.Between, ast.InList, ast.Like)):
        return "boolean"
    if isinstance(e, ast.UnaryOp) and e.op == "NOT":
        return "boolean"
    if isinstance(e, (ast.ArrayLiteral, ast.MapLiteral)) and e.ksql:  # ksqlDB's: the type its values fold into
        from . import ksql_coercion

        try:
            return ksql_coercion.constructed_type(e)
        except (ksql_coercion.NotCoercible, ksql_coercion.BadLiteral):
            return ""
    if isinstance(e, ast.ArrayLiteral) and e.items:
        element = static_type(e.items[0])
        return f"array<{element}>" if element else ""
    if isinstance(e, ast.StructLiteral):
        types = [static_type(value) for _, value in e.fields]
        return ("struct<" + ",".join(f"`{field_name(name)}`:{t}" for (name, _), t in zip(e.fields, types)) + ">"
                if all(types) else "")
    if isinstance(e, ast.MapLiteral) and e.entries:
        key, value = static_type(e.entries[0][0]), static_type(e.entries[0][1])
        return f"map<{key},{value}>" if key and value else ""
    if isinstance(e, ast.Cast):
        return spark_type(e.type)
    if isinstance(e, ast.UnaryOp) and e.op == "-":
        return static_type(e.operand)
    if isinstance(e, ast.BinaryOp) and e.op in _ARITHMETIC:
        types = {static_type(e.left), static_type(e.right)}
        if e.op == "+" and "string" in types:  # ksqlDB's + of strings concatenates them
            return "string"
        if types <= set(INTEGRAL):
            return "bigint" if "bigint" in types else "int"
        if types & {"double", "float"} and all(t in INTEGRAL + ("double", "float") or t.startswith("decimal") for t in types):
            return "double"
    if isinstance(e, ast.Subscript):  # a struct's field, an array's element, a map's value
        from .types import inner_type

        return inner_type(static_type(e.base), e.field.text if e.field is not None else None)
    if isinstance(e, ast.Call) and e.name not in AGGREGATES:
        from .functions import call_type

        return call_type(e.name, [static_type(a) for a in e.args])
    return ""
