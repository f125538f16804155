"""Bound expressions → Spark Columns. Scalar functions of the four dialects map onto Spark SQL's."""
from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from ..errors import StatementError
from ..plan.expressions import INTEGRAL, static_type
from ..plan.functions import FUNCTIONS
from ..plan.nodes import Ref
from ..plan.types import spark_type
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


def compile_expr(e: ast.Expr) -> Column:
    if isinstance(e, Ref):
        return F.col(e.id)
    if isinstance(e, ast.Literal):
        return F.lit(e.value) if e.kind != "decimal" else F.lit(e.value).cast("decimal(38,10)")
    if isinstance(e, ast.Interval):
        return F.lit(e.millis)
    if isinstance(e, ast.BinaryOp) and e.op == "/" and static_type(e) in INTEGRAL:
        # integers divide into an integer, the fraction dropped toward zero (SQL's rule, and ksqlDB's, Flink's and
        # SQLstream's); exact through DECIMAL(38,0); by zero: NULL
        exact = compile_expr(e.left).cast("decimal(38,0)") / compile_expr(e.right).cast("decimal(38,0)")
        return exact.cast(static_type(e))
    if isinstance(e, ast.BinaryOp) and e.op == "+" and static_type(e) == "string":  # ksqlDB: + joins strings
        return F.concat(compile_expr(e.left).cast("string"), compile_expr(e.right).cast("string"))
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
        c = compile_expr(e.operand).isin(*[compile_expr(i) for i in e.items])
        return ~c if e.negated else c
    if isinstance(e, ast.Like):
        c = compile_expr(e.operand).like(e.pattern.value) if isinstance(e.pattern, ast.Literal) else None
        if c is None:
            raise StatementError("LIKE needs a string literal pattern", rule="like-pattern", pos=e.pos)
        return ~c if e.negated else c
    if isinstance(e, ast.Cast):
        return compile_expr(e.operand).cast(spark_type(e.type))
    if isinstance(e, ast.ArrayLiteral):
        return F.array(*[compile_expr(i) for i in e.items])
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


def _case(e: ast.Case) -> Column:
    out = None
    for cond, value in e.whens:
        test = compile_expr(cond) if e.operand is None else compile_expr(e.operand) == compile_expr(cond)
        out = F.when(test, compile_expr(value)) if out is None else out.when(test, compile_expr(value))
    return out.otherwise(compile_expr(e.else_)) if e.else_ is not None else out


def _call(e: ast.Call) -> Column:
    if e.name in ("FLOOR", "CEIL") and len(e.args) == 2 and isinstance(e.args[1], ast.TimeUnit):
        unit = UNIT_MS.get(e.args[1].unit.rstrip("S"), None)
        if unit is None:
            raise StatementError(f"unsupported time unit {e.args[1].unit}", rule="time-unit", pos=e.pos)
        rounded = F.floor if e.name == "FLOOR" else F.ceil
        return (rounded(compile_expr(e.args[0]) / F.lit(unit)) * F.lit(unit)).cast("bigint")
    if e.name == "PROCTIME":
        return F.current_timestamp()
    args = [compile_expr(a) for a in e.args]
    if e.name == "AS_VALUE" and len(args) == 1:  # ksqlDB: a key column's value, copied into the value
        return args[0]
    if e.name in ("SUBSTR", "SUBSTRING") and len(args) == 2:
        args.append(F.lit(2_147_483_647))
    name = FUNCTIONS.get(e.name, e.name.lower())
    return F.call_function(name, *args)
