"""Bound expressions → Spark Columns. Scalar functions of the four dialects map onto Spark SQL's."""
from __future__ import annotations

import functools
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from decimal import Decimal
from typing import Optional

from pyspark.sql import Column
from pyspark.sql import functions as F

from ..connectors.formats import split_type_args, struct_fields
from ..errors import StatementError
from ..plan import ksql_coercion, ksql_signatures
from ..plan.expressions import INTEGRAL, children, field_name, static_type
from ..plan.functions import FUNCTIONS, MASKS, TIME_UNIT_MS, TRANSLATED, UNIT_ARGUMENT, ksql_name
from ..plan.nodes import Ref
from ..plan.types import DAY_MS, TIME, spark_type
from ..sql import ast

UNIT_MS = {
    "MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000, "WEEK": 604_800_000,
}


_BINARY = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
    "%": lambda a, b: a % b, "=": lambda a, b: a == b, "<>": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "AND": lambda a, b: a & b, "OR": lambda a, b: a | b, "||": lambda a, b: F.concat(a, b),
    "<=>": lambda a, b: a.eqNullSafe(b),
}


def _number(text: str) -> Column:
    """A number literal with a point or an exponent as the four dialects (and Spark) type it: in E notation a DOUBLE,
    else a DECIMAL of exactly its digits (``2.345`` is DECIMAL(4, 3))."""
    if "e" in text.lower():
        return F.lit(float(text))
    return F.lit(Decimal(text))


def compile_expr(e: ast.Expr) -> Column:
    if isinstance(e, Ref):
        return F.col(e.id)
    if isinstance(e, ast.LambdaVar):
        return next(scope[e.name] for scope in reversed(_LAMBDA_SCOPES.get()) if e.name in scope)
    if isinstance(e, ast.Literal):
        return F.lit(e.value) if e.kind != "decimal" else _number(e.value)
    if isinstance(e, ast.Interval):
        return F.lit(e.millis)
    if getattr(e, "null_is_false", False):  # ksqlDB's comparison (``ast.BinaryOp``, ``ast.Between``)
        if isinstance(e, ast.Between) and e.negated:
            return ~compile_expr(replace(e, negated=False))
        return F.coalesce(compile_expr(replace(e, null_is_false=False)), F.lit(False))
    if isinstance(e, ast.BinaryOp) and e.op == "/" and static_type(e) in INTEGRAL:
        # integers divide into an integer, the fraction dropped toward zero (SQL's rule, and ksqlDB's, Flink's and
        # SQLstream's); exact through DECIMAL(38,0); by zero: NULL
        exact = compile_expr(e.left).cast("decimal(38,0)") / compile_expr(e.right).cast("decimal(38,0)")
        return exact.cast(static_type(e))
    if isinstance(e, ast.BinaryOp) and e.op == "+" and static_type(e) == "string":  # ksqlDB: + joins strings
        return F.concat(compile_expr(e.left).cast("string"), compile_expr(e.right).cast("string"))
    if isinstance(e, ast.BinaryOp) and e.op in ("=", "<>", "<=>") and static_type(e.left).startswith("map<"):
        # Spark cannot compare maps; ksqlDB compares them as Java's Map.equals does: the same entries, in any order
        left, right = (F.array_sort(F.map_entries(compile_expr(side))) for side in (e.left, e.right))
        return _BINARY[e.op](left, right)
    if isinstance(e, ast.BinaryOp):
        return _BINARY[e.op](compile_expr(e.left), compile_expr(e.right))
    if isinstance(e, ast.UnaryOp):
        inner = compile_expr(e.operand)
        return ~inner if e.op == "NOT" else -inner
    if isinstance(e, ast.IsNull):
        inner = compile_expr(e.operand)
        return inner.isNotNull() if e.negated else inner.isNull()
    if isinstance(e, ast.Between):
        c = compile_expr(e.operand).between(compile_expr(e.low), compile_expr(e.high))
        return ~c if e.negated else c
    if isinstance(e, ast.InList):
        c = _ksql_in(e) if e.ksql else compile_expr(e.operand).isin(*[compile_expr(i) for i in e.items])
        return ~c if e.negated else c
    if isinstance(e, ast.Like):
        c = _like(e)
        return ~c if e.negated else c
    if isinstance(e, ast.Cast):
        return _cast(e)
    if isinstance(e, (ast.ArrayLiteral, ast.MapLiteral)) and e.ksql and static_type(e):
        return _as_type(e, static_type(e))  # its elements in the type they fold into (``plan.ksql_coercion``)
    if isinstance(e, ast.ArrayLiteral):
        return F.array(*[compile_expr(i) for i in e.items])
    if isinstance(e, ast.StructLiteral):
        return F.struct(*[compile_expr(value).alias(field_name(name)) for name, value in e.fields])
    if isinstance(e, ast.MapLiteral):
        return F.create_map(*[compile_expr(part) for entry in e.entries for part in entry])
    if isinstance(e, ast.Case):
        return _case(e)
    if isinstance(e, ast.Subscript):
        base = compile_expr(e.base)
        if e.index is not None:
            return F.element_at(base, compile_expr(e.index))
        return base.getField(e.field.text)
    if isinstance(e, ast.Call):
        return _call(e)
    raise StatementError(f"unsupported expression {type(e).__name__}", rule="unsupported-expression",
                         pos=getattr(e, "pos", None))


def _cast(e: ast.Cast) -> Column:
    """A CAST as Spark makes it, but: a TIMESTAMP to TIME is its time of day (UTC), text to TIME NULL where the text
    is no time, and (ksqlDB) a TIME, ARRAY, MAP or STRUCT to text as Java writes it (``_java_text``), STRUCT fields
    matched by name (``_column_as_type``)."""
    value, target, source = compile_expr(e.operand), spark_type(e.type), static_type(e.operand)
    if target == TIME and source == "timestamp":
        return _time_of_day(F.unix_millis(value))
    if target == TIME:
        return value.try_cast(TIME)
    if e.ksql and target == "string" and (source == TIME or source.startswith(("array<", "map<", "struct<"))):
        return _java_text(value, source)
    if e.ksql and target == "binary" and source == "string":  # base64, trimmed (ksqlDB's CastEvaluator); NULL if not
        return F.try_to_binary(F.trim(value), F.lit("base64"))
    if e.ksql and source:  # STRUCT fields by name, as ksqlDB's CastEvaluator converts them
        return _column_as_type(value, source, target)
    return value.cast(target)


def _java_text(value: Column, kind: str) -> Column:
    """A value as ksqlDB's CAST to STRING writes it, its Java object's ``toString``: an ARRAY ``[1, 3]`` (a NULL
    element ``null``), a MAP ``{k=v, k2=v2}``, a STRUCT ``Struct{A=1,b=x}`` (its non-NULL fields), a TIME to the
    second, without the seconds when they are zero (``LocalTime.toString``); anything else as Spark casts it."""
    def element(x, of):
        return F.coalesce(_java_text(x, of), F.lit("null"))

    if kind == TIME:
        second = _spark("timestamp_seconds", F.floor(_spark("time_to_millis", value) / 1000))
        return F.when(F.second(second) == 0, F.date_format(second, "HH:mm")).otherwise(F.date_format(second, "HH:mm:ss"))
    if kind.startswith("array<"):
        items = F.transform(value, lambda x: element(x, kind[len("array<"):-1]))
        return F.concat(F.lit("["), F.array_join(items, ", "), F.lit("]"))
    if kind.startswith("map<"):
        key, item = split_type_args(kind[len("map<"):-1])
        entries = F.transform(F.map_entries(value), lambda entry: F.concat(
            element(entry["key"], key), F.lit("="), element(entry["value"], item)))
        return F.concat(F.lit("{"), F.array_join(entries, ", "), F.lit("}"))
    fields = struct_fields(kind)
    if fields:
        shown = [F.concat(F.lit(f"{name}="), _java_text(value.getField(name), of)) for name, of in fields]
        return F.when(value.isNotNull(), F.concat(F.lit("Struct{"), F.concat_ws(",", *shown), F.lit("}")))
    return value.cast("string")


def _time_of_day(millis: Column) -> Column:
    """The TIME of a number of milliseconds since midnight, wrapped around the clock as Java's ``LocalTime`` wraps."""
    return _spark("time_from_millis", F.pmod(millis, F.lit(DAY_MS))).cast(TIME)


def _like(e: ast.Like) -> Column:
    """``x LIKE pattern [ESCAPE 'c']``, the pattern any string expression. Spark's LIKE escapes with a backslash
    unless told another character, and refuses an escape before anything but ``%``, ``_`` or itself; ksqlDB's has
    no escape character unless ESCAPE names one, which then makes whatever follows it literal. A ksqlDB pattern is
    brought to Spark's form first: a backslash doubled, or its escape dropped where Spark would refuse it."""
    pattern = compile_expr(e.pattern)
    if e.ksql and e.escape is None:
        pattern = F.replace(pattern, F.lit("\\"), F.lit("\\\\"))
    elif e.ksql:
        c = "\\" + e.escape if not e.escape.isalnum() else e.escape
        pattern = F.regexp_replace(pattern, f"(?s)({c}[%_{c}])|{c}(.)|{c}$", "$1$2")
    return F.like(compile_expr(e.operand), pattern, None if e.escape is None else F.lit(e.escape))


def _ksql_in(e: ast.InList) -> Column:
    """ksqlDB's ``x IN (a, b, ...)``: every value converted to the type they fold into (``plan.ksql_coercion``), MAPs
    compared by their entries in any order, FALSE when nothing matches (NULL matches nothing)."""
    def null(v):
        return isinstance(v, ast.Literal) and v.kind == "null"

    values = [e.operand, *(v for v in e.items if not null(v))]
    common = ksql_coercion.common_type(values)
    if null(e.operand) or len(values) == 1 or not common:
        return F.lit(False)
    columns = [_as_type(v, common) for v in values]
    if common.startswith("map<"):
        columns = [F.array_sort(F.map_entries(c)) for c in columns]
    return F.coalesce(columns[0].isin(*columns[1:]), F.lit(False))


def _as_type(e, target: str) -> Column:
    """``e`` as a value of ``target`` the way ksqlDB converts a list's values: a literal read as one of that type
    (``'4.000'`` as 4, ``true`` as 'true'), a constructed ARRAY, MAP or STRUCT element by element, STRUCT fields by
    name (a missing one NULL), anything else cast."""
    if isinstance(e, ast.Literal):
        return F.lit(None if e.kind == "null" else ksql_coercion.literal_value(e, target)).cast(target)
    if isinstance(e, ast.ArrayLiteral):
        (element,) = split_type_args(target[len("array<"):-1])
        return F.array(*[_as_type(i, element) for i in e.items]).cast(target)
    if isinstance(e, ast.MapLiteral):  # a NULL text key as ksqlDB writes one in JSON: "null" (Spark has no NULL keys)
        key, value = split_type_args(target[len("map<"):-1])
        keys = [_as_type(k, key) if key != "string" else F.coalesce(_as_type(k, key), F.lit("null")) for k, _ in e.entries]
        return F.create_map(*[c for k, (_, v) in zip(keys, e.entries) for c in (k, _as_type(v, value))]).cast(target)
    if isinstance(e, ast.StructLiteral):
        given = {field_name(name): value for name, value in e.fields}
        return F.struct(*[(_as_type(given[name], type_) if name in given else F.lit(None).cast(type_)).alias(name)
                          for name, type_ in struct_fields(target)])
    return _column_as_type(compile_expr(e), static_type(e), target)


def _column_as_type(column: Column, source: str, target: str) -> Column:
    """A column of type ``source`` as one of ``target``: STRUCT fields by name (one ``target`` adds is NULL),
    elements, keys and values of ARRAYs and MAPs likewise, anything else by Spark's cast."""
    if source == target:
        return column
    if source.startswith("struct<") and target.startswith("struct<"):
        have = dict(struct_fields(source))
        fields = [(_column_as_type(column.getField(name), have[name], type_) if name in have
                   else F.lit(None).cast(type_)).alias(name) for name, type_ in struct_fields(target)]
        return F.when(column.isNull(), F.lit(None).cast(target)).otherwise(F.struct(*fields))
    if source.startswith("array<") and target.startswith("array<"):
        (have,), (want,) = (split_type_args(t[len("array<"):-1]) for t in (source, target))
        return F.transform(column, lambda x: _column_as_type(x, have, want))
    if source.startswith("map<") and target.startswith("map<"):
        (hk, hv), (wk, wv) = (split_type_args(t[len("map<"):-1]) for t in (source, target))
        keyed = F.transform_keys(column, lambda k, _: _column_as_type(k, hk, wk))
        return F.transform_values(keyed, lambda _, v: _column_as_type(v, hv, wv))
    return column.cast(target)


def _case(e: ast.Case) -> Column:
    out = None
    for cond, value in e.whens:
        test = compile_expr(cond) if e.operand is None else compile_expr(e.operand) == compile_expr(cond)
        out = F.when(test, compile_expr(value)) if out is None else out.when(test, compile_expr(value))
    return out.otherwise(compile_expr(e.else_)) if e.else_ is not None else out


def _call(e: ast.Call) -> Column:
    if e.ksql:  # ksqlDB's conversions of its arguments to the signature it picks
        e = replace(e, args=ksql_signatures.converted(ksql_name(e.name), e.args), ksql=False)
    if e.name in ("FLOOR", "CEIL") and len(e.args) == 2 and isinstance(e.args[1], ast.TimeUnit):
        unit = UNIT_MS.get(e.args[1].unit.rstrip("S"), None)
        if unit is None:
            raise StatementError(f"unsupported time unit {e.args[1].unit}", rule="time-unit", pos=e.pos)
        rounded = F.floor if e.name == "FLOOR" else F.ceil
        return (rounded(compile_expr(e.args[0]) / F.lit(unit)) * F.lit(unit)).cast("bigint")
    if e.name == "PROCTIME":
        return F.current_timestamp()
    if any(isinstance(a, ast.Lambda) for a in e.args):
        return _with_lambdas(e)
    args = [None if isinstance(a, ast.TimeUnit) else compile_expr(a) for a in e.args]  # a unit: read from ``e``
    if e.name == "AS_VALUE" and len(args) == 1:  # ksqlDB: a key column's value, copied into the value
        return args[0]
    if e.name in TRANSLATED:
        return _TRANSLATIONS[e.name](e, *args)
    if e.name in ("SUBSTR", "SUBSTRING") and len(args) == 2:
        args.append(F.lit(2_147_483_647))
    name = FUNCTIONS.get(e.name, e.name.lower())
    if name == "size" and len(args) == 1:  # of NULL: NULL in every dialect (Spark's legacy size is -1)
        return F.when(args[0].isNotNull(), F.size(args[0]))
    return F.call_function(name, *args)


# ------------------------------------------------------------------ ksqlDB's lambdas

# the variables of the lambdas being compiled, innermost last (per thread: queries are planned side by side)
_LAMBDA_SCOPES: ContextVar[tuple] = ContextVar("lambda_scopes", default=())


@contextmanager
def _lambda_scope(fn: ast.Lambda, values):
    token = _LAMBDA_SCOPES.set(_LAMBDA_SCOPES.get() + (dict(zip(fn.params, values)),))
    try:
        yield
    finally:
        _LAMBDA_SCOPES.reset(token)


def _lambda_body(fn: ast.Lambda, *values: Column) -> Column:
    """``fn``'s body with its variables standing for ``values`` (Spark's lambda variables)."""
    with _lambda_scope(fn, values):
        return compile_expr(fn.body)


def _with_lambdas(e: ast.Call) -> Column:
    """TRANSFORM, FILTER and REDUCE over an ARRAY's elements or a MAP's entries, as Spark's higher-order functions.
    A NULL collection gives NULL (REDUCE: its initial state). A TRANSFORM of a MAP whose new keys repeat, or are NULL,
    is NULL, and so is a TRANSFORM or FILTER whose lambda does arithmetic on a NULL (``_failure``): ksqlDB fails the
    expression where Spark would make one NULL key or element."""
    collection, *rest = e.args
    values = compile_expr(collection)
    over_map = static_type(collection).startswith("map<")

    def on_item(fn, item):  # ``fn`` applied to an element, or to a MAP entry's key and value
        return _lambda_body(fn, item["key"], item["value"]) if over_map else _lambda_body(fn, item)

    if e.name == "REDUCE":
        initial, fn = rest
        state = static_type(e)
        start = compile_expr(initial).cast(state) if state else compile_expr(initial)

        def step(acc, item):
            body = _lambda_body(fn, acc, item["key"], item["value"]) if over_map else _lambda_body(fn, acc, item)
            return body.cast(state) if state else body

        reduced = F.aggregate(F.map_entries(values) if over_map else values, start, step)
        return F.when(values.isNull(), start).otherwise(reduced)
    if e.name == "FILTER":
        kept = (F.map_filter(values, lambda k, v: F.coalesce(_lambda_body(rest[0], k, v), F.lit(False))) if over_map
                else F.filter(values, lambda x: F.coalesce(_lambda_body(rest[0], x), F.lit(False))))
    elif over_map:
        new_key, new_value = rest
        pairs = F.transform(F.map_entries(values), lambda item: F.struct(on_item(new_key, item).alias("key"),
                                                                         on_item(new_value, item).alias("value")))
        keys = F.transform(pairs, lambda pair: pair["key"])
        kept = F.when((F.size(F.array_distinct(keys)) == F.size(keys)) & ~F.exists(keys, lambda k: k.isNull()),
                      F.map_from_entries(pairs))
    else:
        kept = F.transform(values, lambda x: _lambda_body(rest[0], x))
    return F.when(~_failure(e), kept)


def _failure(e: ast.Call) -> Column:
    """Whether ksqlDB's TRANSFORM or FILTER ``e`` fails: its lambda does arithmetic on a NULL number for some element or
    entry (ksqlDB's lambdas are Java code that unboxes the value), where that arithmetic is evaluated (``_fails``)."""
    collection, *lambdas = e.args
    if e.name == "REDUCE":
        return F.lit(False)  # a NULL state or element makes the result NULL either way
    over_map = static_type(collection).startswith("map<")
    values = compile_expr(collection)

    def fails(item):
        out = F.lit(False)
        for fn in lambdas:
            with _lambda_scope(fn, (item["key"], item["value"]) if over_map else (item,)):
                out = out | _fails(fn.body)
        return out

    return F.coalesce(F.exists(F.map_entries(values) if over_map else values, fails), F.lit(False))


def _fails(e) -> Column:
    """Whether evaluating ``e`` as ksqlDB does fails on a NULL: arithmetic on one, where it is evaluated (the right side
    of AND only after a TRUE, of OR only after a FALSE, a CASE's conditions in order and the branch chosen); a nested
    TRANSFORM or FILTER that fails."""
    if isinstance(e, ast.BinaryOp) and e.op in ("AND", "OR"):
        left = F.coalesce(compile_expr(e.left), F.lit(False))
        return _fails(e.left) | ((left if e.op == "AND" else ~left) & _fails(e.right))
    if isinstance(e, ast.BinaryOp) and e.op in ("+", "-", "*", "/", "%") and static_type(e) != "string":
        return _fails(e.left) | _fails(e.right) | compile_expr(e.left).isNull() | compile_expr(e.right).isNull()
    if isinstance(e, ast.Case):
        chosen = F.when(_fails(e.operand), True) if e.operand is not None else None
        for cond, value in e.whens:
            test = F.coalesce(compile_expr(cond) if e.operand is None else compile_expr(e.operand) == compile_expr(cond),
                              F.lit(False))
            chosen = (F.when(_fails(cond), True) if chosen is None else chosen.when(_fails(cond), True))
            chosen = chosen.when(test, _fails(value))
        return chosen.otherwise(_fails(e.else_) if e.else_ is not None else F.lit(False))
    out = F.lit(False)
    for child in children(e):
        if not isinstance(child, ast.Lambda):
            out = out | _fails(child)
    if isinstance(e, ast.Call) and any(isinstance(a, ast.Lambda) for a in e.args):
        out = out | _failure(e)
    return out


# ------------------------------------------------------------------ ksqlDB's functions, in Spark SQL's terms

def _array_sum(array: Column, element_type: str) -> Column:
    """The sum of an array's elements, NULL ones left out, in their own type; NULL for a NULL array."""
    zero = F.lit(0).cast(element_type)
    return F.aggregate(array, zero, lambda total, x: total + F.coalesce(x, zero))


def _orderable(value: Column, type_: str) -> Column:
    """``value`` in a form Spark can compare for equality: a MAP (which Spark cannot compare) as its entries sorted,
    inside ARRAYs and STRUCTs too; any other value as it is."""
    lowered = type_.lower()
    if "map<" not in lowered:
        return value
    if lowered.startswith("map<"):
        _, value_type = split_type_args(type_[4:-1])
        return F.array_sort(F.transform(F.map_entries(value), lambda entry: F.struct(
            entry.getField("key").alias("k"), _orderable(entry.getField("value"), value_type).alias("v"))))
    if lowered.startswith("array<"):
        return F.transform(value, lambda element: _orderable(element, type_[6:-1]))
    return F.when(value.isNotNull(), F.struct(*[_orderable(value.getField(name), field_type).alias(name)
                                                  for name, field_type in struct_fields(type_)]))


def _array_set(kind: str):
    """ARRAY_REMOVE, ARRAY_DISTINCT, ARRAY_EXCEPT, ARRAY_INTERSECT and ARRAY_UNION, whose elements are equal as
    ksqlDB's and Flink's ``equals`` has them: NULL equals NULL (ARRAY_REMOVE(a, NULL) takes a's NULLs out, where
    Spark's gives NULL), and MAPs, or values holding them, compare by their entries (Spark's own functions refuse
    them). NULL for a NULL array; an element's first occurrence is kept, in order."""
    def same(a: Column, b: Column, type_: str) -> Column:
        return _orderable(a, type_).eqNullSafe(_orderable(b, type_))

    def distinct(array: Column, type_: str) -> Column:
        return F.filter(array, lambda x, i: ~F.exists(F.slice(array, 1, i), lambda y: same(x, y, type_)))

    def call(e: ast.Call, array: Column, other: Column) -> Column:
        array_type = static_type(e.args[0]) or static_type(e.args[1])
        element = array_type[6:-1] if array_type.lower().startswith("array<") else ""
        if kind == "remove":
            return F.filter(array, lambda x: ~same(x, other, element))
        if "map<" not in element.lower():  # Spark's own, which agree here
            return F.call_function(f"array_{kind}", array, other)
        if kind == "union":
            return F.when(array.isNotNull() & other.isNotNull(), distinct(F.concat(array, other), element))
        held = (lambda x: F.exists(other, lambda y: same(x, y, element))) if kind == "intersect" else (
            lambda x: ~F.exists(other, lambda y: same(x, y, element)))
        return F.when(other.isNotNull(), F.filter(distinct(array, element), held))

    def distinct_call(e: ast.Call, array: Column) -> Column:
        element = static_type(e.args[0])[6:-1]
        return distinct(array, element) if "map<" in element.lower() else F.array_distinct(array)

    return distinct_call if kind == "distinct" else call


def _java_log(x: Column) -> Column:
    """The natural logarithm as Java's ``Math.log`` takes it: -Infinity at 0, NaN below 0 (Spark's is NULL there)."""
    x = x.cast("double")
    return F.when(x > 0, F.log(x)).when(x == 0, F.lit(float("-inf"))).when(x.isNotNull(), F.lit(float("nan")))


def _spark(name: str, *args) -> Column:
    return F.call_function(name, *args)


def _zoned(ts: Column, zone) -> Column:
    """A UTC instant shifted so that, written in the session's time zone (UTC), it reads as ``zone``'s clock."""
    return ts if zone is None else F.from_utc_timestamp(ts, zone)


def _formatted_in(e: ast.Call, ts: Column, pattern: Column, zone) -> Column:
    """``ts`` (a UTC instant) written in ``pattern`` as ``zone``'s clock reads it (the session's, UTC, without one).
    Spark writes a pattern's zone name (``z``) as the session's; a literal pattern's ``z``, ``zz`` or ``zzz`` under a
    literal zone is written as Java's short name of that zone at the instant (PST or PDT), from the tz database."""
    pieces = _zone_name_pieces(e.args[1]) if zone is not None and len(e.args) > 2 else None
    names = _short_zone_names(e.args[2]) if pieces else None
    if not names:
        return _spark("date_format", _zoned(ts, zone), pattern)
    local = _zoned(ts, zone)
    offset = F.unix_seconds(local) - F.unix_seconds(ts)
    name = None
    for seconds, short in names.items():
        name = (F.when(offset == seconds, F.lit(short)) if name is None else name.when(offset == seconds, F.lit(short)))
    name = name.otherwise(_spark("date_format", local, F.lit("xxx")))
    parts = [_spark("date_format", local, F.lit(piece)) if piece else F.lit("") for piece in pieces]
    written = parts[0]
    for part in parts[1:]:
        written = F.concat(written, name, part)
    return written


def _zone_name_pieces(pattern: ast.Expr) -> list[str] | None:
    """A literal DateTimeFormatter pattern cut at each unquoted run of one to three ``z`` (a short zone name), or
    None when it is no literal or holds none."""
    if not (isinstance(pattern, ast.Literal) and isinstance(pattern.value, str)):
        return None
    text, pieces, start, quoted, i = pattern.value, [], 0, False, 0
    while i < len(text):
        if text[i] == "'":
            quoted = not quoted
        elif text[i] == "z" and not quoted:
            end = i
            while end < len(text) and text[end] == "z":
                end += 1
            if end - i <= 3:
                pieces.append(text[start:i])
                start = end
            i = end
            continue
        i += 1
    return pieces + [text[start:]] if pieces else None


@functools.cache
def _zone_names(zone: str) -> dict:
    from datetime import datetime, timedelta, timezone
    from zoneinfo import ZoneInfo

    try:
        tz = ZoneInfo(zone)
    except (ValueError, KeyError, OSError):
        return {}
    names: dict = {}
    at = datetime(1970, 1, 1, tzinfo=timezone.utc)
    while at.year < 2100:  # every half month: each offset the zone has used, with the name it had last
        local = at.astimezone(tz)
        name = local.tzname()
        if name and name[0].isalpha():  # "+03": no name (Java writes its own); left to the offset
            names[int(local.utcoffset().total_seconds())] = name
        at += timedelta(days=15)
    return names


def _short_zone_names(zone: ast.Expr) -> dict | None:
    """UTC offset (s) -> the zone's short name, for a literal zone id (``America/Los_Angeles``)."""
    if not (isinstance(zone, ast.Literal) and isinstance(zone.value, str)):
        return None
    return _zone_names(zone.value) or None


def _unzoned(ts: Column, zone) -> Column:
    """The inverse of ``_zoned``: a wall-clock time read in ``zone``, as the instant it names."""
    return ts if zone is None else F.to_utc_timestamp(ts, zone)


def _instant(e: ast.Call, value: Column) -> Column:
    """TIMESTAMPTOSTRING's first argument as a TIMESTAMP: milliseconds since 1970, or a TIMESTAMP already."""
    return value if static_type(e.args[0]) == "timestamp" else _spark("timestamp_millis", value)


def _integer_literal(e: ast.Expr) -> int | None:
    """The value of an integer literal (``2``, ``-1``), or None for any other expression."""
    if isinstance(e, ast.UnaryOp) and e.op == "-":
        inner = _integer_literal(e.operand)
        return None if inner is None else -inner
    return e.value if isinstance(e, ast.Literal) and e.kind == "integer" else None


def _whole(number: Column, truncate: bool) -> Column:
    """``number`` made whole: toward zero (``truncate``), or to the nearest, ties toward positive infinity."""
    return F.when(number >= 0, F.floor(number)).otherwise(F.ceil(number)) if truncate else F.floor(number + F.lit(0.5))


def _ksql_round(e: ast.Call, value: Column, places: Column | None = None) -> Column:
    """ksqlDB's ROUND (and TRUNC, toward zero): ties go toward positive infinity (Java's ``Math.round``:
    ROUND(-1.5) is -1, not -2); an integer, or a DOUBLE without places, becomes a BIGINT; a DOUBLE with places is
    rounded as its shortest decimal text (``BigDecimal.valueOf``); a DECIMAL is rounded in decimal arithmetic and
    keeps its type with places, and becomes a whole DECIMAL(precision - scale, 0) without."""
    kind = static_type(e.args[0])
    truncate = e.name == "KSQL_TRUNC"
    digits = _integer_literal(e.args[1]) if places is not None else None
    if kind.startswith("decimal") and (places is None or digits is not None):
        return _ksql_round_decimal(value, kind, digits, truncate)
    if kind in INTEGRAL and places is None:
        return value.cast("bigint")
    if kind in INTEGRAL:  # with places: the (DOUBLE, INT) signature
        kind, value = "double", value.cast("double")
    if kind in ("double", "float") and places is None:
        return _whole(value, truncate).cast("bigint")
    if not (kind.startswith("decimal") or kind in ("double", "float")) or (places is not None and digits is None):
        scale = F.lit(1.0) if places is None else F.pow(F.lit(10.0), places)  # in floating point
        return _whole(value * scale, truncate) / scale
    exact = value.cast("string").cast("decimal(38,16)")  # a DOUBLE with places
    unit = F.lit(10 ** abs(digits)).cast("decimal(38,0)")
    rounded = _whole(exact / unit, truncate) * unit if digits < 0 else _whole(exact * unit, truncate) / unit
    return rounded.cast("double")


def _ksql_round_decimal(value: Column, kind: str, places: Optional[int], truncate: bool) -> Column:
    """ROUND / TRUNC of a DECIMAL to ``places`` digits (None: to a whole DECIMAL(precision - scale, 0)), exactly:
    Spark's ROUND goes half away from zero, so a negative tie is moved one unit back up."""
    digits = places or 0
    if truncate:
        rounded = F.when(value >= 0, F.floor(value, digits)).otherwise(F.ceil(value, digits))
    else:
        rounded = F.round(value, digits)
        half = F.lit(Decimal(1).scaleb(-digits) / 2)
        rounded = F.when((value < 0) & (value - rounded == half), rounded + 2 * half).otherwise(rounded)
    precision, scale = (int(p) for p in kind[len("decimal("):-1].split(","))
    return rounded.cast(kind if places is not None else f"decimal({max(1, precision - scale)},0)")


def _split(e: ast.Call, text: Column, delimiter: Column) -> Column:
    """ksqlDB's SPLIT cuts at a literal delimiter (Spark's split takes a regular expression); an empty one cuts
    between characters. BYTES are cut at BYTES, byte by byte: as ISO-8859-1 text, one character per byte."""
    if static_type(e) != "array<binary>":
        return _split_text(text, delimiter)
    pieces = _split_text(F.decode(text, "ISO-8859-1"), F.decode(delimiter, "ISO-8859-1"))
    return F.transform(pieces, lambda piece: F.encode(piece, "ISO-8859-1"))


def _split_text(text: Column, delimiter: Column) -> Column:
    return F.when(delimiter == F.lit(""), _spark("split", text, F.lit(""))).otherwise(
        _spark("split", text, _literally(delimiter), F.lit(-1)))


def _literally(text: Column) -> Column:
    """A regular expression matching ``text`` itself."""
    return F.concat(F.lit("\\Q"), text, F.lit("\\E"))


def _regexp_split(e: ast.Call, text: Column, pattern: Column) -> Column:
    """ksqlDB's REGEXP_SPLIT_TO_ARRAY: cut at every match of a regular expression, empty pieces kept (an empty
    expression cuts between characters); NULL when either argument is."""
    return F.when(pattern == F.lit(""), _spark("split", text, F.lit(""))).otherwise(
        _spark("split", text, pattern, F.lit(-1)))


def _split_to_map(e: ast.Call, text: Column, entry: Column, pair: Column) -> Column:
    """ksqlDB's SPLIT_TO_MAP: ``text`` cut at the literal ``entry`` delimiter, empty entries and entries without
    the ``pair`` delimiter left out, each entry's key before its first ``pair`` delimiter and its value up to the
    next; a repeated key takes its last value. NULL when an argument is NULL, a delimiter is empty or both are
    the same."""
    entries = F.filter(_spark("split", text, _literally(entry), F.lit(-1)),
                       lambda x: (x != F.lit("")) & (F.instr(x, pair) > 0))
    parts = F.transform(entries, lambda x: _spark("split", x, _literally(pair), F.lit(-1)))
    keys = F.transform(parts, lambda p: F.element_at(p, 1))
    n, distinct = F.size(keys), F.array_distinct(keys)
    last = lambda k: F.element_at(parts, (n + 1 - F.array_position(F.reverse(keys), k)).cast("int"))  # noqa: E731
    values = F.transform(distinct, lambda k: F.element_at(last(k), 2))
    usable = (entry != F.lit("")) & (pair != F.lit("")) & (entry != pair)
    return F.when(usable, F.map_from_arrays(distinct, values))


def _json_elements(text: Column) -> tuple[Column, Column]:
    """A JSON array's elements: each one's JSON text as Spark reads it (objects and arrays compact, in their order; a
    string unquoted), and each one as a VARIANT; both NULL for text that is no JSON array."""
    elements = _spark("try_variant_get", _spark("try_parse_json", text), F.lit("$"), F.lit("array<variant>"))
    return F.from_json(text, "array<string>"), elements


def _json_kind(element: Column) -> Column:
    """An element's JSON kind, as ``schema_of_variant`` names it: STRING, BIGINT, DECIMAL(p,s), DOUBLE, BOOLEAN, VOID
    (null), OBJECT<...>, ARRAY<...>."""
    return _spark("schema_of_variant", element)


def _json_text(raw: Column, value: Column) -> Column:
    """A JSON value as compact JSON text, from its text as Spark's JSON reader gives it (``raw``: a string unquoted,
    objects in their order) and the same value as a VARIANT."""
    return F.when(_json_kind(value) == F.lit("STRING"), F.to_json(value)).otherwise(F.coalesce(raw, F.lit("null")))


def _json_items(e: Optional[ast.Call], text: Column) -> Column:
    """ksqlDB's JSON_ITEMS: a JSON array's elements, each as compact JSON text (a string element quoted, a null
    one ``null``)."""
    raw, elements = _json_elements(text)
    return F.transform(raw, lambda x, i: _json_text(x, F.element_at(elements, i + 1)))


def _json_concat(e: ast.Call, *texts: Column) -> Column:
    """ksqlDB's JSON_CONCAT: JSON objects merged (a later one's field replaces an earlier one's of the same name, in
    its place; new fields after), else every value's elements in one array (a value that is no array is one element);
    compact JSON text, NULL when any argument is NULL or no JSON."""
    parsed = [_spark("try_parse_json", t) for t in texts]
    objects = [_spark("try_variant_get", v, F.lit("$"), F.lit("map<string,variant>")) for v in parsed]
    if len(texts) == 1:
        merged = _json_items(None, F.concat(F.lit("["), texts[0], F.lit("]")))
        return F.when(parsed[0].isNotNull(), F.element_at(merged, 1))
    keys = F.array_distinct(F.concat(*[F.coalesce(_spark("json_object_keys", t), F.array()) for t in texts]))
    raws = [F.from_json(t, "map<string,string>") for t in texts]

    def field(k: Column) -> Column:  # the last object's field named k, as "k":value
        last = F.lit(None)
        for raw, values in zip(raws, objects):
            last = F.when(F.array_contains(F.map_keys(values), k),
                          _json_text(F.element_at(raw, k), F.element_at(values, k))).otherwise(last)
        return F.concat(F.regexp_extract(F.to_json(F.array(k)), r"^\[(.*)\]$", 1), F.lit(":"), last)  # "k" quoted

    as_object = F.concat(F.lit("{"), F.array_join(F.transform(keys, field), ","), F.lit("}"))
    items = [F.when(_json_kind(v).startswith("ARRAY"), _json_items(None, t)).otherwise(
        _json_items(None, F.concat(F.lit("["), t, F.lit("]")))) for t, v in zip(texts, parsed)]
    as_array = F.concat(F.lit("["), F.array_join(F.concat(*items), ","), F.lit("]"))
    every_object = functools.reduce(Column.__and__, [_json_kind(v).startswith("OBJECT") for v in parsed])
    valid = functools.reduce(Column.__and__, [v.isNotNull() for v in parsed])
    return F.when(valid, F.when(every_object, as_object).otherwise(as_array))


def _json_records(e: ast.Call, text: Column) -> Column:
    """ksqlDB's JSON_RECORDS: a JSON object's fields, each value as text: a string's own text, any other value (a
    null too) as compact JSON; NULL for text that is no JSON object."""
    return F.transform_values(F.from_json(text, "map<string,string>"), lambda _, v: F.coalesce(v, F.lit("null")))


def _json_array_contains(e: ast.Call, text: Column, value: Column) -> Column:
    """ksqlDB's JSON_ARRAY_CONTAINS: whether a JSON array holds ``value``: an element of the JSON kind of the value's
    type (a string for a STRING; an integer for an INT or BIGINT; a number with a fraction or an exponent for a
    DOUBLE; a boolean) and equal to it, or a null element for a NULL (never for a DECIMAL); false for text that is
    no JSON array, NULL for NULL text."""
    raw, elements = _json_elements(text)
    kinds = F.transform(elements, _json_kind)
    kind = static_type(e.args[1]) if len(e.args) > 1 else ""

    def same(x: Column, k: Column) -> Column:  # element x, of JSON kind k, is the value
        if kind in ("tinyint", "smallint", "int", "bigint"):
            return k.isin("TINYINT", "SMALLINT", "INT", "BIGINT") & (x.cast("bigint") == value.cast("bigint"))
        if kind in ("double", "float"):
            return (k.startswith("DECIMAL") | k.isin("DOUBLE", "FLOAT")) & (x.cast("double") == value.cast("double"))
        if kind == "boolean":
            return (k == F.lit("BOOLEAN")) & (x == F.lower(value.cast("string")))
        if kind == "string":
            return (k == F.lit("STRING")) & (x == value)
        return F.lit(False)  # a DECIMAL (2.5 is one), or a value of a type no JSON element has

    found = F.exists(F.arrays_zip(raw.alias("x"), kinds.alias("k")), lambda p: F.when(
        value.isNull(), p["k"] == F.lit("VOID")).otherwise(F.coalesce(same(p["x"], p["k"]), F.lit(False))))
    return F.when(text.isNotNull(), F.coalesce(found, F.lit(False)))


def _shifted_time(e: ast.Call, _unit, count: Column, time: Column) -> Column:
    """ksqlDB's TIMESTAMPADD / TIMESTAMPSUB (a TIMESTAMP shifted by a count of a unit, in whole milliseconds), TIMEADD /
    TIMESUB (a TIME so, wrapped around midnight) and
    DATEADD / DATESUB (a DATE shifted so, then cut to its day toward 1970, as Java's ``TimeUnit.toDays``); null when
    any argument is."""
    count, per = count.cast("bigint"), TIME_UNIT_MS[e.args[0].unit]
    shift = count * F.lit(per) if per >= 1 else _toward_zero(count / F.lit(round(1 / per)))
    if e.name.endswith("SUB"):
        shift = -shift
    if e.name.startswith("TIMESTAMP"):
        return _spark("timestamp_millis", _spark("unix_millis", time.cast("timestamp")) + shift)
    if e.name.startswith("TIME"):  # TIMEADD / TIMESUB: around the clock
        return _time_of_day(_spark("time_to_millis", time) + shift)
    days = _toward_zero((_spark("unix_date", time).cast("bigint") * F.lit(86_400_000) + shift) / F.lit(86_400_000))
    return _spark("date_from_unix_date", days.cast("int"))


def _toward_zero(number: Column) -> Column:
    return F.when(number >= 0, F.floor(number)).otherwise(F.ceil(number))


def _to_json_string(e: ast.Call, value: Column) -> Column:
    """ksqlDB's TO_JSON_STRING: any value as its JSON text (``null`` for NULL), compact; a TIMESTAMP as
    ``yyyy-MM-dd'T'HH:mm:ss.SSS``, a DATE as ``yyyy-MM-dd``, BYTES in base64."""
    if static_type(e.args[0]) == "binary":
        value = F.base64(value)
    text = F.to_json(F.array(value), {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSS", "dateFormat": "yyyy-MM-dd",
                                      "ignoreNullFields": "false"})
    return F.regexp_extract(text, r"^\[(.*)\]$", 1)


def _geo_distance(e: ast.Call, lat1, lon1, lat2, lon2, unit=None) -> Column:
    """ksqlDB's GEO_DISTANCE: the great-circle distance by the haversine formula, in km (radius 6371) or, when
    the fifth argument names miles, in miles (3959; a NULL unit is km); null outside the latitudes and longitudes
    there are."""
    radius = F.lit(6371.0)
    if unit is not None:
        name = F.lower(unit)
        radius = (F.when(name.isNull(), F.lit(6371.0)).when(name.isin("mi", "mile", "miles"), F.lit(3959.0))
                  .when(name.isin("km", "kilometer", "kilometers", "kilometre", "kilometres"), F.lit(6371.0)))
    lat1, lon1, lat2, lon2 = (c.cast("double") for c in (lat1, lon1, lat2, lon2))

    def haversin(delta):
        return F.pow(F.sin(F.radians(delta) / 2), 2)

    a = haversin(lat2 - lat1) + haversin(lon2 - lon1) * F.cos(F.radians(lat1)) * F.cos(F.radians(lat2))
    valid = (F.abs(lat1) <= 90) & (F.abs(lat2) <= 90) & (F.abs(lon1) <= 180) & (F.abs(lon2) <= 180)
    return F.when(valid, F.lit(2.0) * F.asin(F.sqrt(a)) * radius)


def _url_part(url: Column, part: str) -> Column:
    """A part of a URL as Java's ``URI`` reads it (null where the URL does not parse, as a ksqlDB function that
    fails)."""
    return _spark("try_parse_url", url, F.lit(part))


def _uri_decoded(text: Column) -> Column:
    """A URI component's %-escapes decoded (``URI.getQuery``, ``getPath``...): a '+' stays a '+'."""
    return _spark("try_url_decode", F.replace(text, F.lit("+"), F.lit("%2B")))


def _url_parameter(e: ast.Call, url: Column, name: Column) -> Column:
    """ksqlDB's URL_EXTRACT_PARAMETER: the value of the first ``name=value`` of the URL's (decoded) query, '' for
    a bare ``name``, null when there is none."""
    pairs = F.filter(F.split(_uri_decoded(_url_part(url, "QUERY")), "&"), lambda p: F.split(p, "=", 2)[0] == name)
    first = _spark("try_element_at", pairs, F.lit(1))
    return F.when(first.isNotNull(), F.coalesce(_spark("try_element_at", F.split(first, "=", 2), F.lit(2)), F.lit("")))


def _by_encoding(encoding: Column, **forms: Column) -> Column:
    """The form named by ksqlDB's encoding argument (``hex``, ``utf8``, ``ascii``, ``base64``, in any case); NULL for
    another, as ksqlDB's failing call gives."""
    chosen = F.lower(encoding)
    out = None
    for name, form in forms.items():
        out = F.when(chosen == name, form) if out is None else out.when(chosen == name, form)
    return out


def _to_bytes(e: ast.Call, text: Column, encoding: Column) -> Column:
    return _by_encoding(encoding, hex=F.unhex(text), utf8=F.encode(text, "UTF-8"), ascii=F.encode(text, "US-ASCII"),
                        base64=F.unbase64(text))


def _from_bytes(e: ast.Call, data: Column, encoding: Column) -> Column:
    return _by_encoding(encoding, hex=F.hex(data), utf8=F.decode(data, "UTF-8"), ascii=F.decode(data, "US-ASCII"),
                        base64=F.base64(data))


def _exact(n: int) -> Column:
    """A whole number beyond a BIGINT's range, as a DECIMAL literal."""
    return F.lit(Decimal(n)).cast("decimal(20,0)")


def _unsigned_from_bytes(data: Column, size: int, order: Column | None) -> Column:
    """``size`` bytes as an unsigned number (DECIMAL(20, 0)), big-endian unless ``order`` is 'LITTLE_ENDIAN'; NULL for
    another number of bytes (ksqlDB's call fails)."""
    digits = F.hex(data)
    if order is not None:
        reversed_pairs = F.concat(*[F.substring(digits, 2 * i + 1, 2) for i in reversed(range(size))])
        digits = F.when(F.upper(order) == "LITTLE_ENDIAN", reversed_pairs).otherwise(digits)
    return F.when(F.length(data) == size, F.conv(digits, 16, 10).cast("decimal(20,0)"))


def _int_from_bytes(size: int):
    def convert(e: ast.Call, data: Column, order: Column | None = None) -> Column:
        unsigned = _unsigned_from_bytes(data, size, order)
        top = 2 ** (8 * size)
        return F.when(unsigned >= _exact(top // 2), unsigned - _exact(top)).otherwise(unsigned).cast(
            "int" if size == 4 else "bigint")
    return convert


def _double_from_bytes(e: ast.Call, data: Column, order: Column | None = None) -> Column:
    """8 bytes as an IEEE 754 double (Java's ``ByteBuffer.getDouble``): sign, 11-bit exponent, 52-bit fraction, each
    part exact in Spark's arithmetic."""
    bits = _unsigned_from_bytes(data, 8, order)
    negative = bits >= _exact(2 ** 63)
    rest = F.when(negative, bits - _exact(2 ** 63)).otherwise(bits)
    exponent = F.floor(rest / _exact(2 ** 52))
    fraction = (rest - exponent * _exact(2 ** 52)).cast("double")
    size = (F.when(exponent == 0, fraction * F.pow(F.lit(2.0), F.lit(-1074)))
            .when(exponent == 2047, F.when(fraction == 0, F.lit(float("inf"))).otherwise(F.lit(float("nan"))))
            .otherwise((F.lit(1.0) + fraction / F.lit(float(2 ** 52))) * F.pow(F.lit(2.0), exponent - 1023)))
    return F.when(negative, -size).otherwise(size)


def _generate_series(e: ast.Call, start: Column, end: Column, step: Column | None = None) -> Column:
    """ksqlDB's GENERATE_SERIES: start to end by step (1, or -1 when end is below start); NULL where the step
    never reaches the end (ksqlDB's call fails), where Spark's sequence would fail the query."""
    kind = static_type(e)[len("array<"):-1] or "bigint"
    start, end = start.cast(kind), end.cast(kind)
    if step is None:
        step = F.when(end < start, F.lit(-1)).otherwise(F.lit(1))
    step = step.cast(kind)
    reaches = (start == end) | (step > 0) & (start < end) | (step < 0) & (start > end)
    return F.when(reaches, F.sequence(start, end, step))


def _as_map(e: ast.Call, keys: Column, values: Column) -> Column:
    """ksqlDB's AS_MAP: keys paired with values in order, as far as both go; a repeated key takes its last value (a
    Java map's put), a NULL text key is written "null" (Spark has no NULL keys)."""
    n = F.least(F.size(keys), F.size(values))
    given = F.slice(keys, 1, n)
    if static_type(e).startswith("map<string,"):
        given = F.transform(given, lambda k: F.coalesce(k, F.lit("null")))
    distinct = F.array_distinct(given)
    last = F.transform(distinct, lambda k: F.element_at(values, (n + 1 - F.array_position(F.reverse(given), k)).cast("int")))
    return F.map_from_arrays(distinct, last)


def _map_union(e: ast.Call, first: Column, second: Column) -> Column:
    """ksqlDB's MAP_UNION: both maps' entries, the second's value where both have a key; NULL when both are."""
    keys = F.array_distinct(F.concat(F.map_keys(first), F.map_keys(second)))
    values = F.transform(keys, lambda k: F.when(F.array_contains(F.map_keys(second), k), F.element_at(second, k))
                         .otherwise(F.element_at(first, k)))
    return F.when(first.isNull(), second).when(second.isNull(), first).otherwise(F.map_from_arrays(keys, values))


def _entries(e: ast.Call, entries: Column, sort: Column) -> Column:
    """ksqlDB's ENTRIES: a MAP's entries as STRUCT<K, V>, by key when ``sort`` holds."""
    pairs = F.transform(F.map_entries(entries), lambda p: F.struct(p["key"].alias("K"), p["value"].alias("V")))
    return F.when(F.coalesce(sort, F.lit(False)), F.array_sort(pairs)).otherwise(pairs)


def _slice(e: ast.Call, array: Column, start: Column, end: Column) -> Column:
    """ksqlDB's SLICE: the elements from position ``start`` to ``end``, both kept, 1-based (a NULL bound: the array's
    first or last); NULL when the bounds fall outside the array or cross (``List.subList``'s refusal)."""
    first, last = F.coalesce(start - 1, F.lit(0)), F.coalesce(end, F.size(array))
    within = array.isNotNull() & (first >= 0) & (last <= F.size(array)) & (first <= last)
    return F.when(within, F.slice(array, first + 1, last - first))


def _regexp_matches(e: ast.Call, pattern: Column, text: Column, group: Optional[Column] = None) -> Column:
    """Every match of ``pattern`` in ``text`` (its group ``group``, the whole match by default), as ksqlDB's
    REGEXP_EXTRACT_ALL finds them; NULL for a NULL argument or a group the pattern does not have."""
    group = F.lit(0) if group is None else group
    literal = e.args[0] if isinstance(e.args[0], ast.Literal) and isinstance(e.args[0].value, str) else None
    number = e.args[2].value if len(e.args) > 2 and isinstance(e.args[2], ast.Literal) else 0
    if literal is not None and isinstance(number, int):
        try:
            if number > re.compile(literal.value).groups:
                return F.lit(None).cast("array<string>")
        except re.error:
            pass  # Java's syntax, which Python's does not read: Spark's reader decides
    return F.when(group.isNotNull(), _spark("regexp_extract_all", text, pattern, group))


def _chr(e: ast.Call, code: Column) -> Column:
    """ksqlDB's CHR: the character of a Unicode code point, or of its UTF-16 escapes as text (``'\u004b'``); NULL for
    anything else."""
    if static_type(e.args[0]) == "string":
        escapes = code.rlike(r"^(\\u[0-9a-fA-F]{4})+$")
        return F.when(escapes, F.decode(F.unhex(F.regexp_replace(code, r"\\u", "")), "UTF-16BE"))
    valid = (code >= 0) & (code <= 0x10FFFF) & ~code.between(0xD800, 0xDFFF)  # a lone surrogate is no text here
    return F.when(valid, F.decode(F.unhex(F.lpad(F.hex(code), 8, "0")), "UTF-32"))


def _occurrence(text: Column, part: Column, n: Column) -> Column:
    """The 0-based index of the ``n``-th occurrence of ``part`` in ``text``, occurrences overlapping (Commons Lang's
    ``ordinalIndexOf``: 0 for an empty part), or -1."""
    def step(at, _):
        found = _spark("locate", part, text, at + 2)
        return F.when(at == -2, at).when(found > 0, found - 1).otherwise(F.lit(-2))

    index = F.aggregate(F.sequence(F.lit(1), n), F.lit(-1), step)
    return F.when(n <= 0, F.lit(-1)).when(part == "", F.lit(0)).otherwise(F.when(index == -2, F.lit(-1)).otherwise(index))


def _instr(e: ast.Call, text: Column, part: Column, position: Optional[Column] = None,
           occurrence: Optional[Column] = None) -> Column:
    """ksqlDB's INSTR: the 1-based position of the ``occurrence``-th ``part`` in ``text`` from ``position`` (from the
    end, backwards, when negative), 0 when there is none or an argument is NULL."""
    position = F.lit(1) if position is None else position
    occurrence = F.lit(1) if occurrence is None else occurrence
    length = F.length(text)

    def found(within: Column, sought: Column, at: Column) -> Column:  # Commons' substring: a negative start from the end
        start = F.when(at - 1 < 0, F.greatest(length + at - 1, F.lit(0))).otherwise(at - 1)
        return _occurrence(F.substring(within, start + 1, 2_147_483_647), sought, occurrence)

    forward = found(text, part, position)
    backward = found(F.reverse(text), F.reverse(part), -position)
    result = F.when(position < 0, F.when(backward >= 0, length + position - backward - F.length(part) + 2)).otherwise(
        F.when(forward >= 0, forward + position))
    unknown = text.isNull() | part.isNull() | (F.abs(position) > length)
    return F.when(unknown, F.lit(0)).otherwise(F.coalesce(result, F.lit(0))).cast("int")


_MASK_DEFAULTS = ("X", "x", "n", "-")


def _masked(text: Column, chars: tuple) -> Column:
    """``text`` masked as ksqlDB's ``Masker`` does: every upper-case letter, lower-case letter, digit and other
    character replaced by its mask character (``chars``, or the defaults; a NULL mask leaves its kind as is); NULL
    when a mask is not one character (ksqlDB's error)."""
    upper, lower, digit, other = chars or [F.lit(c) for c in _MASK_DEFAULTS]
    invalid = F.lit(False)
    for c in (upper, lower, digit, other):
        invalid = invalid | (c.isNotNull() & (F.length(c) != 1))
    kept = F.transform(F.split(text, ""), lambda c: F.when(c.rlike(r"\p{Lu}"), F.coalesce(upper, c))
                       .when(c.rlike(r"\p{Ll}"), F.coalesce(lower, c)).when(c.rlike(r"\p{Nd}"), F.coalesce(digit, c))
                       .otherwise(F.coalesce(other, c)))
    return F.when(~invalid, F.when(text == "", text).otherwise(F.array_join(kept, "")))  # "" splits into [""]


def _mask_part(kind: str):
    """ksqlDB's MASK_KEEP_LEFT, MASK_KEEP_RIGHT, MASK_LEFT and MASK_RIGHT: ``n`` characters at one end kept, or
    masked, the rest masked, or kept; NULL for a negative ``n`` (ksqlDB's error)."""
    def translate(e: ast.Call, text: Column, n: Column, *chars: Column) -> Column:
        length = F.length(text)
        count = F.least(n, length)
        cut = count if kind.endswith("LEFT") else length - count  # the characters before the cut, and after it
        head, tail = F.substring(text, 1, cut), F.substring(text, cut + 1, 2_147_483_647)
        masks_head = kind in ("MASK_LEFT", "MASK_KEEP_RIGHT")
        parts = [_masked(head, chars), tail] if masks_head else [head, _masked(tail, chars)]
        return F.when(n >= 0, F.concat(*parts))

    return translate


def _encode(e: ast.Call, text: Column, source: Column, target: Column) -> Column:
    """ksqlDB's ENCODE: text in one of hex, utf8, ascii and base64 rewritten in another of them (NULL for the same
    one twice or another name, as ksqlDB fails the call). ASCII writes '?' for what it cannot hold and reads
    U+FFFD for a byte it does not know, as Java's charsets do; hex may start with 0x or be quoted as X'..'."""
    source, target = F.lower(source), F.lower(target)
    rest = F.substring(text, 3, 2_147_483_647)
    hex_text = (F.when(text.rlike("^0x"), F.when(F.length(text) % 2 != 0, F.concat(F.lit("0"), rest)).otherwise(rest))
                .when(text.rlike("^[xX]'.*'$"), F.substring(text, F.lit(3), F.length(text) - 3)).otherwise(text))
    even = F.length(hex_text) % 2 == 0  # Commons Codec refuses an odd count of digits (Spark's reader pads them)
    data = (F.when((source == "hex") & even, _spark("try_to_binary", hex_text, F.lit("hex")))
            .when(source == "utf8", F.encode(text, "UTF-8"))
            .when(source == "ascii", F.encode(F.regexp_replace(text, r"[^\x00-\x7F]", "?"), "US-ASCII"))
            .when(source == "base64", _spark("try_to_binary", text, F.lit("base64"))))
    written = (F.when(target == "hex", F.lower(F.hex(data)))
               .when(target == "utf8", F.decode(data, "UTF-8"))
               .when(target == "ascii", F.regexp_replace(F.decode(data, "ISO-8859-1"), r"[\x80-\xFF]", "\uFFFD"))
               .when(target == "base64", F.base64(data)))
    return F.when(source != target, written)  # ksqlDB knows no encoding into itself


def _field(e: ast.Call, text: Column, *among: Column) -> Column:
    """ksqlDB's FIELD: the 1-based position of ``text`` among the other arguments, 0 when it is not there or NULL."""
    if not among:
        return F.lit(0)
    return F.coalesce(F.array_position(F.array(*[c.cast("string") for c in among]), text), F.lit(0)).cast("int")


_TRANSLATIONS = {
    "FIELD": _field,
    "GENERATE_SERIES": _generate_series, "AS_MAP": _as_map, "ENTRIES": _entries, "MAP_UNION": _map_union,
    "TO_BYTES": _to_bytes, "FROM_BYTES": _from_bytes, "INT_FROM_BYTES": _int_from_bytes(4),
    "BIGINT_FROM_BYTES": _int_from_bytes(8), "DOUBLE_FROM_BYTES": _double_from_bytes,
    "TIMESTAMPTOSTRING": lambda e, ms, fmt, zone=None: _formatted_in(e, _instant(e, ms), fmt, zone),
    "STRINGTOTIMESTAMP": lambda e, text, fmt, zone=None: _spark("unix_millis", _unzoned(_spark("to_timestamp", text, fmt), zone)),
    "FORMAT_TIMESTAMP": lambda e, ts, fmt, zone=None: _formatted_in(e, ts, fmt, zone),
    "PARSE_TIMESTAMP": lambda e, text, fmt, zone=None: _unzoned(_spark("to_timestamp", text, fmt), zone),
    "DATETOSTRING": lambda e, days, fmt: _spark("date_format", _spark("date_from_unix_date", days), fmt),
    "STRINGTODATE": lambda e, text, fmt: _spark("unix_date", _spark("to_date", text, fmt)),
    "FORMAT_DATE": lambda e, date, fmt: _spark("date_format", date, fmt),
    "PARSE_DATE": lambda e, text, fmt: _spark("to_date", text, fmt),
    "FROM_DAYS": lambda e, days: _spark("date_from_unix_date", days),
    "UNIX_DATE": lambda e, date=None: _spark("unix_date", F.current_date() if date is None else date),
    "UNIX_TIMESTAMP": lambda e, ts=None: _spark("unix_millis", F.current_timestamp() if ts is None else ts),
    "EXTRACTJSONFIELD": lambda e, text, path: _spark("get_json_object", text, path),
    "IS_JSON_STRING": lambda e, text: F.coalesce(_spark("try_parse_json", text).isNotNull(), F.lit(False)),
    "JSON_KEYS": lambda e, text: _spark("json_object_keys", text),
    "JSON_RECORDS": _json_records,
    "JSON_ITEMS": _json_items, "JSON_ARRAY_CONTAINS": _json_array_contains, "JSON_CONCAT": _json_concat,
    "SPLIT": _split, "REGEXP_SPLIT_TO_ARRAY": _regexp_split, "SPLIT_TO_MAP": _split_to_map,
    "RANDOM": lambda e: F.rand(),
    "TO_JSON_STRING": _to_json_string,
    **dict.fromkeys(UNIT_ARGUMENT, _shifted_time),
    "ARRAY_CONCAT": lambda e, left, right: F.when(left.isNull(), right).when(right.isNull(), left).otherwise(
        F.concat(left, right)),  # one NULL array: the other
    "GEO_DISTANCE": _geo_distance,
    **{f"ARRAY_{kind.upper()}": _array_set(kind) for kind in ("remove", "distinct", "except", "intersect", "union")},
    "URL_ENCODE_PARAM": lambda e, text: _spark("url_encode", text),
    "URL_DECODE_PARAM": lambda e, text: _spark("try_url_decode", text),
    "URL_EXTRACT_FRAGMENT": lambda e, url: _uri_decoded(_url_part(url, "REF")),
    "URL_EXTRACT_HOST": lambda e, url: _url_part(url, "HOST"),
    "URL_EXTRACT_PARAMETER": _url_parameter,
    "URL_EXTRACT_PATH": lambda e, url: _uri_decoded(_url_part(url, "PATH")),
    "URL_EXTRACT_PORT": lambda e, url: F.regexp_extract(_url_part(url, "AUTHORITY"), r":(\d+)$", 1).try_cast("int"),
    "URL_EXTRACT_PROTOCOL": lambda e, url: _url_part(url, "PROTOCOL"),
    "URL_EXTRACT_QUERY": lambda e, url: _uri_decoded(_url_part(url, "QUERY")),
    "KSQL_ROUND": _ksql_round,
    "KSQL_TRUNC": _ksql_round,
    "KSQL_FROM_UNIXTIME": lambda e, ms: _spark("timestamp_millis", ms),
    "KSQL_CONVERT_TZ": lambda e, ts, source, target: F.from_utc_timestamp(F.to_utc_timestamp(ts, source), target),
    "KSQL_CONCAT": lambda e, *texts: F.concat(*[F.coalesce(t, F.unhex(F.lit(""))) for t in texts])
    if static_type(e) == "binary" else F.concat_ws("", *[t.cast("string") for t in texts]),
    "KSQL_LPAD": lambda e, text, length, padding: F.when((length >= 0) & (F.length(padding) > 0),
                                                         _spark("lpad", text, length, padding)),
    "KSQL_RPAD": lambda e, text, length, padding: F.when((length >= 0) & (F.length(padding) > 0),
                                                         _spark("rpad", text, length, padding)),
    "KSQL_ARRAY_SORT": lambda e, array, order=None: F.array_sort(array) if order is None else F.when(
        F.upper(order) == "ASC", F.array_sort(array)).when(F.upper(order) == "DESC", F.sort_array(array, asc=False)),
    "KSQL_TRIM": lambda e, text: F.regexp_replace(text, "^[\\x00-\\x20]+|[\\x00-\\x20]+$", ""),
    "KSQL_ARRAY_SUM": lambda e, array: _array_sum(array, static_type(e)),
    "KSQL_LN": lambda e, x: _java_log(x),
    "KSQL_LOG": lambda e, base, x=None: _java_log(base) if x is None else F.when(
        base.isNotNull() & x.isNotNull(),
        F.when((base <= 0) | (base == 1), F.lit(float("nan"))).otherwise(_java_log(x) / _java_log(base))),
    "FORMAT_TIME": lambda e, time, fmt: _spark("date_format", _spark("timestamp_millis", _spark("time_to_millis", time)),
                                               fmt),
    "PARSE_TIME": lambda e, text, fmt: _time_of_day(F.unix_millis(_spark("try_to_timestamp", text, fmt))),
    "KSQL_CONCAT_WS": lambda e, separator, *values: _spark("concat_ws", separator, *values)
    if static_type(e) != "binary" else F.when(separator.isNotNull(), F.unhex(_spark(  # bytes joined as hex
        "array_join", F.transform(F.filter(F.array(*values), lambda v: v.isNotNull()), F.hex), F.hex(separator)))),
    "KSQL_SLICE": _slice,
    "KSQL_REGEXP_EXTRACT_ALL": _regexp_matches,
    "KSQL_REGEXP_EXTRACT": lambda e, *args: F.get(_regexp_matches(e, *args), 0),
    "KSQL_CHR": _chr, "KSQL_INSTR": _instr, "KSQL_ENCODE": _encode,
    "KSQL_MASK": lambda e, text, *chars: _masked(text, chars),
    **{kind: _mask_part(kind) for kind in MASKS},
    "KSQL_ARRAY_JOIN": lambda e, array, delimiter=None: _spark(
        "array_join", array.cast("array<string>"),
        F.lit(",") if delimiter is None else F.coalesce(delimiter, F.lit("")), F.lit("null")),
}
