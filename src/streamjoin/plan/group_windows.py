"""Flink's group windows: ``GROUP BY TUMBLE(t, size)`` and ``GROUP BY HOP(t, slide, size)``, with the window's
auxiliary functions (``TUMBLE_START``, ``TUMBLE_END``, ``TUMBLE_ROWTIME``, and the ``HOP_`` ones) in SELECT and
HAVING; and the windowing table functions ``TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), size))`` / ``HOP(..., slide,
size)``, whose rows carry ``window_start``, ``window_end`` and ``window_time``: a GROUP BY over one by
``window_start, window_end`` is the same group window (the aggregate assigns the windows itself, under the
table function), and without one the table function's rows are lowered as they are.

``t`` must be an event-time attribute of the aggregate's input: a column an input declares ``WATERMARK FOR``,
passed on unchanged through filters and projections, through an event-time temporal join (its left input's)
and through an interval join (both inputs'). An interval join holds the watermark back: a pair may carry a
time up to the join's larger bound behind the watermark, so Flink delays the join's output watermark by
``max(upper, -lower)`` of its bounds ``lower <= r.t - l.t <= upper`` (``RowTimeIntervalJoin``'s
``getMaxOutputDelay``); the window aggregate after it reads the watermark minus that (``GroupWindow.delay_ms``).
``SESSION`` and ``CUMULATE`` windows are not built yet (refused).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..errors import StatementError
from ..sql import ast
from .intervals import TIME_KEEPING, interval_bounds
from . import expressions as ex
from .nodes import (
    Field, Filter, GroupWindow, Join, Lateral, PlanNode, Project, Ref, Repartition, Scan, WindowTable, expr_text,
)
from .scope import new_id

WINDOWS = {"TUMBLE": 2, "HOP": 3}  # the group window functions and their argument counts
AUXILIARY = {f"{kind}_{part}": part for kind in WINDOWS for part in ("START", "END", "ROWTIME")}


def group_window(group_exprs: list, node: PlanNode) -> tuple[Optional[GroupWindow], list, PlanNode]:
    """The group window of a GROUP BY's (bound) expressions over ``node``, if any, the other expressions, and
    the aggregate's input: ``node``, or what is under a windowing table function grouped by its
    ``window_start`` and ``window_end`` (the aggregate assigns the windows itself)."""
    table = _window_table(node)
    if table is not None:
        columns = {table.window.start.id, table.window.end.id}
        grouped = {e.id for e in group_exprs if isinstance(e, Ref)}
        if columns <= grouped:
            return table.window, [e for e in group_exprs if not (isinstance(e, Ref) and e.id in columns)], \
                _without_window_table(node, table)
    calls = [e for e in group_exprs if isinstance(e, ast.Call) and e.name in WINDOWS.keys() | {"SESSION"}]
    if not calls:
        return None, group_exprs, node
    if len(calls) > 1:
        raise StatementError("GROUP BY takes one group window", rule="group-window", pos=calls[1].pos)
    call = calls[0]
    names = [("", f"{call.name.lower()}_{part}") for part in ("start", "end", "rowtime")]
    window = new_window(call.name, call.args[0] if call.args else None, call.args[1:], node, names, call)
    return window, [e for e in group_exprs if e is not call], node


def new_window(kind: str, time: Optional[ast.Expr], sizes, node: PlanNode, names: list, at: ast.Expr) -> GroupWindow:
    """A ``kind`` window (TUMBLE: size; HOP: slide, size) over ``time``, an event-time attribute of ``node``,
    its columns (start, end, time) named ``names``: (qualifier, name) pairs."""
    if kind not in WINDOWS:
        raise StatementError(f"{kind} windows are not supported yet (TUMBLE and HOP are; issue #26)", rule="group-window",
                             pos=at.pos)
    if len(sizes) != WINDOWS[kind] - 1 or not all(isinstance(s, ast.Interval) for s in sizes):
        shape = "TUMBLE(time_attr, INTERVAL size)" if kind == "TUMBLE" else "HOP(time_attr, INTERVAL slide, INTERVAL size)"
        raise StatementError(f"{expr_text(at)}: write it {shape}", rule="group-window", pos=at.pos)
    attributes = time_attributes(node)
    if not isinstance(time, Ref) or time.id not in attributes:
        raise StatementError(
            f"{expr_text(at)}: {expr_text(time) if time is not None else 'its time'} is not an event-time attribute (a "
            "column with WATERMARK FOR, or one an interval or event-time temporal join passed on)", rule="group-window",
            pos=at.pos)
    millis = [s.millis for s in sizes]
    if any(m <= 0 for m in millis):
        raise StatementError(f"{expr_text(at)}: a window's size and slide are positive", rule="group-window", pos=at.pos)
    slide, size = (millis[0], millis[0]) if kind == "TUMBLE" else (millis[0], millis[1])
    columns = [Field(q, name, new_id(f"w_{part}"), "timestamp") for (q, name), part in zip(names, ("start", "end", "rowtime"))]
    return GroupWindow(kind, time, size, slide, attributes[time.id], *columns)


DAY_MS = 24 * 3600 * 1000
WINDOW_BOUNDS = ("WINDOWSTART", "WINDOWEND")
WINDOWS_PER_ROW = 1 << 12  # the most windows a row may fall in (size / advance): the operator orders them by it


def ksql_window(clause: ast.TimeWindow, emit: Optional[str], node: PlanNode) -> GroupWindow:
    """ksqlDB's ``WINDOW TUMBLING (SIZE s)`` / ``HOPPING (SIZE s, ADVANCE BY a)`` / ``SESSION (gap)`` over ``node``'s
    rows, by their own time (a session window's ``size_ms`` is its gap: ``operators.session_aggregate``). A
    window takes rows until stream time passes its end by the grace period: ``GRACE PERIOD g``, else 0 under EMIT
    FINAL and ``max(24 h - size, 0)`` otherwise (ksqlDB's ``StreamAggregateBuilder.defaultGrace`` and
    ``RewrittenAnalysis``). Its columns are ``WINDOWSTART`` and ``WINDOWEND`` (ms)."""
    if node.kind != "STREAM":
        raise StatementError("Windowing not supported for table aggregations.", rule="table-window", pos=clause.pos)
    if clause.kind == "SLIDING":
        raise StatementError("SLIDING windows are not supported yet (TUMBLE, HOP and SESSION are; issue #31)",
                             rule="time-window", pos=clause.pos)
    if clause.kind == "SESSION" and clause.advance_ms is not None:
        raise StatementError("WINDOW SESSION takes a gap, not ADVANCE BY", rule="time-window", pos=clause.pos)
    size, advance = clause.size_ms, clause.advance_ms
    if size is None:
        raise StatementError(f"WINDOW {clause.kind} needs a SIZE", rule="time-window", pos=clause.pos)
    if clause.kind == "TUMBLING" and advance is not None:
        raise StatementError("WINDOW TUMBLING takes no ADVANCE BY (a HOPPING window does)", rule="time-window", pos=clause.pos)
    if clause.kind == "HOPPING" and advance is None:
        raise StatementError("WINDOW HOPPING needs an ADVANCE BY", rule="time-window", pos=clause.pos)
    advance = size if advance is None else advance
    if size <= 0 or advance <= 0 or advance > size:
        raise StatementError(f"WINDOW {clause.kind}: the size must be positive and ADVANCE BY between 0 (excluded) and "
                             "the size", rule="time-window", pos=clause.pos)
    if -(-size // advance) > WINDOWS_PER_ROW:
        raise StatementError(f"WINDOW {clause.kind}: a row would fall in {-(-size // advance)} windows; at most "
                             f"{WINDOWS_PER_ROW} are supported", rule="time-window", pos=clause.pos)
    if clause.grace_ms is not None:
        grace = clause.grace_ms
    else:
        grace = 0 if emit == "FINAL" else max(DAY_MS - size, 0)
    if clause.retention_ms is not None and clause.retention_ms < size + grace:
        raise StatementError(f"WINDOW {clause.kind}: RETENTION must be at least the window size plus its grace period "
                             f"({size + grace} ms)", rule="time-window", pos=clause.pos)
    start, end = (Field("", name, new_id(name.lower()), "bigint", nullable=False) for name in WINDOW_BOUNDS)
    retention = clause.retention_ms if clause.retention_ms is not None else size + grace
    return GroupWindow(clause.kind, None, size, advance, 0, start, end, None, grace_ms=grace, emit=emit or "CHANGES",
                       retention_ms=retention)


LENSES_WINDOWS = {"TUMBLE": "TUMBLING", "HOP": "HOPPING", "SESSION": "SESSION", "SLIDING": "SLIDING"}
LENSES_UNITS = {"MS": 1, "S": 1000, "M": 60_000, "H": 3_600_000, "D": 86_400_000}


def lenses_group_window(group_by: tuple) -> tuple[Optional[ast.TimeWindow], tuple]:
    """Lenses' older window syntax, a window among the GROUP BY expressions — ``tumble(1,m)``, ``HOP(5,m,1,m)``
    (size, then advance), ``SESSION(10,m)``, ``SLIDING(1,m)`` — as the ``WINDOW BY`` clause it stands for, and
    the other expressions. Units: ms, s, m, h, d."""
    calls = [e for e in group_by if isinstance(e, ast.Call) and e.name in LENSES_WINDOWS and _lenses_amounts(e)]
    if not calls:
        return None, group_by
    if len(calls) > 1:
        raise StatementError("GROUP BY takes one window", rule="time-window", pos=calls[1].pos)
    call = calls[0]
    amounts = _lenses_amounts(call)
    kind = LENSES_WINDOWS[call.name]
    if len(amounts) != (2 if kind == "HOPPING" else 1):
        shape = "HOP(size, unit, advance, unit)" if kind == "HOPPING" else f"{call.name}(amount, unit)"
        raise StatementError(f"{call.name} takes {shape}, with a unit among ms, s, m, h, d", rule="time-window",
                             pos=call.pos)
    window = ast.TimeWindow(kind, amounts[0], amounts[1] if kind == "HOPPING" else None, pos=call.pos)
    return window, tuple(e for e in group_by if e is not call)


def _lenses_amounts(call: ast.Call) -> list[int]:
    """``call``'s (amount, unit) argument pairs in ms; empty when its arguments are not such pairs."""
    args = call.args
    if not args or len(args) % 2:
        return []
    amounts = []
    for amount, unit in zip(args[::2], args[1::2]):
        if not (isinstance(amount, ast.Literal) and amount.kind == "integer" and isinstance(unit, ast.Column)
                and unit.qualifier is None and unit.name.text.upper() in LENSES_UNITS):
            return []
        amounts.append(amount.value * LENSES_UNITS[unit.name.text.upper()])
    return amounts


def window_bounds(e: ast.Expr, window: Optional[GroupWindow], clause: str) -> ast.Expr:
    """``e`` with its ``WINDOWSTART`` / ``WINDOWEND`` references bound to ``window``'s columns; ksqlDB allows them
    only in the SELECT list of a windowed aggregation, outside aggregate functions (``clause``: where ``e`` is).
    The first one misplaced, in the order written, is refused."""
    if window is None or not window.ksql:
        return e  # an ordinary column name then (or an unknown one)

    def bound(n: ast.Expr, allowed: bool) -> ast.Expr:
        if isinstance(n, ast.Column) and n.name.text.upper() in WINDOW_BOUNDS:
            if not allowed:
                raise StatementError(f"Window bounds column {n.name.text.upper()} can only be used in the SELECT clause "
                                     "of windowed aggregations", rule="window-bounds", pos=n.pos)
            column = window.start if n.name.text.upper() == WINDOW_BOUNDS[0] else window.end
            return Ref(column.id, column.type, column.name, pos=n.pos)
        inside = allowed and not (isinstance(n, ast.Call) and n.name in ex.AGGREGATES)
        return ex.transform(n, lambda c: None if c is n else bound(c, inside))

    return bound(e, clause == "SELECT")


def _window_table(node: PlanNode) -> Optional[WindowTable]:
    """The windowing table function under ``node`` through filters, if any."""
    while isinstance(node, Filter):
        node = node.input
    return node if isinstance(node, WindowTable) else None


def _without_window_table(node: PlanNode, table: WindowTable) -> PlanNode:
    """``node`` with ``table`` replaced by its input: the filters above it may not read the window's columns."""
    if node is table:
        return table.input
    window_ids = {table.window.start.id, table.window.end.id, table.window.rowtime.id}
    if any(isinstance(n, Ref) and n.id in window_ids for n in ex.walk(node.predicate)):
        raise StatementError("a WHERE on window_start, window_end or window_time of a window aggregate is not "
                             "supported yet (issue #26)", rule="group-window", pos=node.predicate.pos)
    inner = _without_window_table(node.input, table)
    return replace(node, input=inner, fields=inner.fields)


def auxiliary(e: ast.Expr, window: Optional[GroupWindow]) -> Optional[Ref]:
    """The window column an auxiliary call (``TUMBLE_START(t, size)`` ...) stands for; None for other
    expressions. Its arguments must be the GROUP BY window's."""
    if not (isinstance(e, ast.Call) and e.name in AUXILIARY):
        return None
    if window is None or not e.name.startswith(window.kind + "_") or not _same_window(e, window):
        raise StatementError(f"{expr_text(e)} does not name the GROUP BY's group window", rule="group-window", pos=e.pos)
    column = {"START": window.start, "END": window.end, "ROWTIME": window.rowtime}[AUXILIARY[e.name]]
    return Ref(column.id, column.type, column.name)


def _same_window(call: ast.Call, window: GroupWindow) -> bool:
    sizes = [a.millis if isinstance(a, ast.Interval) else None for a in call.args[1:]]
    expected = [window.size_ms] if window.kind == "TUMBLE" else [window.slide_ms, window.size_ms]
    return bool(call.args) and call.args[0] == window.time and sizes == expected


def time_attributes(node: PlanNode) -> dict[str, int]:
    """The fields of ``node`` that are event-time attributes, each with how far the watermark is held back
    behind the source's by the time it reaches ``node`` (module docstring)."""
    if isinstance(node, Scan):
        column = (node.source.watermark_column or "").casefold()
        return {f.id: 0 for f in node.fields if column and f.name.casefold() == column and f.qualifier == node.alias}
    if isinstance(node, (Filter, Lateral, Repartition)):
        return time_attributes(node.input)
    if isinstance(node, WindowTable):  # window_time is one too
        inner = time_attributes(node.input)
        return {**inner, node.window.rowtime.id: inner[node.window.time.id]}
    if isinstance(node, Project):
        inner = time_attributes(node.input)
        return {f.id: inner[e.id] for f, e in node.items if isinstance(e, Ref) and e.id in inner}
    if isinstance(node, Join) and node.shape in TIME_KEEPING:
        return time_attributes(node.left)
    if isinstance(node, Join) and node.shape == "interval":
        bounds = interval_bounds(node)
        held = max(bounds.upper, -bounds.lower, 0)
        both = {**time_attributes(node.left), **time_attributes(node.right)}
        return {id_: delay + held for id_, delay in both.items()}
    return {}


def with_window_columns(fields: tuple, window: Optional[GroupWindow]) -> tuple:
    """An aggregate's fields with its window's columns after the grouping ones (``fields``)."""
    if window is None:
        return fields
    return fields + tuple(replace(f, nullable=False) for f in window.columns)
