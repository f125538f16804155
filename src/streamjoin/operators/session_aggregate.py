"""ksqlDB's session windows: ``WINDOW SESSION (gap)`` with the grouping columns, EMIT CHANGES or EMIT FINAL.

Semantics (Kafka Streams' ``KStreamSessionWindowAggregate``, under DIALECT §2's stream time). A group's rows
form sessions: a row of time ``t`` joins every session of its group that ends at or after ``t - gap`` and starts
at or before ``t + gap``, merging them into one ``[min start, max end]`` (a lone row is the session ``[t, t]``).
A row whose merged session ends before ``stream time - grace - gap`` (stream time including its own record) is
late: dropped and counted (``late``). When a row merges sessions into a new window, each merged session is
deleted first — a tombstone under its own windowed key, at its end time — then the merged session is written
with its aggregates (the merged sessions' accumulators combined, in order of start, then the row folded in),
at its end time. A session is gone from the store once its end falls ``gap + grace`` behind stream time
(Kafka Streams' session store retention), so a later row no longer merges with it. The session goes with the
result's key (``WINDOW_START``, ``WINDOW_END``: key + 8-byte end + 8-byte start, ``SessionKeySchema``);
``WINDOWSTART`` and ``WINDOWEND`` are its start and end. A NULL grouping value drops the row (``null_key``).
Under EMIT FINAL (Kafka Streams' ``suppress(untilWindowCloses)``) nothing is written while a session is open: each
session is written once, with its final aggregates, when it closes, at the clock that leaves it behind the store's
retention (its end + gap + grace); sessions closing together in end order.

Algorithm: rows are bucketed by a hash of the grouping values, with the batch's tick row in every bucket. Per
bucket, each group's rows are taken in ingestion order against the group's sessions, record by record (a row
may merge any number of sessions, so this is a loop, not a vectorised fold). Sessions the batch-end stream time
leaves behind the retention are purged.

State (per bucket, segmented: ``operators.state``): one row per live session — the grouping values, its start
and end and one accumulator per aggregate — as a table log keyed by group and start, which the worker keeps as a
``LiveTable``: a batch reads the sessions of its rows' groups through an index of the grouping values. The meta
value keeps the earliest session end (never later than the true one), so a batch that brings a bucket only a
clock short of expiring a session does no work, and only a batch that may expire one looks over the sessions'
ends (one numpy pass).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StructField, StructType

from ..lower.expressions import compile_expr
from ..plan.expressions import BY_OFFSET, TOP_K
from ..plan.group_windows import WINDOWS_PER_ROW
from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, TOMBSTONE, WINDOW_END, WINDOW_START, Aggregate, GroupWindow
from .aggregate import (
    VARIANCES, AggSpec, _fold, _result, _scalar, aggregate_specs, attr_seen, counted, result_type, top_k,
)
from .base import DeclaredState, LoweringContext
from .keyed_inputs import (
    BUCKET, NO_TIME, SIDE, bucketed, clock_values, described_by, drop_records, integral_columns, restore_integers,
    tick_only_clock, tick_rows,
)
from .state import GONE, log_changes, new_table_log, read_table, remove_where, run_segmented
from .window_aggregate import timed_rows

START, END = "__sstart", "__send"  # in state: a session's start and end (ms)
ROW = 0  # the side tag of input rows (tick rows have keyed_inputs.TICK)

STATE = DeclaredState(
    "session_aggregate", 1,
    keeps="per group and live session: the grouping values, the session's start and end and one accumulator per "
          "aggregate",
    segments="chunks of the sessions' change log",
    purged="a session when its end falls gap + grace behind stream time (Kafka Streams' session store retention)")


class SessionAggregate:
    def state(self, node: Aggregate) -> DeclaredState:
        return STATE

    def lower(self, node: Aggregate, df: DataFrame, ctx: LoweringContext) -> DataFrame:
        window = node.window
        group_ids = [f.id for f, _ in node.groups]
        arg_cols, specs = aggregate_specs(node)
        prepared = df.select(*[compile_expr(e).alias(g) for g, (_, e) in zip(group_ids, node.groups)], *arg_cols,
                             F.col(ROWTIME).alias("__t"), SEQ, SUB, STREAM_TIME, F.lit(ROW).alias(SIDE), *described_by(df))
        data = bucketed(prepared, group_ids, ctx.time_buckets).unionByName(tick_rows(ctx), allowMissingColumns=True)
        types = {f.name: f.dataType for f in data.schema.fields}
        schema = StructType(
            [StructField(g, types[g]) for g in group_ids]
            + [StructField(c.id, LongType()) for c in window.columns]
            + [StructField(s.out, result_type(s, types.get(s.arg))) for s in specs]
            + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB, STREAM_TIME, WINDOW_START, WINDOW_END)]
            + [StructField(TOMBSTONE, BooleanType())])
        integral = integral_columns(data, group_ids + [s.arg for s in specs if s.arg])
        step = session_step(window, group_ids, specs, integral, schema.fieldNames())
        return run_segmented(data, BUCKET, step, schema, ctx, idle=_idle(window))


def session_step(window: GroupWindow, group_ids, specs, integral, out_names):
    gap, grace, final = window.size_ms, window.grace_ms, window.emit == "FINAL"
    keys = group_ids + [START]
    accs = [f"__acc{i}" for i in range(len(specs))]

    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"table": new_table_log(), "dropped": {}, "rows": 0, "earliest_end": None}
        rows, clock, data = timed_rows(meta, rows, group_ids)
        data = restore_integers(data, integral)
        horizon = clock - gap - grace + 1 if clock != NO_TIME else NO_TIME  # sessions ending before it are gone
        due = meta["earliest_end"] is not None and meta["earliest_end"] < horizon
        if not len(data) and not due:
            return pd.DataFrame(columns=out_names), meta
        table = read_table(meta["table"], segments, keys, [END] + accs)
        stored_sessions = _sessions(table.rows_for(data, by=group_ids), group_ids, accs) if len(data) else {}
        out, changes, late_rows = [], [], []
        row_columns, groups = _RowColumns(data, specs), [data[g].to_numpy() for g in group_ids]
        for at in _by_group(data, group_ids):
            group = tuple(values[at[0]] for values in groups)
            stored = stored_sessions.get(group, {})
            sessions, late = _run_group(at.tolist(), row_columns, dict(stored), specs, gap, grace, group, out, final)
            late_rows += late
            for start in stored.keys() - sessions.keys():
                changes.append((*group, start, None, *[None] * len(accs), True))
            for start, (end, values) in sessions.items():
                if stored.get(start) != (end, values):
                    changes.append((*group, start, end, *values, False))
        drop_records(meta, "late", data, np.isin(np.arange(len(data)), late_rows))
        logged = pd.DataFrame(changes, columns=keys + [END] + accs + [GONE])
        table.apply(logged)
        written_ends = logged[END][~logged[GONE].to_numpy(dtype=bool)].to_numpy(dtype=float)
        if horizon != NO_TIME and (due or (written_ends < horizon).any()):
            # sessions stream time left behind the store's retention leave it
            gone, logged = remove_where(table, table.column(END) < horizon, logged, keys)
            if final:  # closed: written once, at the batch's end (after what its rows wrote), in end order
                gone = gone.sort_values([END, *keys], kind="stable")
                after, seq = (int(data[SUB].max()) + 1 if len(data) else 0) * WINDOWS_PER_ROW, int(rows[SEQ].max())
                for n, (group, start, end, values) in enumerate(_session_rows(gone, group_ids, accs)):
                    out.append((group, start, end, values, end, seq, after + n, clock, False))
            ends = table.column(END)[table.positions()]
            meta["earliest_end"] = int(ends.min()) if len(ends) else None
        elif len(written_ends):  # (a merged session's removal may leave it early: the next scan corrects it)
            earliest = int(written_ends.min())
            meta["earliest_end"] = earliest if meta["earliest_end"] is None else min(meta["earliest_end"], earliest)
        log_changes(meta["table"], segments, logged, table, keys)
        meta["rows"] = len(table)
        frame = pd.DataFrame(out, columns=["__group", "__start", "__end", "__values", ROWTIME, SEQ, SUB, STREAM_TIME,
                                           TOMBSTONE])
        return _output(frame, window, group_ids, specs, out_names), meta

    return step


def _sessions(found: pd.DataFrame, group_ids, accs) -> dict:
    """The stored sessions of each group in ``found`` (the rows of the batch's groups): group -> start -> (end,
    accumulators)."""
    sessions: dict = {}
    for group, start, end, acc in _session_rows(found, group_ids, accs):
        sessions.setdefault(group, {})[start] = (end, acc)
    return sessions


def _session_rows(found: pd.DataFrame, group_ids, accs):
    """(group, start, end, accumulators) of each session row of ``found``, in its order."""
    groups = zip(*[found[g].to_numpy() for g in group_ids])
    accumulators = zip(*[found[a].to_numpy() for a in accs]) if accs else [()] * len(found)
    for group, start, end, acc in zip(groups, found[START].to_numpy(), found[END].to_numpy(), accumulators):
        yield tuple(group), int(start), int(end), tuple(acc)


class _RowColumns:
    """The batch's rows as the arrays the session loop reads (pandas costs too much per access in a loop)."""

    def __init__(self, data: pd.DataFrame, specs):
        self.times = data["__t"].to_numpy(dtype=np.int64) if len(data) else np.zeros(0, dtype=np.int64)
        self.clocks = clock_values(data[STREAM_TIME])
        self.seqs, self.subs = data[SEQ].to_numpy(), data[SUB].to_numpy()
        self.args = [data[s.arg].to_numpy(dtype=object) if s.arg else None for s in specs]


def _by_group(data: pd.DataFrame, group_ids) -> list:
    """The positions of each group's rows, in ingestion order (``data``'s)."""
    if not len(data):
        return []
    codes = data.groupby(group_ids, sort=False, dropna=False).ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(codes[order])) + 1)


def _run_group(at: list, rows: _RowColumns, sessions: dict, specs, gap: int, grace: int, group: tuple, out: list,
               final: bool = False):
    """One group's rows (positions ``at`` of ``rows``, in ingestion order) against its sessions (start -> (end,
    accumulators), updated in place); appends the output rows to ``out`` (``final``: only the sessions each row's
    clock closes); returns the sessions and the positions of the rows that were late."""
    late = []
    times, clocks, seqs, subs, args = rows.times, rows.clocks, rows.seqs, rows.subs, rows.args
    for i in at:
        t, clock = int(times[i]), int(clocks[i])
        closed = sorted((e, s) for s, (e, _) in sessions.items() if e < clock - gap - grace + 1)
        for n, (end, start) in enumerate(closed):  # expired from the store: no row merges with it any more
            if final:
                out.append((group, start, end, sessions[start][1], end, seqs[i], int(subs[i]) * WINDOWS_PER_ROW + n,
                            clock, False))
            del sessions[start]
        merged = sorted(s for s, (e, _) in sessions.items() if e >= t - gap and s <= t + gap)
        first = min([t, *merged])
        last = max([t, *(sessions[s][0] for s in merged)])
        if last < clock - grace - gap:
            late.append(i)
            continue
        sub = int(subs[i]) * WINDOWS_PER_ROW
        if merged and (first, last) != (t, t) and not final:  # each merged session deleted under its own key first
            for n, s in enumerate(merged):
                end, values = sessions[s]
                out.append((group, s, end, values, end, seqs[i], sub + n, clock, True))
        values = _folded(specs, _merged([sessions.pop(s)[1] for s in merged], specs), args, i)
        sessions[first] = (last, values)
        if not final:
            out.append((group, first, last, values, last, seqs[i], sub + len(merged), clock, False))
    return sessions, late


def _folded(specs, values: tuple, args, i: int) -> tuple:
    """The accumulators ``values`` with row ``i``'s arguments folded in."""
    return tuple(_fold(spec, v, None if arg is None else _scalar(arg[i])) if spec.arg else _fold(spec, v, 1)
                 for spec, v, arg in zip(specs, values, args))


def _merged(stored: list, specs: list[AggSpec]) -> tuple:
    """The accumulators of sessions merged into one (in order of start; none: every aggregate's initial value)."""
    values: list = [None] * len(specs)
    for accumulators in stored:
        values = [_merge(spec, a, b) for spec, a, b in zip(specs, values, accumulators)]
    return tuple(set(v) if isinstance(v, set) else v for v in values)


def _merge(spec: AggSpec, a: Any, b: Any) -> Any:
    """Two sessions' accumulators of one aggregate as one (``a`` from the earlier session)."""
    if a is None:
        return set(b) if isinstance(b, (set, frozenset)) else b
    if b is None:
        return a
    fn = spec.fn
    if fn == "COUNT" and spec.distinct or fn == "COLLECT_SET" and isinstance(a, set):
        return set(a) | set(b)
    if fn in ("COUNT", "SUM"):
        return a + b
    if fn == "AVG":
        return (a[0] + b[0], a[1] + b[1])
    if fn == "MIN":
        return min(a, b)
    if fn == "MAX":
        return max(a, b)
    if fn in ("COLLECT_LIST", "COLLECT_SET"):  # ksqlDB's merge: the earlier session's values first, up to the limit
        merged = list(a) + [v for v in b if fn == "COLLECT_LIST" or v not in a]
        return merged if spec.param is None else merged[:max(spec.param, len(a))]
    if fn in BY_OFFSET and spec.param and spec.param[0]:  # the first (last) n of both sessions' values
        merged = list(a) + list(b)
        return merged[:spec.param[0]] if fn == "EARLIEST_BY_OFFSET" else merged[-spec.param[0]:]
    if fn == "LATEST_BY_OFFSET":
        return b
    if fn in TOP_K:
        return top_k(spec, a, b)
    if fn == "ATTR":
        return attr_seen(a, b)
    if fn == "HISTOGRAM":  # ksqlDB's merge: the later session's counts added
        return counted(a, b)
    if fn == "CORRELATION":
        return tuple(x + y for x, y in zip(a, b))
    if fn in VARIANCES:  # ksqlDB's merge of two (sum, count, M2): Chan et al.'s pairwise update, in doubles
        (s1, n1, m1), (s2, n2, m2) = a, b
        gap = s1 / n1 - s2 / n2 if n1 and n2 else 0.0
        return (s1 + s2, n1 + n2, m1 + m2 + (n1 * n2 * gap * gap / (n1 + n2) if n1 and n2 else 0.0))
    return a  # EARLIEST_BY_OFFSET


def _output(frame: pd.DataFrame, window: GroupWindow, group_ids, specs, out_names) -> pd.DataFrame:
    if not len(frame):
        return pd.DataFrame(columns=out_names)
    out = pd.DataFrame({g: [group[i] for group in frame["__group"]] for i, g in enumerate(group_ids)})
    starts, ends = frame["__start"].to_numpy(dtype=np.int64), frame["__end"].to_numpy(dtype=np.int64)
    out[window.start.id], out[window.end.id] = starts, ends
    for i, spec in enumerate(specs):
        out[spec.out] = [_result(spec, values[i]) for values in frame["__values"]]
    for c in (ROWTIME, SEQ, SUB, STREAM_TIME, TOMBSTONE):
        out[c] = frame[c].to_numpy()
    out[WINDOW_START], out[WINDOW_END] = starts, ends
    return out[out_names]


def _idle(window: GroupWindow):
    def idle(meta: dict, rows) -> bool:
        """A batch that brings the bucket only a clock short of expiring its earliest session."""
        clock = tick_only_clock(rows)
        if clock is None:
            return False
        return (meta is None or meta["earliest_end"] is None or clock == NO_TIME
                or meta["earliest_end"] >= clock - window.size_ms - window.grace_ms + 1)

    return idle


OPERATOR = SessionAggregate()
