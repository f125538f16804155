"""Group windows: Flink's ``GROUP BY TUMBLE(t, size)`` / ``HOP(t, slide, size)`` and ksqlDB's ``WINDOW TUMBLING (SIZE
size)`` / ``HOPPING (SIZE size, ADVANCE BY slide)``, with the grouping columns.

Windows. A row of time ``t`` belongs to the tumbling window ``[t - t mod size, + size)``, or to every hopping
window ``[s, s + size)`` with ``s`` a multiple of the slide and ``t - size < s <= t``. A window *closes* once the
clock passes its end by ``lag``: a row whose window is closed at that row (the clock including its own record)
is late, dropped from that window and counted (``late``); a row without a time is dropped and counted
(``no_time``).

Flink (DIALECT §2's watermark). The clock is the watermark, held back by the interval joins the rows passed
through (``plan.group_windows``): ``lag`` is that hold-back, and a window closes when the clock reaches its end.
It leaves then, as one row per group — its grouping values, ``window_start``, ``window_end``, ``window_rowtime``
(end - 1 ms, the row's time) and its aggregates — and is never updated: the result is append-only. Flink fires
a window when the watermark reaches ``end - 1`` and drops a row whose window's ``end - 1`` the watermark before
it reached: the same rows, except one read while the watermark stood exactly at ``end - 1``, which Flink
(emitting a watermark after every record) drops and streamjoin keeps, as Flink does with its periodic
watermarks. As in Flink's GROUP BY, a NULL grouping value is a group of its own.

ksqlDB (Kafka Streams' ``KStreamWindowAggregate``). The clock is stream time (DIALECT §2) and ``lag`` the grace
period: a window takes rows while ``end > stream time - grace``. EMIT CHANGES writes the window's new values
after every row, keyed by the groups and the window; EMIT FINAL writes each window once, when it closes
(``EmitStrategy.onWindowClose``) — unless Kafka Streams' window store dropped it first: the store keeps a
window while its start is at least its latest window start minus the retention (``RETENTION``, else size +
grace), so when stream time jumps, in one record, from before a window's close to past its start + retention
+ the advance, the window is gone when its close is seen and is never written (counted: ``expired``; the
``suppress`` cases of ksqlDB's tests show it). That moment is the first clock value at or past the close,
which the batch's tick rows carry (``CLOCK_STEPS``: the largest clock value in each span of the advance is all
it takes, as only the latest window start at that moment counts). A row's time is its time; the result's time is the latest
time of the window's rows so far. The window goes with the result's key (``WINDOW_START``); ``WINDOWSTART``
and ``WINDOWEND`` are columns. A NULL grouping value drops the row (counted: ``null_key``).

Algorithm: rows are assigned their window starts in Spark (one row per window for a hopping window), bucketed
by a hash of the grouping values and the start, and every bucket gets the batch's tick row (the batch-end
clock). Per bucket the batch's on-time rows are folded, in ingestion order, into each (group, window)'s
accumulators with the GROUP BY aggregate's accumulators (``aggregate.accumulate``: the values after each row
too, for EMIT CHANGES); the windows the batch-end clock closed are removed from state and, unless the result is
EMIT CHANGES, leave as rows, ordered by end and then by the ingestion order of their first row.

State (per bucket, segmented: ``operators.state``): one row per open (group, window) — the grouping values,
the window start, the ingestion position of its first row, the latest time of its rows and one accumulator
per aggregate — as a table log, which the worker keeps as a ``LiveTable``: a batch finds its rows' windows by key
and changes them in place. The meta value keeps the earliest open window end, so a batch that brings a bucket
only a clock short of closing it does no work, and only a batch that closes a window looks over the open
windows' starts (one numpy pass). A window's row is purged when it closes; a bucket holds only open windows.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType, TimestampType

from ..lower.expressions import compile_expr
from ..plan.group_windows import WINDOWS_PER_ROW
from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, WINDOW_START, Aggregate, GroupWindow
from .aggregate import AggSpec, _result, accumulate, aggregate_specs, result_type
from .base import DeclaredState, LoweringContext
from .keyed_inputs import (
    BUCKET, CLOCK_STEPS, NO_TIME, SIDE, TICK, bucketed, clock_values, count_dropped, described_by, drop_records, integral_columns,
    restore_integers, tick_only_clock, tick_rows,
)
from .state import GONE, log_changes, new_table_log, read_table, remove_where, run_segmented

START, FIRST, LATEST = "__wstart", "__first", "__latest"  # a row's window start (ms); in state: the window's first
# row's ingestion position and the latest time of its rows
ROW = 0  # the side tag of input rows (tick rows have keyed_inputs.TICK)
ORDER_SCALE = 1 << 20  # a leaving window's _sub: its end, then its first row's ingestion position

STATE = DeclaredState(
    "window_aggregate", 2,
    keeps="per group and open window: the grouping values, the window start, its first row's ingestion position, "
          "the latest time of its rows and one accumulator per aggregate",
    segments="chunks of the open windows' change log",
    purged="a window when the clock passes its end by the grace period or watermark hold-back (it closes then)")


class WindowAggregate:
    def state(self, node: Aggregate) -> DeclaredState:
        return STATE

    def lower(self, node: Aggregate, df: DataFrame, ctx: LoweringContext) -> DataFrame:
        window = node.window
        group_ids = [f.id for f, _ in node.groups]
        arg_cols, specs = aggregate_specs(node)
        if window.ksql:  # the row's own time
            millis = F.col(ROWTIME)
        else:
            time = compile_expr(window.time)
            millis = F.unix_millis(time) if window.time.type.startswith("timestamp") else time.cast("bigint")
        prepared = df.select(*[compile_expr(e).alias(g) for g, (_, e) in zip(group_ids, node.groups)], *arg_cols,
                             millis.alias("__t"), SEQ, SUB, STREAM_TIME, F.lit(ROW).alias(SIDE), *described_by(df))
        starts = _starts(F.col("__t"), window.size_ms, window.slide_ms)
        if window.ksql:  # no window starts before 0 (``TimeWindows.windowsFor``); a row's windows in order of start
            starts = F.filter(starts, lambda start: start >= 0)
            prepared = prepared.select("*", F.posexplode_outer(starts).alias("__pos", START))
            position = F.coalesce(F.col("__pos"), F.lit(0))  # a row's _sub in its n-th window: _sub * fan-out + n
            prepared = prepared.withColumn(SUB, F.col(SUB) * WINDOWS_PER_ROW + position).drop("__pos")
        else:
            prepared = prepared.withColumn(START, F.explode_outer(starts))
        keys = group_ids + [START]
        ticks = tick_rows(ctx, clock_steps=window.ksql and window.emit == "FINAL")
        data = bucketed(prepared, keys, ctx.time_buckets).unionByName(ticks, allowMissingColumns=True)
        types = {f.name: f.dataType for f in data.schema.fields}
        bounds = LongType() if window.ksql else TimestampType()
        schema = StructType(
            [StructField(g, types[g]) for g in group_ids]
            + [StructField(c.id, bounds) for c in window.columns]
            + [StructField(s.out, result_type(s, types.get(s.arg))) for s in specs]
            + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB, STREAM_TIME)]
            + ([StructField(WINDOW_START, LongType())] if window.ksql else []))
        integral = integral_columns(data, keys + [s.arg for s in specs if s.arg])
        step = window_step(window, group_ids, specs, integral, schema.fieldNames())
        return run_segmented(data, BUCKET, step, schema, ctx, idle=_idle(window.delay_ms + window.grace_ms))


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


def window_step(window: GroupWindow, group_ids, specs, integral, out_names):
    size, lag, ksql = window.size_ms, window.delay_ms + window.grace_ms, window.ksql
    keys = group_ids + [START]
    accs = [f"__acc{i}" for i in range(len(specs))]
    stored = [FIRST, LATEST] + accs

    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"table": new_table_log(), "dropped": {}, "rows": 0, "earliest_end": None}
        rows, clock, data = timed_rows(meta, rows, group_ids if ksql else [])
        starts = data[START].to_numpy(dtype=np.int64)
        row_clocks = clock_values(data[STREAM_TIME])
        late = (row_clocks != NO_TIME) & (starts + size <= row_clocks - lag)
        drop_records(meta, "late", data, late)
        data = restore_integers(data[~late].reset_index(drop=True), integral)
        closes_by = clock - lag if clock != NO_TIME else None  # a window ending at or before it closes
        due = meta["earliest_end"] is not None and closes_by is not None and meta["earliest_end"] <= closes_by
        if not len(data) and not due:
            return pd.DataFrame(columns=out_names), meta
        table = read_table(meta["table"], segments, keys, stored)
        changes, running = _folded(data, table, keys, specs, accs, integral)
        changes = changes.reindex(columns=keys + stored).assign(**{GONE: False})
        table.apply(changes)
        changed_ends = changes[START].to_numpy(dtype=np.int64) + size
        if closes_by is not None and (due or (changed_ends <= closes_by).any()):
            closing, logged = remove_where(table, table.column(START) + size <= closes_by, changes, keys)
        else:
            closing, logged = changes.iloc[:0], changes
        if window.emit == "CHANGES":
            out = _updates(data, running, group_ids, specs, size, window, out_names)
        else:
            written = np.ones(len(closing), dtype=bool)
            if ksql and len(closing):  # those Kafka Streams' store expired before their close was seen
                expired = _expired(closing[START].to_numpy(dtype=np.int64), window, _steps(rows))
                count_dropped(meta, "expired", expired.sum())
                written &= ~expired
            out = _closed(closing[written], group_ids, specs, accs, size, window, out_names, int(rows[SEQ].max()), clock)
        log_changes(meta["table"], segments, logged, table, keys)
        meta["rows"] = len(table)
        if len(closing):  # the earliest end left with its window: found again over the open ones
            open_starts = table.column(START)[table.positions()]
            meta["earliest_end"] = int(open_starts.min()) + size if len(open_starts) else None
        elif len(changes):
            earliest = int(changed_ends.min())
            meta["earliest_end"] = earliest if meta["earliest_end"] is None else min(meta["earliest_end"], earliest)
        return out, meta

    return step


def timed_rows(meta: dict, rows: pd.DataFrame, drop_null: list[str]) -> tuple[pd.DataFrame, int, pd.DataFrame]:
    """A bucket's batch in ingestion order, its batch-end clock, and its input rows that have a time (``__t``)
    and, in the ``drop_null`` columns, no NULL (ksqlDB's groups); the others are counted in ``meta`` as dropped
    (``no_time``, ``null_key``)."""
    rows = rows.sort_values([SEQ, SUB, SIDE], kind="stable").reset_index(drop=True)
    clock = int(clock_values(rows[STREAM_TIME]).max()) if len(rows) else NO_TIME
    data = rows[rows[SIDE].to_numpy() != TICK]
    if drop_null:
        null_group = data[drop_null].isna().any(axis=1).to_numpy()
        drop_records(meta, "null_key", data, null_group)
        data = data[~null_group]
    no_time = data["__t"].isna().to_numpy()
    count_dropped(meta, "no_time", no_time.sum())
    return rows, clock, data[~no_time].reset_index(drop=True)


def _steps(rows: pd.DataFrame) -> np.ndarray:
    """The clock values the batch reached, rising, from its tick row."""
    ticks = rows[rows[SIDE].to_numpy() == TICK]
    steps = ticks[CLOCK_STEPS].iloc[0] if len(ticks) and CLOCK_STEPS in ticks.columns else None
    return np.asarray(steps if steps is not None else (), dtype=np.int64)


def _expired(starts: np.ndarray, window: GroupWindow, steps: np.ndarray) -> np.ndarray:
    """Which of the closing windows (``starts``) Kafka Streams' window store no longer held when their close was
    seen: at the first clock value ``c`` at or past ``start + size + grace`` (``steps``: the clock values of the
    batch, in which that one is), the store's latest window start is ``c - c mod advance``, and it keeps only
    windows starting at or after that minus the retention (``AbstractDualSchemaRocksDBSegmentedBytesStore``)."""
    if not len(steps):
        return np.zeros(len(starts), dtype=bool)
    at = np.searchsorted(steps, starts + window.size_ms + window.grace_ms, side="left")
    seen = steps[np.minimum(at, len(steps) - 1)]
    latest_start = seen - np.mod(seen, window.slide_ms)
    return (at < len(steps)) & (starts < latest_start - window.retention_ms)


def _folded(data: pd.DataFrame, table, keys, specs, accs, integral):
    """Every (group, window) the batch's rows touch, with its first row's position, latest time and accumulators
    after them (``table``: the open windows, a ``LiveTable``); and, per row, its window's latest time and
    aggregates after it (``LATEST`` and ``accs``)."""
    if not len(data):
        return pd.DataFrame(columns=keys + [FIRST, LATEST] + accs), {}
    codes = data.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    first = np.full(codes.max() + 1, len(codes), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(codes)))
    heads = data.iloc[first].reset_index(drop=True)
    found = table.find(heads)
    held = found >= 0
    changes = heads[keys].copy()
    position = heads[SEQ].to_numpy(dtype=np.int64).copy()
    position[held] = table.column(FIRST)[found[held]]
    changes[FIRST] = position
    running = {}
    latest = AggSpec("MAX", "__t", LATEST)
    for spec, acc in ((latest, LATEST), *zip(specs, accs)):
        prior = np.full(len(heads), None, dtype=object)
        prior[held] = table.column(acc)[found[held]]
        values = data[spec.arg].reset_index(drop=True) if spec.arg else None
        running[acc], changes[acc] = accumulate(spec, values, codes, prior, spec is latest or spec.arg in integral)
    return changes, running


def _bounds(out: pd.DataFrame, window: GroupWindow, starts: np.ndarray, ends: np.ndarray) -> None:
    """The window's columns: ksqlDB's WINDOWSTART and WINDOWEND (ms); Flink's start, end and rowtime (end - 1)."""
    if window.ksql:
        out[window.start.id], out[window.end.id] = starts, ends
    else:
        for column, millis in zip(window.columns, (starts, ends, ends - 1)):
            out[column.id] = pd.to_datetime(millis, unit="ms")


def _updates(data: pd.DataFrame, running: dict, group_ids, specs, size: int, window, out_names) -> pd.DataFrame:
    """EMIT CHANGES: per on-time row, its window's values after it, at the row's place and the window's latest time."""
    if not len(data):
        return pd.DataFrame(columns=out_names)
    starts = data[START].to_numpy(dtype=np.int64)
    out = pd.DataFrame({g: data[g].to_numpy() for g in group_ids})
    _bounds(out, window, starts, starts + size)
    for spec, acc in zip(specs, [f"__acc{i}" for i in range(len(specs))]):
        out[spec.out] = running[acc]
    out[ROWTIME] = np.asarray(running[LATEST], dtype=np.int64)
    for c in (SEQ, SUB, STREAM_TIME):
        out[c] = data[c].to_numpy()
    out[WINDOW_START] = starts
    return out[out_names]


def _closed(closing: pd.DataFrame, group_ids, specs, accs, size: int, window, out_names, seq: int, clock: int) -> pd.DataFrame:
    """One row per closing window, ordered by end, then by its first row's ingestion position: at Flink's
    window time (end - 1), or at ksqlDB's latest time of the window's rows."""
    if not len(closing):
        return pd.DataFrame(columns=out_names)
    closing = closing.assign(__end=closing[START].to_numpy(dtype=np.int64) + size)
    closing = closing.sort_values(["__end", FIRST], kind="stable").reset_index(drop=True)
    starts, ends = closing[START].to_numpy(dtype=np.int64), closing["__end"].to_numpy(dtype=np.int64)
    out = pd.DataFrame({g: closing[g].to_numpy() for g in group_ids})
    _bounds(out, window, starts, ends)
    for spec, acc in zip(specs, accs):
        out[spec.out] = [_result(spec, a) for a in closing[acc].to_numpy()]
    out[SEQ] = seq
    out[SUB] = ends * ORDER_SCALE + closing[FIRST].to_numpy(dtype=np.int64) % ORDER_SCALE
    if window.ksql:
        out[ROWTIME] = closing[LATEST].to_numpy(dtype=np.int64)
        out[STREAM_TIME] = clock
        out[WINDOW_START] = starts
    else:
        out[ROWTIME] = ends - 1
        out[STREAM_TIME] = ends - 1  # a window's row leaves before the watermark that closed it moves on
    return out[out_names]


def _idle(lag: int):
    def idle(meta: dict, rows) -> bool:
        """A batch that brings the bucket only a clock short of closing its earliest open window."""
        clock = tick_only_clock(rows)
        if clock is None:
            return False
        return meta is None or meta["earliest_end"] is None or clock == NO_TIME or meta["earliest_end"] > clock - lag

    return idle


OPERATOR = WindowAggregate()
