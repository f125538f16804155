"""GROUP BY over a TABLE (a changelog, e.g. a table-table join result): ksqlDB's table aggregation.

Semantics: every row of the input table counts once, in the group its current values put it in. A change
of a row takes its previous values out of their group and adds its new values to their group; a tombstone
only takes them out. After each input change every group it touched emits its new aggregate values — one
update when the row stayed in its group. A group left with no rows stays, with the aggregates of no rows (COUNT
0), as Kafka Streams' table aggregation keeps it (ksqlDB, Lenses: its count.json "count table" writes 0; users
write HAVING COUNT(*) > 0 to drop it); Flink's emits a tombstone (a group without rows does not exist).
Aggregates must be undoable: COUNT, COUNT(DISTINCT), SUM, AVG, MIN and MAX (the last three keep a multiset of
values per group).

Algorithm: two keyed stages, each over state buckets (``operators.state.run_segmented``):
1. by the input's key — every change of a row becomes a *retract* event carrying the row's previous group
   and arguments (the previous change of its key in the batch, else the stored row) and, unless it is a
   tombstone, an *add* event carrying its new ones, both with the change's ingestion order; computed for
   the whole batch at once;
2. by group — fold the events in ingestion order (retract before add) into the groups' accumulators and
   emit, per input change, each touched group's values after it. As in ksqlDB, a row whose group is null
   counts in no group (dropped and counted; Flink keeps a NULL group).

State (per bucket, segmented, as a table log: ``state.log_changes``): stage 1 the group and arguments of
every live input row, removed by its tombstone; stage 2 the accumulators of every group that has had a row,
removed when its last row leaves (Flink) or never (Kafka Streams). A batch reads and writes the rows and groups
it touches.
"""
from __future__ import annotations

import copy
from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StructField, StructType

from ..errors import NotYetSupported
from ..lower.expressions import compile_expr
from ..plan.nodes import ROWTIME, SEQ, SUB, TOMBSTONE, Aggregate, naming_style
from .aggregate import GLOBAL, AggSpec, _first_rows, _scalar, aggregate_specs, result_type
from .base import DeclaredState, LoweringContext
from .keyed_inputs import BUCKET, bucketed, count_dropped, integral_columns, key_index, restore_integers, take
from .state import GONE, apply_changes, new_table_log, read_table, run_segmented

UNDOABLE = {"COUNT", "SUM", "AVG", "MIN", "MAX"}
SIGN = "__sign"
RETRACT, ADD = 0, 1
ACCUMULATORS = "__accs"  # stage 2's state column: a group's row count and accumulators


STATE = DeclaredState(
    "table_aggregate", 1,
    keeps="the group and arguments of every live input row (stage 1); the accumulators of every group with "
          "a row (stage 2)",
    segments="chunks of each stage's change log",
    purged="an input row at its tombstone; a group when its last row leaves")
KAFKA_STREAMS_STATE = replace(
    STATE, keeps="the group and arguments of every live input row (stage 1); the accumulators of every group that "
                 "has had a row (stage 2)",
    purged="an input row at its tombstone; a group never (it stays at COUNT 0, as in ksqlDB)")


def _keeps_empty_groups(node: Aggregate) -> bool:
    """Kafka Streams' table aggregation (ksqlDB, Lenses) keeps a group its last row left; Flink's deletes it."""
    return naming_style(node) != "flink"


class TableAggregate:
    def state(self, node: Aggregate) -> DeclaredState:
        return KAFKA_STREAMS_STATE if _keeps_empty_groups(node) else STATE

    def lower(self, node: Aggregate, df: DataFrame, ctx: LoweringContext) -> DataFrame:
        for f, call in node.aggregates:
            if call.name not in UNDOABLE:
                raise NotYetSupported(f"{call.name} in a GROUP BY over a table (only {', '.join(sorted(UNDOABLE))} can be undone)",
                                      issue=4, pos=call.pos)
        groups = [f.id for f, _ in node.groups]
        arg_cols, specs = aggregate_specs(node)
        row_key = [f"__rk{i}" for i in range(len(node.input.key))]
        tombstone = F.coalesce(F.col(TOMBSTONE), F.lit(False)) if TOMBSTONE in df.columns else F.lit(False)
        prepared = df.select(*[F.col(k).alias(rk) for k, rk in zip(node.input.key, row_key)],
                             *[compile_expr(e).alias(g) for g, (_, e) in zip(groups, node.groups)], *arg_cols,
                             tombstone.alias(TOMBSTONE), ROWTIME, SEQ, SUB)
        types = {f.name: f.dataType for f in prepared.schema.fields}
        args = [s.arg for s in specs if s.arg]
        event_schema = StructType([StructField(c, types[c]) for c in groups + args]
                                  + [StructField(SIGN, IntegerType())] + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB)])
        rows = bucketed(prepared, row_key, ctx.time_buckets)
        events = run_segmented(rows, BUCKET, row_step(row_key, groups + args, integral_columns(rows, row_key)), event_schema)

        out_schema = StructType([StructField(g, types[g]) for g in groups]
                                + [StructField(s.out, result_type(s.fn, types.get(s.arg))) for s in specs]
                                + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB)] + [StructField(TOMBSTONE, BooleanType())])
        if not groups:
            events = events.withColumn(GLOBAL, F.lit(0))
        keys = groups or [GLOBAL]
        events = bucketed(events, keys, ctx.time_buckets)
        step = group_step(keys, groups, specs, integral_columns(events, keys), out_schema.fieldNames(),
                          drop_null_groups=naming_style(node) != "flink", keep_empty=_keeps_empty_groups(node))
        return run_segmented(events, BUCKET, step, out_schema)


def row_step(row_key: list[str], carried: list[str], integral: list[str]):
    """Stage 1, per bucket of input keys: every change → retract(previous values) and add(new values)."""
    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"dropped": {}, "rows": 0, "table": new_table_log()}
        rows = restore_integers(rows, integral).sort_values([SEQ, SUB], kind="stable").reset_index(drop=True)
        store = read_table(meta["table"], segments, row_key, carried)
        deleted = rows[TOMBSTONE].to_numpy(dtype=bool)
        codes = rows.groupby(row_key, sort=False, dropna=False).ngroup()
        before = pd.Series(np.arange(len(rows))).groupby(codes.to_numpy()).shift(1).to_numpy()
        in_batch = ~np.isnan(before)
        before = np.where(in_batch, before, 0).astype(np.int64)
        stored = key_index(store, row_key).get_indexer(key_index(rows, row_key)) if len(store) else np.full(len(rows), -1)
        from_store = ~in_batch & (stored >= 0)
        retracted, added = np.flatnonzero((in_batch & ~deleted[before]) | from_store), np.flatnonzero(~deleted)
        events = {c: np.concatenate([np.where(in_batch, take(rows[c].to_numpy(), before, in_batch),
                                              take(store[c].to_numpy(), stored, from_store))[retracted],
                                     rows[c].to_numpy(dtype=object)[added]]) for c in carried}
        events[SIGN] = np.repeat([RETRACT, ADD], [len(retracted), len(added)])
        for c in (ROWTIME, SEQ, SUB):
            events[c] = np.concatenate([rows[c].to_numpy()[retracted], rows[c].to_numpy()[added]])
        changes = rows.drop_duplicates(row_key, keep="last")
        changes = changes[row_key + carried].assign(**{GONE: changes[TOMBSTONE].to_numpy(dtype=bool)})
        table = apply_changes(meta["table"], segments, store, changes.reset_index(drop=True), row_key)
        meta["rows"] = len(table)
        return pd.DataFrame(events), meta

    return step


def group_step(keys: list[str], groups: list[str], specs: list[AggSpec], integral: list[str], out_names: list[str],
               drop_null_groups: bool = False, keep_empty: bool = False):
    """Stage 2, per bucket of groups: undoable accumulators; one output per input change and group.
    ``drop_null_groups``: an event for a null group is dropped and counted (``null_key``), as ksqlDB does;
    ``keep_empty``: a group its last row left emits the aggregates of no rows and stays (Kafka Streams), rather
    than a tombstone."""
    def step(meta, events: pd.DataFrame, segments):
        meta = meta or {"dropped": {}, "rows": 0, "table": new_table_log()}
        if drop_null_groups and groups:
            null_group = events[groups].isna().any(axis=1).to_numpy()
            count_dropped(meta, "null_key", (null_group & (events[SIGN].to_numpy() == ADD)).sum())
            events = events[~null_group]
        events = restore_integers(events, integral).sort_values([SEQ, SUB, SIGN], kind="stable").reset_index(drop=True)
        store = read_table(meta["table"], segments, keys, [ACCUMULATORS])
        codes = events.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
        heads = events.iloc[_first_rows(codes)].reset_index(drop=True)  # one row per group, in the order of ``codes``
        found = key_index(store, keys).get_indexer(key_index(heads, keys)) if len(store) else np.full(len(heads), -1)
        saved = [copy.deepcopy(store[ACCUMULATORS].iat[i]) if i >= 0 else _new(specs) for i in found]
        signs = np.where(events[SIGN].to_numpy() == ADD, 1, -1).tolist()
        order = list(zip(events[SEQ].tolist(), events[SUB].tolist()))
        args = [events[s.arg].tolist() if s.arg else None for s in specs]
        out_rows, results = [], []
        for j, g in enumerate(codes):
            state = saved[g]
            state["rows"] += signs[j]
            for s, acc, values in zip(specs, state["accs"], args):
                _apply(s, acc, _scalar(values[j]) if values is not None else 1, signs[j])
            if j + 1 < len(codes) and codes[j + 1] == g and order[j + 1] == order[j]:
                continue  # the same change also adds to this group: one update after both
            alive = state["rows"] > 0 or keep_empty
            out_rows.append(j)
            results.append([_result(s, acc) if alive else None for s, acc in zip(specs, state["accs"])] + [not alive])
            if not alive:
                saved[g] = _new(specs)
        picked = events.iloc[out_rows].reset_index(drop=True)
        out = pd.DataFrame(results, columns=[s.out for s in specs] + [TOMBSTONE])
        for c in groups + [ROWTIME, SEQ, SUB]:
            out[c] = picked[c].to_numpy()
        changes = heads[keys].assign(**{ACCUMULATORS: saved, GONE: [state["rows"] <= 0 and not keep_empty for state in saved]})
        table = apply_changes(meta["table"], segments, store, changes, keys)
        meta["rows"] = len(table)
        return out[out_names], meta

    return step


def _new(specs: list[AggSpec]) -> dict:
    return {"rows": 0, "accs": [{"n": 0, "total": 0, "values": Counter()} for _ in specs]}


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
