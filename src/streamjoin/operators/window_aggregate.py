"""Flink group window aggregate: ``GROUP BY TUMBLE(t, size)`` / ``HOP(t, slide, size)`` and the grouping columns.

Semantics (Flink's event-time group windows, under DIALECT §2's watermark). A row of time ``t`` belongs to the
tumbling window ``[t - t mod size, + size)``, or to every hopping window ``[s, s + size)`` with ``s`` a
multiple of the slide and ``t - size < s <= t``. The query's clock is the watermark, held back by the interval
joins the rows passed through (``plan.group_windows``): ``clock = watermark - delay``. A window leaves once the
clock reaches its end, as one row per group — its grouping values, ``window_start``, ``window_end``,
``window_rowtime`` (end - 1 ms, the row's time) and its aggregates — and is never updated: the result is
append-only. A row whose window the clock at that row (``_stream_time - delay``; the watermark including its
own record) already reached is late: it is dropped from that window and counted (``late``). Flink fires a
window when the watermark reaches ``end - 1`` and drops a row whose window's ``end - 1`` the watermark before
it reached: the same rows, except one read while the watermark stood exactly at ``end - 1``, which Flink
(emitting a watermark after every record) drops and streamjoin keeps, as Flink does with its periodic
watermarks. A row without a time is dropped and counted (``no_time``). As in Flink's GROUP BY, a NULL
grouping value is a group of its own.

Algorithm: rows are assigned their window starts in Spark (one row per window for HOP), bucketed by a hash of
the grouping values and the start, and every bucket gets the batch's tick row (the batch-end clock). Per
bucket the batch's on-time rows are folded into each (group, window)'s accumulators with the GROUP BY
aggregate's accumulators (``aggregate.accumulate``); the windows the batch-end clock reached leave, ordered by
end and then by the ingestion order of their first row, and are removed from state.

State (per bucket, segmented: ``operators.state``): one row per open (group, window) — the grouping values,
the window start, the ingestion position of its first row and one accumulator per aggregate — as a table log;
the meta value keeps the earliest open window end, so a batch that brings a bucket only a clock short of it
does no work. A window's row is purged when it leaves; a bucket holds only windows the clock has not reached.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType, TimestampType

from ..lower.expressions import compile_expr
from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, Aggregate, GroupWindow
from .aggregate import _result, accumulate, aggregate_specs, result_type
from .base import DeclaredState, LoweringContext
from .keyed_inputs import (
    BUCKET, NO_TIME, SIDE, TICK, bucketed, clock_values, count_dropped, integral_columns, key_index, restore_integers,
    tick_only_clock, tick_rows,
)
from .state import GONE, apply_changes, merge_changes, new_table_log, read_table, run_segmented

START, FIRST = "__wstart", "__first"  # a row's window start (ms); in state: the window's first row's position
ROW = 0  # the side tag of input rows (tick rows have keyed_inputs.TICK)
ORDER_SCALE = 1 << 20  # a leaving window's _sub: its end, then its first row's ingestion position

STATE = DeclaredState(
    "window-aggregate", 1,
    keeps="per group and open window: the grouping values, the window start, its first row's ingestion position "
          "and one accumulator per aggregate",
    segments="chunks of the open windows' change log",
    purged="a window when the watermark reaches its end (it leaves then)")


class WindowAggregate:
    def state(self, node: Aggregate) -> DeclaredState:
        return STATE

    def lower(self, node: Aggregate, df: DataFrame, ctx: LoweringContext) -> DataFrame:
        window = node.window
        group_ids = [f.id for f, _ in node.groups]
        arg_cols, specs = aggregate_specs(node)
        time = compile_expr(window.time)
        millis = F.unix_millis(time) if window.time.type.startswith("timestamp") else time.cast("bigint")
        prepared = df.select(*[compile_expr(e).alias(g) for g, (_, e) in zip(group_ids, node.groups)], *arg_cols,
                             millis.alias("__t"), SEQ, SUB, STREAM_TIME, F.lit(ROW).alias(SIDE))
        prepared = prepared.withColumn(START, F.explode_outer(_starts(F.col("__t"), window.size_ms, window.slide_ms)))
        keys = group_ids + [START]
        data = bucketed(prepared, keys, ctx.time_buckets).unionByName(tick_rows(ctx), allowMissingColumns=True)
        types = {f.name: f.dataType for f in data.schema.fields}
        schema = StructType(
            [StructField(g, types[g]) for g in group_ids]
            + [StructField(c.id, TimestampType()) for c in (window.start, window.end, window.rowtime)]
            + [StructField(s.out, result_type(s.fn, types.get(s.arg))) for s in specs]
            + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB, STREAM_TIME)])
        integral = integral_columns(data, keys + [s.arg for s in specs if s.arg])
        step = window_step(group_ids, specs, integral, window.size_ms, window.delay_ms,
                           [window.start.id, window.end.id, window.rowtime.id], schema.fieldNames())
        return run_segmented(data, BUCKET, step, schema, idle=_idle(window.delay_ms))


def with_windows(df: DataFrame, window: GroupWindow, fanout: int) -> DataFrame:
    """A windowing table function's rows (``plan.nodes.WindowTable``): each row of ``df`` once per window holding
    its time (none without a time), with the window's start, end and time (end - 1 ms); ``_sub`` numbers the
    copies of a row (``fanout`` apart)."""
    time = compile_expr(window.time)
    millis = F.unix_millis(time) if window.time.type.startswith("timestamp") else time.cast("bigint")
    copies = df.select("*", F.posexplode(_starts(millis, window.size_ms, window.slide_ms)).alias("__pos", START))
    start = F.col(START)
    return copies.select(
        *[c for c in df.columns if c != SUB], (F.col(SUB) * fanout + F.col("__pos")).alias(SUB),
        F.timestamp_millis(start).alias(window.start.id),
        F.timestamp_millis(start + F.lit(window.size_ms)).alias(window.end.id),
        F.timestamp_millis(start + F.lit(window.size_ms - 1)).alias(window.rowtime.id))


def _starts(t, size: int, slide: int):
    """The starts of the windows holding time ``t`` (ms): ``[s, s + size)`` with ``s`` a multiple of ``slide``
    and ``t - size < s <= t`` (one for a tumbling window, where ``slide == size``)."""
    last = t - F.pmod(t, F.lit(slide))
    count = -(-size // slide)
    candidates = F.sequence(last - F.lit((count - 1) * slide), last, F.lit(slide))
    return F.filter(candidates, lambda s: s > t - F.lit(size))


def window_step(group_ids, specs, integral, size: int, delay: int, window_cols, out_names):
    keys = group_ids + [START]
    accs = [f"__acc{i}" for i in range(len(specs))]

    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"table": new_table_log(), "dropped": {}, "rows": 0, "earliest_end": None}
        rows = rows.sort_values([SEQ, SUB, SIDE], kind="stable").reset_index(drop=True)
        clock = int(clock_values(rows[STREAM_TIME]).max()) if len(rows) else NO_TIME
        data = rows[rows[SIDE].to_numpy() != TICK]
        no_time = data[START].isna().to_numpy()
        count_dropped(meta, "no_time", no_time.sum())
        data = data[~no_time]
        starts = data[START].to_numpy(dtype=np.int64)
        row_clocks = clock_values(data[STREAM_TIME])
        late = (row_clocks != NO_TIME) & (starts + size <= row_clocks - delay)
        count_dropped(meta, "late", late.sum())
        data = restore_integers(data[~late].reset_index(drop=True), integral)
        due = meta["earliest_end"] is not None and clock != NO_TIME and meta["earliest_end"] <= clock - delay
        if not len(data) and not due:
            return pd.DataFrame(columns=out_names), meta
        store = read_table(meta["table"], segments, keys, [FIRST] + accs)
        changes = _folded(data, store, keys, specs, accs, integral)
        table = merge_changes(store, changes.assign(**{GONE: False}), keys)
        ends = table[START].to_numpy(dtype=np.int64) + size if len(table) else np.zeros(0, dtype=np.int64)
        leaving = (ends <= clock - delay) if clock != NO_TIME else np.zeros(len(table), dtype=bool)
        out = _rows(table[leaving], group_ids, specs, accs, size, window_cols, out_names,
                    int(rows[SEQ].max()))
        gone = table[leaving][keys].assign(**{GONE: True})
        kept = changes[~key_index(changes, keys).isin(key_index(gone, keys))] if len(gone) else changes
        logged = pd.concat([kept.assign(**{GONE: False}), gone], ignore_index=True)
        remaining = apply_changes(meta["table"], segments, store, logged.reindex(columns=keys + [FIRST] + accs + [GONE]), keys)
        meta["rows"] = len(remaining)
        meta["earliest_end"] = int(remaining[START].min()) + size if len(remaining) else None
        return out, meta

    return step


def _folded(data: pd.DataFrame, store: pd.DataFrame, keys, specs, accs, integral) -> pd.DataFrame:
    """Every (group, window) the batch's rows touch, with its accumulators after them."""
    if not len(data):
        return pd.DataFrame(columns=keys + [FIRST] + accs)
    codes = data.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    first = np.full(codes.max() + 1, len(codes), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(codes)))
    heads = data.iloc[first].reset_index(drop=True)
    found = key_index(store, keys).get_indexer(key_index(heads, keys)) if len(store) else np.full(len(heads), -1)
    changes = heads[keys].copy()
    position = heads[SEQ].to_numpy(dtype=np.int64)
    if len(store):
        stored_first = store[FIRST].to_numpy()
        position = np.where(found >= 0, stored_first[np.maximum(found, 0)], position)
    changes[FIRST] = position
    for spec, acc in zip(specs, accs):
        prior = np.full(len(heads), None, dtype=object)
        if len(store):
            prior[found >= 0] = store[acc].to_numpy()[found[found >= 0]]
        values = data[spec.arg].reset_index(drop=True) if spec.arg else None
        _, changes[acc] = accumulate(spec, values, codes, prior, spec.arg in integral)
    return changes


def _rows(leaving: pd.DataFrame, group_ids, specs, accs, size: int, window_cols, out_names, seq: int) -> pd.DataFrame:
    """One row per leaving window, ordered by end, then by its first row's ingestion position."""
    if not len(leaving):
        return pd.DataFrame(columns=out_names)
    leaving = leaving.assign(__end=leaving[START].to_numpy(dtype=np.int64) + size)
    leaving = leaving.sort_values(["__end", FIRST], kind="stable").reset_index(drop=True)
    starts, ends = leaving[START].to_numpy(dtype=np.int64), leaving["__end"].to_numpy(dtype=np.int64)
    out = pd.DataFrame({g: leaving[g].to_numpy() for g in group_ids})
    for column, millis in zip(window_cols, (starts, ends, ends - 1)):
        out[column] = pd.to_datetime(millis, unit="ms")
    for spec, acc in zip(specs, accs):
        out[spec.out] = [_result(spec.fn, a, spec.distinct) for a in leaving[acc].to_numpy()]
    out[ROWTIME] = ends - 1
    out[SEQ] = seq
    out[SUB] = ends * ORDER_SCALE + leaving[FIRST].to_numpy(dtype=np.int64) % ORDER_SCALE
    out[STREAM_TIME] = ends - 1  # a window's row leaves before the watermark that closed it moves on
    return out[out_names]


def _idle(delay: int):
    def idle(meta: dict, rows) -> bool:
        """A batch that brings the bucket only a clock short of its earliest open window's end."""
        clock = tick_only_clock(rows)
        if clock is None:
            return False
        return meta is None or meta["earliest_end"] is None or clock == NO_TIME or meta["earliest_end"] > clock - delay

    return idle


OPERATOR = WindowAggregate()
