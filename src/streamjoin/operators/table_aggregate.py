"""GROUP BY over a TABLE (a changelog, e.g. a table-table join result): ksqlDB's table aggregation.

Semantics: every row of the input table counts once, in the group its current values put it in. A change
of a row takes its previous values out of their group and adds its new values to their group; a tombstone
only takes them out. After each input change every group it touched emits its new aggregate values — one
update when the row stayed in its group — and a group left with no rows emits a tombstone (the result is a
table: a group without rows does not exist). Aggregates must be undoable: COUNT, COUNT(DISTINCT), SUM,
AVG, MIN and MAX (the last three keep a multiset of values per group).

Algorithm: two keyed stages on ``operators.state``:
1. by the input's key — remember each row's group and aggregate arguments; a change becomes a *retract*
   event for the old group and an *add* event for the new one, both with the change's ingestion order;
2. by group — fold the events in ingestion order (retract before add) and emit, per input change, the
   group's values after it.

State: stage 1 the group and arguments of every live input row (removed by its tombstone); stage 2 the
accumulators of every group with at least one row (a group's state is emptied when its last row leaves).
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StructField, StructType

from ..errors import NotYetSupported
from ..lower.expressions import compile_expr
from ..plan.nodes import ROWTIME, SEQ, SUB, TOMBSTONE, Aggregate
from .aggregate import AggSpec, _scalar, result_type
from .state import run_keyed

UNDOABLE = {"COUNT", "SUM", "AVG", "MIN", "MAX"}
SIGN, ORDER = "__sign", "__order"
RETRACT, ADD = 0, 1


class TableAggregate:
    def lower(self, node: Aggregate, df: DataFrame) -> DataFrame:
        for f, call in node.aggregates:
            if call.name not in UNDOABLE:
                raise NotYetSupported(f"{call.name} in a GROUP BY over a table (only {', '.join(sorted(UNDOABLE))} can be undone)",
                                      issue=4, pos=call.pos)
        groups = [f.id for f, _ in node.groups]
        specs, arg_cols = [], []
        for i, (f, call) in enumerate(node.aggregates):
            arg = f"__arg{i}" if call.args and not call.star else None
            if arg:
                arg_cols.append(compile_expr(call.args[0]).alias(arg))
            specs.append(AggSpec(call.name, arg, f.id, call.distinct))
        row_key = [f"__rk{i}" for i in range(len(node.input.key))]
        tombstone = F.coalesce(F.col(TOMBSTONE), F.lit(False)) if TOMBSTONE in df.columns else F.lit(False)
        prepared = df.select(*[F.col(k).alias(rk) for k, rk in zip(node.input.key, row_key)],
                             *[compile_expr(e).alias(g) for g, (_, e) in zip(groups, node.groups)], *arg_cols,
                             tombstone.alias(TOMBSTONE), ROWTIME, SEQ, SUB)
        types = {f.name: f.dataType for f in prepared.schema.fields}
        args = [s.arg for s in specs if s.arg]
        event_schema = StructType([StructField(c, types[c]) for c in groups + args]
                                  + [StructField(SIGN, IntegerType())] + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB)])
        events = run_keyed(prepared, row_key, _row_step(row_key, groups, args), event_schema)

        out_schema = StructType([StructField(g, types[g]) for g in groups]
                                + [StructField(s.out, result_type(s.fn, types.get(s.arg))) for s in specs]
                                + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB)] + [StructField(TOMBSTONE, BooleanType())])
        if not groups:
            events = events.withColumn("__all", F.lit(0))
        return run_keyed(events, groups or ["__all"], _group_step(groups, specs, out_schema.fieldNames()), out_schema)


def _row_step(row_key, groups, args):
    """Stage 1, per input key: a change → retract(old group, old arguments) and add(new ones)."""
    def step(previous, rows: pd.DataFrame):
        rows = rows.sort_values([SEQ, SUB], kind="stable")
        out = []
        for rec in rows.to_dict("records"):
            meta = (rec[ROWTIME], rec[SEQ], rec[SUB])
            if previous is not None:
                out.append(previous + (RETRACT, *meta))
            previous = None if rec[TOMBSTONE] else tuple(_scalar(rec[c]) for c in groups + args)
            if previous is not None:
                out.append(previous + (ADD, *meta))
        return pd.DataFrame(out, columns=groups + args + [SIGN, ROWTIME, SEQ, SUB]), previous

    return step


def _group_step(groups, specs: list[AggSpec], out_names):
    """Stage 2, per group: undoable accumulators; one output per input change."""
    def step(saved, rows: pd.DataFrame):
        saved = saved or {"rows": 0, "accs": [_empty(s) for s in specs]}
        rows = rows.sort_values([SEQ, SUB, SIGN], kind="stable")
        out = []
        records = rows.to_dict("records")
        for i, rec in enumerate(records):
            sign = 1 if rec[SIGN] == ADD else -1
            saved["rows"] += sign
            for s, acc in zip(specs, saved["accs"]):
                _apply(s, acc, _scalar(rec[s.arg]) if s.arg else 1, sign)
            nxt = records[i + 1] if i + 1 < len(records) else None
            if nxt is not None and (nxt[SEQ], nxt[SUB]) == (rec[SEQ], rec[SUB]):
                continue  # the same change also adds to this group: one update after both
            values = {g: _scalar(rec[g]) for g in groups}
            alive = saved["rows"] > 0
            values.update({s.out: _result(s, acc) if alive else None for s, acc in zip(specs, saved["accs"])})
            values.update({ROWTIME: rec[ROWTIME], SEQ: rec[SEQ], SUB: rec[SUB], TOMBSTONE: not alive})
            out.append(values)
            if not alive:
                saved["accs"] = [_empty(s) for s in specs]
        return pd.DataFrame(out, columns=out_names), saved

    return step


def _empty(s: AggSpec) -> dict:
    return {"n": 0, "total": 0, "values": Counter()}


def _apply(s: AggSpec, acc: dict, value: Any, sign: int) -> None:
    if value is None:
        return
    acc["n"] += sign
    if s.fn in ("SUM", "AVG"):
        acc["total"] += sign * value
    if s.distinct or s.fn in ("MIN", "MAX"):
        acc["values"][value] += sign
        if acc["values"][value] <= 0:
            del acc["values"][value]


def _result(s: AggSpec, acc: dict) -> Any:
    if s.fn == "COUNT":
        return len(acc["values"]) if s.distinct else acc["n"]
    if acc["n"] == 0:
        return None
    if s.fn == "SUM":
        return acc["total"]
    if s.fn == "AVG":
        return float(acc["total"]) / acc["n"]
    return min(acc["values"]) if s.fn == "MIN" else max(acc["values"])


OPERATOR = TableAggregate()
