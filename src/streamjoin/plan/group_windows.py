"""Flink's group windows: ``GROUP BY TUMBLE(t, size)`` and ``GROUP BY HOP(t, slide, size)``, with the window's
auxiliary functions (``TUMBLE_START``, ``TUMBLE_END``, ``TUMBLE_ROWTIME``, and the ``HOP_`` ones) in SELECT and
HAVING.

``t`` must be an event-time attribute of the aggregate's input: a column an input declares ``WATERMARK FOR``,
passed on unchanged through filters and projections, through an event-time temporal join (its left input's)
and through an interval join (both inputs'). An interval join holds the watermark back: a pair may carry a
time up to the join's larger bound behind the watermark, so Flink delays the join's output watermark by
``max(upper, -lower)`` of its bounds ``lower <= r.t - l.t <= upper`` (``RowTimeIntervalJoin``'s
``getMaxOutputDelay``); the window aggregate after it reads the watermark minus that (``GroupWindow.delay_ms``).
``SESSION`` windows are not built yet (refused).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..errors import StatementError
from ..sql import ast
from .intervals import TIME_KEEPING, interval_bounds
from .nodes import Field, Filter, GroupWindow, Join, Lateral, PlanNode, Project, Ref, Repartition, Scan, expr_text
from .scope import new_id

WINDOWS = {"TUMBLE": 2, "HOP": 3}  # the group window functions and their argument counts
AUXILIARY = {f"{kind}_{part}": part for kind in WINDOWS for part in ("START", "END", "ROWTIME")}


def group_window(group_exprs: list, node: PlanNode) -> tuple[Optional[GroupWindow], list]:
    """The group window among a GROUP BY's (bound) expressions, if any, and the other expressions."""
    calls = [e for e in group_exprs if isinstance(e, ast.Call) and e.name in WINDOWS | {"SESSION": 2}]
    if not calls:
        return None, group_exprs
    call = calls[0]
    if len(calls) > 1:
        raise StatementError("GROUP BY takes one group window", rule="group-window", pos=calls[1].pos)
    if call.name == "SESSION":
        raise StatementError("SESSION group windows are not supported yet (TUMBLE and HOP are; issue #26)",
                             rule="group-window", pos=call.pos)
    if len(call.args) != WINDOWS[call.name] or not all(isinstance(a, ast.Interval) for a in call.args[1:]):
        shape = "TUMBLE(time_attr, INTERVAL size)" if call.name == "TUMBLE" else "HOP(time_attr, INTERVAL slide, INTERVAL size)"
        raise StatementError(f"{expr_text(call)}: write it {shape}", rule="group-window", pos=call.pos)
    time, sizes = call.args[0], [a.millis for a in call.args[1:]]
    attributes = time_attributes(node)
    if not isinstance(time, Ref) or time.id not in attributes:
        raise StatementError(
            f"{expr_text(call)}: {expr_text(time)} is not an event-time attribute (a column with WATERMARK FOR, or one "
            "an interval or event-time temporal join passed on)", rule="group-window", pos=call.pos)
    if any(size <= 0 for size in sizes):
        raise StatementError(f"{expr_text(call)}: a window's size and slide are positive", rule="group-window", pos=call.pos)
    slide, size = (sizes[0], sizes[0]) if call.name == "TUMBLE" else (sizes[0], sizes[1])
    columns = [Field("", f"{call.name.lower()}_{part.lower()}", new_id(f"w_{part.lower()}"), "timestamp")
               for part in ("START", "END", "ROWTIME")]
    window = GroupWindow(call.name, time, size, slide, attributes[time.id], *columns)
    return window, [e for e in group_exprs if e is not call]


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
    return fields + tuple(replace(f, nullable=False) for f in (window.start, window.end, window.rowtime))
