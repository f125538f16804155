"""The time bounds of a Flink interval join, read from its two-input ON / WHERE terms.

Each term compares the two inputs' time attributes, each optionally shifted by an interval:
``a.t BETWEEN b.t - INTERVAL '4' HOUR AND b.t``, ``a.t >= b.t - INTERVAL '1' MINUTE``, ``a.t < b.t``. All
terms together bound ``d = right.t - left.t`` to ``[lower, upper]`` (milliseconds; a strict comparison
moves its bound by one millisecond, as Flink does; ``lower > upper`` is legal and matches nothing). A term
of any other form is refused with the rule ``interval-bound``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import StatementError
from ..sql import ast
from . import expressions as ex
from .nodes import Join, PlanNode, Ref, base_scan, expr_text, under_chain

FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True)
class IntervalBounds:
    lower: int  # right.t - left.t >= lower
    upper: int  # right.t - left.t <= upper


def interval_bounds(join: Join) -> IntervalBounds:
    left_time, right_time = time_attribute(join.left), time_attribute(join.right)
    lower, upper = None, None
    for term in _comparisons(join.residual):
        op, a, b = term
        if op == "?":
            raise _refuse(join, f"{expr_text(a)} is not a time bound: use BETWEEN, <, <=, > or >= on the time attributes")
        sa, ca = _shifted(a, left_time, right_time, join)
        sb, cb = _shifted(b, left_time, right_time, join)
        if {sa, sb} != {"L", "R"}:
            raise _refuse(join, f"{expr_text(a)} {op} {expr_text(b)} must compare the time attribute of each input")
        if sa == "R":  # write it as  left.t + ca  op  right.t + cb
            (sa, ca), (sb, cb), op = (sb, cb), (sa, ca), FLIPPED[op]
        # left.t + ca <= right.t + cb  <=>  d >= ca - cb
        if op in ("<", "<="):
            bound = ca - cb + (1 if op == "<" else 0)
            lower = bound if lower is None else max(lower, bound)
        else:
            bound = ca - cb - (1 if op == ">" else 0)
            upper = bound if upper is None else min(upper, bound)
    if lower is None or upper is None:
        raise _refuse(join, "an interval join needs a lower and an upper bound between the inputs' time attributes")
    return IntervalBounds(lower, upper)  # lower > upper: nothing matches (Flink accepts such bounds)


def time_attribute(node: PlanNode) -> Optional[str]:
    """The id of the field of ``node`` that is its input's event-time attribute (``WATERMARK FOR``). An
    event-time temporal join keeps its left input's (its rows carry that input's time, as in Flink), so a
    further temporal join may follow it."""
    scan = base_scan(node)
    if scan is None:
        join = under_chain(node, Join)
        return time_attribute(join.left) if join is not None and join.shape in TIME_KEEPING else None
    if not scan.source.watermark_column:
        return None
    name = scan.source.watermark_column.casefold()
    return next((f.id for f in scan.fields if f.name.casefold() == name and f.qualifier == scan.alias), None)


TIME_KEEPING = ("temporal", "temporal-function")  # joins whose rows keep the left input's time


def _comparisons(residual: Optional[ast.Expr]):
    for term in ex.conjuncts(residual):
        if isinstance(term, ast.Between) and not term.negated:
            yield ">=", term.operand, term.low
            yield "<=", term.operand, term.high
        elif isinstance(term, ast.BinaryOp) and term.op in FLIPPED:
            yield term.op, term.left, term.right
        else:
            yield "?", term, term


def _shifted(e: ast.Expr, left_time, right_time, join: Join) -> tuple[str, int]:
    """``t`` or ``t ± INTERVAL`` of one input's time attribute: ('L' or 'R', shift in ms)."""
    shift = 0
    while isinstance(e, ast.BinaryOp) and e.op in ("+", "-") and isinstance(e.right, ast.Interval):
        shift += e.right.millis if e.op == "+" else -e.right.millis
        e = e.left
    if isinstance(e, Ref) and e.id in (left_time, right_time):
        return ("L" if e.id == left_time else "R"), shift
    raise _refuse(join, f"{expr_text(e)} is not the time attribute (WATERMARK FOR column) of either input")


def _refuse(join: Join, message: str) -> StatementError:
    return StatementError(message, rule="interval-bound", pos=join.pos)
