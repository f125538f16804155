"""Which operator runs which join.

``plan.joins.classify`` names a join's shape from (left kind, right kind, window form):

| left    | right   | window form                          | shape              | issue |
|---------|---------|--------------------------------------|--------------------|-------|
| STREAM  | STREAM  | WITHIN d / WITHIN (b, a)             | stream-stream      | #3    |
| STREAM  | STREAM  | OVER (RANGE/ROWS ...) on either side | instant-window     | #6    |
| STREAM  | TABLE   | OVER on the stream                   | instant-window (1) | #6    |
| STREAM  | STREAM  | Flink time bounds in ON / WHERE      | interval           | #5    |
| STREAM  | TABLE   | FOR SYSTEM_TIME AS OF rowtime        | temporal           | #5    |
| STREAM  | TABLE   | FOR SYSTEM_TIME AS OF proctime       | temporal-proctime  | #5    |
| STREAM  | LATERAL TABLE (f(t))                   | temporal-function  | #5    |
| Flink inputs, no time bound                    | regular            | #5    |
| STREAM  | TABLE   | none                                 | stream-table       | #4    |
| TABLE   | TABLE   | both primary keys                    | table-table        | #4    |
| TABLE   | TABLE   | a non-key column on one side         | foreign-key        | #4    |

(1) ``instant_window`` hands it to ``framed_table`` when the table side is preserved (RIGHT/FULL with a
tumbling frame), and to ``stream_table`` otherwise (the stream's window does not change a lookup).

Each shape maps to one operator module (``streamjoin.operators.<module>``) exposing ``OPERATOR``, an
object with the ``JoinOperator`` protocol. A shape whose module is not written yet is refused at
planning time with the issue that builds it.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Optional

from ..errors import NotYetSupported
from ..operators.base import JoinOperator
from ..plan.nodes import Join


@dataclass(frozen=True)
class OperatorEntry:
    module: str
    issue: int
    title: str


OPERATORS: dict[str, OperatorEntry] = {
    "stream-stream": OperatorEntry("stream_stream", 3, "a windowed stream-stream join (WITHIN)"),
    "instant-window": OperatorEntry("instant_window", 6, "a SQLstream OVER-window join"),
    "interval": OperatorEntry("interval", 5, "a Flink interval join"),
    "temporal": OperatorEntry("temporal", 5, "a Flink event-time temporal join"),
    "temporal-proctime": OperatorEntry("temporal", 5, "a Flink processing-time temporal join"),
    "temporal-function": OperatorEntry("temporal", 5, "a temporal table function join"),
    "regular": OperatorEntry("regular", 5, "a Flink regular join"),
    "stream-table": OperatorEntry("stream_table", 4, "a stream-table join"),
    "table-table": OperatorEntry("table_table", 4, "a table-table join"),
    "foreign-key": OperatorEntry("foreign_key", 4, "a foreign-key table-table join"),
}


def operator_for(join: Join) -> JoinOperator:
    entry: Optional[OperatorEntry] = OPERATORS.get(join.shape)
    if entry is None:
        raise NotYetSupported(f"a join of shape {join.shape!r}", issue=2, pos=join.pos)
    try:
        module = importlib.import_module(f"streamjoin.operators.{entry.module}")
    except ModuleNotFoundError:
        raise NotYetSupported(entry.title, issue=entry.issue, pos=join.pos) from None
    return module.OPERATOR


def check_supported(join: Join) -> None:
    """Refuse, before anything starts, a join whose operator is not built yet."""
    operator_for(join)
