"""SQLstream OVER windows on a join input, reduced to the three frames the instant-window join runs.

At instant T (a millisecond of the stream clock) an input's window holds:
- ``range``: rows with ``T - preceding <= t <= T - upto`` (``RANGE INTERVAL 'n' unit PRECEDING`` is
  preceding = n, upto = 0; ``RANGE BETWEEN a PRECEDING AND b PRECEDING``; no OVER at all is
  ``RANGE CURRENT ROW``: preceding = upto = 0);
- ``rows``: the last ``preceding + 1`` rows of the whole input read up to T (``ROWS n PRECEDING``,
  ``ROWS BETWEEN n PRECEDING AND CURRENT ROW``);
- ``tumble``: rows of T's frame, ``floor(t / unit) == floor(T / unit)`` and ``t <= T``
  (``ORDER BY FLOOR(ROWTIME TO unit) RANGE CURRENT ROW``).
Every other form is refused by ``frame_problem`` with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..sql import ast

UNIT_MS = {"SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000}


@dataclass(frozen=True)
class Frame:
    kind: str  # 'range', 'rows' or 'tumble'
    preceding: int = 0  # range: how far back the window reaches (ms); rows: how many earlier rows it holds
    upto: int = 0  # range: how far short of the current instant it stops (ms)
    unit: int = 0  # tumble: the frame length (ms)

    @property
    def enters(self) -> int:
        """How long after its own time a row enters its window: its own instant is ``t + enters``."""
        return self.upto if self.kind == "range" else 0


CURRENT_ROW = Frame("range")


def frame_of(spec: Optional[ast.WindowSpec]) -> Frame:
    """The frame of an input's OVER window (``frame_problem`` must have accepted it)."""
    if spec is None:
        return CURRENT_ROW
    if spec.order_by is not None:
        return Frame("tumble", unit=UNIT_MS[_floor_unit(spec.order_by)])
    preceding = _amount(spec.lower)
    if spec.unit == "ROWS":
        return Frame("rows", preceding=preceding)
    return Frame("range", preceding=preceding, upto=_amount(spec.upper))


def frame_problem(spec: Optional[ast.WindowSpec]) -> Optional[str]:
    """Why an OVER window cannot bound a join input, or None."""
    if spec is None:
        return None
    if spec.partition_by:
        return "PARTITION BY in a join input's OVER window is not supported: the window spans the whole input"
    if spec.order_by is not None:
        unit = _floor_unit(spec.order_by)
        if unit not in UNIT_MS or spec.unit != "RANGE" or spec.lower.kind != "CURRENT ROW" or spec.upper.kind != "CURRENT ROW":
            return ("an ordered join window must be a tumbling frame: ORDER BY FLOOR(ROWTIME TO SECOND|MINUTE|HOUR|DAY) "
                    "RANGE CURRENT ROW")
        return None
    for bound in (spec.lower, spec.upper):
        if bound.kind == "FOLLOWING":
            return "a join window cannot reach into the future: FOLLOWING bounds are not supported"
        if bound.kind == "UNBOUNDED PRECEDING":
            return "a join window must be bounded: UNBOUNDED PRECEDING would keep every row forever"
    if spec.unit == "ROWS" and spec.upper.kind != "CURRENT ROW":
        return "a ROWS join window must end at CURRENT ROW"
    if spec.unit == "RANGE" and _amount(spec.upper) > _amount(spec.lower):
        return "the window's lower bound must not be later than its upper bound"
    return None


def _amount(bound: ast.FrameBound) -> int:
    return int(bound.amount or 0) if bound.kind == "PRECEDING" else 0


def _floor_unit(expr: ast.Expr) -> Optional[str]:
    if (isinstance(expr, ast.Call) and expr.name.upper() == "FLOOR" and len(expr.args) == 2
            and isinstance(expr.args[1], ast.TimeUnit) and _is_rowtime(expr.args[0])):
        return expr.args[1].unit.upper()
    return None


def _is_rowtime(expr: ast.Expr) -> bool:
    return isinstance(expr, ast.Column) and expr.name.text.upper() == "ROWTIME"
