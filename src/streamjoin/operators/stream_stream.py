"""Windowed stream-stream join (KSQL / Lenses ``WITHIN``), record-at-a-time in ingestion order.

Semantics (DIALECT §3: current ksqlDB on current Kafka Streams, ``KStreamKStreamJoin`` and its window
stores). A pair (l, r) of one key matches when ``l.t - before <= r.t <= l.t + after``; it is emitted when the
later of the two arrives (ingestion order; in a self-join the left copy of a record counts as arriving
first), at time ``max(l.t, r.t)``, after that record's earlier matches ordered by their time. A record with
a null key is dropped.
- Each side's store keeps its records for ``retention`` = before + after + grace behind that side's own
  clock, the largest event time read on that side (``connectors.event_time``'s side clocks); a record
  already that far behind its side's clock is not kept (counted as late). Every record, late or not,
  probes the records the other side's store keeps when it arrives.
- Without GRACE PERIOD (grace is then 24 h less twice ``before``, as ksqlDB's ``JoinWindows.of``): a record
  of a preserved side (left in LEFT/FULL, right in RIGHT/FULL) that matches nothing on arrival is emitted
  null-padded at once ("eager").
- With GRACE PERIOD g: such a record is emitted null-padded at once if its window had already ended when it
  arrived (``t + after < stream time`` for a left record, ``t + before`` for a right one); else only if it
  has not matched when stream time passes its close (window end + g).

Algorithm: rows are grouped by a hash bucket of the join key (``operators.state``); in each
bucket a micro-batch is joined vectorised with pandas: new left rows against the stored and new right
rows of the segments it reads, new right rows against stored left rows, then windows, arrival order, padding and close
times are evaluated on the whole batch at once. Stream time and both sides' clocks come from the source on
every record, so results do not depend on batch cuts.

State (per bucket, segmented: ``operators.state.run_segmented``): every stored record of both sides with
its key, time, ingestion order, payload and, with a grace period, whether it still awaits its close, in
segments of its time (``segment_width``: a quarter of the window, at least a minute); and, in the bucket's
small meta value, the counts of records dropped for a null key or as late, the number of stored rows
(``runtime.metrics``) and a summary of each segment. A batch reads only the segments its records can match or
be stored in and those with a pending record now due; so its cost follows the batch and the window, not the
retention. Purge: a record ``retention`` behind its side's clock (Flink: whose close the watermark passed)
can no longer be found; it is dropped from the segments a batch reads, and a segment all of whose records
are that old is removed unread. Every micro-batch also brings one tick row per bucket with the batch-end
clocks (``connectors.embedded_source``), so a bucket that receives no record still emits the null-padded
rows whose window closed, and purges. (Spark's event-time timeouts are not used:
they drop input rows at or below the watermark, which would lose records that do not advance stream time.)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import pandas as pd
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, TOPIC_TIMES, Join, base_scan, join_grace
from .base import DeclaredState, LoweringContext
from .keyed_inputs import (
    BUCKET, NO_TIME, NULL_KEY, OK, SIDE, TICK, bucketed, clock_values, drop_records, key_names, null_unless, payload, tag_side, tick_only_clock, tick_rows,
)
from .state import by_segment, run_segmented

ORD = "__ord"  # arrival order in a bucket
LEFT_CLOCK, RIGHT_CLOCK = "__left_clock", "__right_clock"  # each side's own clock on every row (_side_clocks)
NEVER = np.iinfo(np.int64).max
LEFT, RIGHT = 0, 1  # within one record: left copy, right copy (then the batch's ticks, TICK)


@dataclass(frozen=True)
class Window:
    before: int
    after: int
    grace: int
    eager: bool  # no GRACE PERIOD: unmatched rows leave at once
    outer_left: bool
    outer_right: bool
    watermark: bool = False  # Flink interval join: a record lives until the clock (the watermark) passes its close
    condition: Optional[Callable] = field(default=None, compare=False)  # Flink: pairs -> which pass (pair_condition)

    def span(self, side: np.ndarray) -> np.ndarray:
        """How long after its own time a record can still be matched by the other side."""
        return np.where(side == LEFT, self.after, self.before)

    @property
    def retention(self) -> int:
        return self.before + self.after + self.grace


STATE = DeclaredState(
    "stream_stream", 1,
    keeps="every record of both sides within its retention: key, time, ingestion order, payload, whether it "
          "awaits its close",
    segments="slices of event time (a quarter of the window, at least a minute)",
    purged="a record retention (before + after + grace) behind its side's clock; whole segments unread")


class StreamStreamJoin:
    def state(self, join: Join) -> DeclaredState:
        return STATE

    def lower(self, join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext) -> DataFrame:
        within = join.within
        window = Window(
            before=within.before_ms, after=within.after_ms,
            grace=join_grace(within),
            eager=within.grace_ms is None,
            outer_left=join.join_type in ("LEFT", "FULL"), outer_right=join.join_type in ("RIGHT", "FULL"),
        )
        return lower_windowed(join, left, right, ctx, window)


def lower_windowed(join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext, window: Window) -> DataFrame:
    """Both inputs tagged and bucketed by join key, with the batch's tick rows, through the bucket step. The
    result carries the first ``len(join.key)`` keys; records match on all of their sides' keys (a ksqlDB join of
    windowed sources adds the keys' windows: ``lower.lowering``)."""
    keys = key_names(len(join.left_side.keys))
    left_payload, right_payload = payload(left), payload(right)
    clocks = _side_clocks(join, left, right, ctx, window)
    data = tag_side(left.withColumns(clocks), LEFT, join.left_side, keys).unionByName(
        tag_side(right.withColumns(clocks), RIGHT, join.right_side, keys), allowMissingColumns=True)
    data = bucketed(data, keys, ctx.time_buckets)  # a record with a null join key is dropped and counted
    ticks = tick_rows(ctx, topic_times=True)
    both = data.unionByName(ticks.withColumns(clocks).drop(TOPIC_TIMES), allowMissingColumns=True)

    types = {f.name: f.dataType for f in both.schema.fields}
    out_fields = [StructField(c, types[c]) for c in left_payload + right_payload]
    out_fields += [StructField(jk, types[k]) for jk, k in zip(join.key, keys)]
    out_fields += [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB, STREAM_TIME)]
    schema = StructType(out_fields)
    process = _bucket_processor(window, keys, left_payload, right_payload, list(join.key), schema.fieldNames())
    return run_segmented(both, BUCKET, process, schema, ctx, idle=_idle(window))


def _side_clocks(join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext, w: Window) -> dict:
    """Each side's own clock on every row (``LEFT_CLOCK``, ``RIGHT_CLOCK``): the largest event time read so
    far of the topic under that side, carried by the source (``connectors.event_time``, ``sideTopics``).
    A Flink join runs by its watermark, and a side that is not a single topic (an earlier join's output)
    has no clock of its own: there both are the query's clock."""
    topics = [scan.source.topic if (scan := base_scan(side)) is not None else None for side in (join.left, join.right)]
    if (w.watermark or TOPIC_TIMES not in left.columns or TOPIC_TIMES not in right.columns
            or not all(t in ctx.side_topics for t in topics)):
        return {LEFT_CLOCK: F.col(STREAM_TIME), RIGHT_CLOCK: F.col(STREAM_TIME)}
    return {name: F.element_at(F.col(TOPIC_TIMES), ctx.side_topics.index(t) + 1)
            for name, t in zip((LEFT_CLOCK, RIGHT_CLOCK), topics)}


def _idle(w: Window):
    """Whether a bucket's batch changes nothing: it brings only the clock, no stored record is due at it,
    and no segment expires at it."""
    def idle(meta: dict, rows) -> bool:
        now = tick_only_clock(rows)
        if now is None:
            return False
        clocks = Clocks(now, *(_max_clock(rows.column(c)) for c in (LEFT_CLOCK, RIGHT_CLOCK)))
        index = meta["segments"]
        return not _due(index, now) and not any(_expired(w, summary, clocks) for summary in index.values())

    return idle


def _max_clock(column) -> int:
    clock = pc.max(column).as_py()
    return NO_TIME if clock is None else int(clock)


@dataclass(frozen=True)
class Clocks:
    """A bucket's clocks at the end of a batch: the query's (stream time or watermark) and each side's own."""

    now: int
    left: int
    right: int

    @staticmethod
    def of(rows: pd.DataFrame) -> "Clocks":
        def latest(column):
            values = clock_values(rows[column])
            return int(values.max()) if len(values) else NO_TIME

        return Clocks(latest(STREAM_TIME), latest(LEFT_CLOCK), latest(RIGHT_CLOCK))


def segment_width(w: Window) -> int:
    """Event-time width of a state segment: a quarter of the window's span, at least a minute. A record's
    matches then lie in at most six segments, and a batch rewrites at most two segments' worth of older rows."""
    return max(MIN_SEGMENT_MS, (max(w.before, 0) + max(w.after, 0)) // 4)


def _bucket_processor(w: Window, keys, left_payload, right_payload, key_ids, out_names, width: int | None = None):
    """The per-bucket step over segmented state (``operators.state.run_segmented``).

    Stored records are kept in segments of ``width`` ms of their own time; ``meta`` holds the arrival
    counter, the drop counts, the number of stored rows and a summary of each segment (``_summary``). A batch
    reads the segments its records' windows overlap, those its records are stored in, and those holding a
    pending record whose close the batch's clock passes; it joins and emits over them
    exactly as over the whole store (no other stored record can match or be due), writes back the segments
    that changed, and removes every segment whose records have all expired, unread."""
    width = width or segment_width(w)
    stored_cols = [SIDE, OK, ORD, SEQ, ROWTIME, STREAM_TIME, "__pending", "__close"] + keys + left_payload + right_payload

    def process(meta, rows: pd.DataFrame, segments):
        meta = meta or {"ord": 0, "dropped": {}, "rows": 0, "segments": {}}
        index = meta["segments"]
        null_key = rows[NULL_KEY].to_numpy(dtype=object) == True  # noqa: E712 - ticks carry None
        drop_records(meta, "null_key", rows, null_key)
        rows = rows[~null_key]
        rows = rows.sort_values([SEQ, SUB, SIDE], kind="stable", na_position="last").reset_index(drop=True)
        rows[ORD] = meta["ord"] + 1 + np.arange(len(rows), dtype=np.int64)  # arrival order within the bucket
        clocks = Clocks.of(rows)

        loaded = sorted((_probed(w, width, rows) | _due(index, clocks.now)) & index.keys())
        data_rows = int((rows[SIDE] != TICK).sum())
        if not loaded and not data_rows:  # only the clock moved, and nothing is due: just purge
            _purge(w, meta, segments, clocks, set())
            return pd.DataFrame(columns=out_names), meta
        # by position: column ids come from a counter shared by everything the process planned (issue #29),
        # so the same query planned again in one process names its columns otherwise
        frames = [segments.get(i).set_axis(stored_cols, axis=1) for i in loaded]
        if len(frames) > 1:  # each segment is in arrival order already
            store = pd.concat(frames, ignore_index=True).sort_values(ORD, kind="stable").reset_index(drop=True)
        else:
            store = frames[0] if frames else pd.DataFrame(columns=stored_cols)
        out, store, late = _process_batch(w, store, rows, clocks, keys, left_payload, right_payload, key_ids, out_names)
        drop_records(meta, "late", *late)
        meta["ord"] += data_rows  # ticks are never stored: their arrival numbers may be given again

        written = by_segment(store, store[ROWTIME].to_numpy(np.int64) // width) if len(store) else {}
        for i in set(loaded) | written.keys():
            frame = written.get(i)
            if frame is None:
                segments.remove(i)
                del index[i]
                continue
            summary = _summary(frame)
            if index.get(i) != summary:
                segments.put(i, frame)
                index[i] = summary
        _purge(w, meta, segments, clocks, set(loaded) | written.keys())
        return out, meta

    return process


def _purge(w: Window, meta: dict, segments, clocks: Clocks, kept: set) -> None:
    """Remove, unread, every segment besides ``kept`` whose records have all expired at ``clocks``; count the
    rows left."""
    index = meta["segments"]
    for i in [i for i in index.keys() - kept if _expired(w, index[i], clocks)]:
        segments.remove(i)
        del index[i]
    meta["rows"] = sum(entry[0] for entry in index.values())


MIN_SEGMENT_MS = 60_000


def _probed(w: Window, width: int, rows: pd.DataFrame) -> set:
    """Segments holding every stored record that a record of the batch can match (a left record at t matches
    right times in [t - before, t + after], a right one left times in [t - after, t + before]), and the
    segment it is stored in itself (the bounds of a Flink interval join need not hold t)."""
    data = rows[rows[SIDE] != TICK]
    if not len(data):
        return set()
    t = data[ROWTIME].to_numpy(np.int64)
    is_left = data[SIDE].to_numpy() == LEFT
    lo = np.minimum(t - np.where(is_left, w.before, w.after), t) // width
    hi = np.maximum(t + np.where(is_left, w.after, w.before), t) // width
    extra = hi - lo  # a record spans a few segments: collect them offset by offset (1-D uniques are cheap)
    return {int(i) for d in range(int(extra.max()) + 1) for i in np.unique(lo[extra >= d] + d)}


def _due(index: dict, now: int) -> set:
    """Segments with a pending record whose close the clock has passed: it may be emitted in this batch."""
    return {i for i, (_, pending, first_close, *_) in index.items() if pending and first_close < now}


def _summary(frame: pd.DataFrame) -> tuple:
    """(rows, pending rows, earliest pending close, latest time, latest close, last arrival, latest left time,
    latest right time) of one segment: any change to a segment (rows added, purged, or no longer pending)
    changes its summary."""
    pending = frame["__pending"].to_numpy(dtype=bool)
    close = frame["__close"].to_numpy(np.int64)
    times, sides = frame[ROWTIME].to_numpy(np.int64), frame[SIDE].to_numpy()
    latest = [int(times[sides == s].max()) if (sides == s).any() else NO_TIME for s in (LEFT, RIGHT)]
    return (len(frame), int(pending.sum()), int(close[pending].min()) if pending.any() else NEVER,
            int(times.max()), int(close.max()), int(frame[ORD].to_numpy(np.int64).max()), *latest)


def _expired(w: Window, summary: tuple, clocks: Clocks) -> bool:
    """Whether no record of a segment can match or be emitted any more (the rule ``_process_batch`` applies to
    each record it reads)."""
    _, pending, _, latest_time, latest_close, _, *by_side = summary
    if pending or clocks.now == NO_TIME:
        return False
    if w.watermark:
        return latest_close < clocks.now
    latest_left, latest_right = by_side or (latest_time, latest_time)  # a summary written before sides were kept
    return (latest_left == NO_TIME or not _visible(w, latest_left, clocks.left)) and \
        (latest_right == NO_TIME or not _visible(w, latest_right, clocks.right))


def _visible(w: Window, t, side_clock):
    """Whether a stored record at ``t`` can still be found when its side's clock is ``side_clock``: its store
    keeps records for ``retention`` behind that clock (Kafka Streams' window store)."""
    return np.asarray(t, dtype=np.int64) + w.retention > np.asarray(side_clock, dtype=np.int64)


def _process_batch(w: Window, store, rows, clocks: Clocks, keys, left_payload, right_payload, key_ids, out_names):
    st = clock_values(rows[STREAM_TIME])
    row_ords = rows[ORD].to_numpy(np.int64)
    row_seqs = rows[SEQ].to_numpy(np.int64)
    data = rows[rows[SIDE] != TICK].copy()
    side = data[SIDE].to_numpy()
    t = data[ROWTIME].to_numpy(dtype=np.int64)
    arrival_st = clock_values(data[STREAM_TIME])
    close = t + w.span(side) + w.grace
    outer = np.where(side == LEFT, w.outer_left, w.outer_right)
    data["__close"] = close
    data["__pending"] = False
    if w.watermark:  # Flink: a record behind the watermark still joins the other side's live records; not kept
        late = close < arrival_st
        kept = ~late
    else:  # KSQL: every record probes; its own side's store keeps it only within retention of that side's clock
        own_clock = np.where(side == LEFT, clock_values(data[LEFT_CLOCK]), clock_values(data[RIGHT_CLOCK]))
        kept = _visible(w, t, own_clock)
        late = t + w.span(side) < arrival_st  # its window has ended: unmatched, it is padded at once
    candidates = _append(store, data)
    pairs = _pairs(w, data, candidates, store, keys, _clock_lookup(rows))
    if w.condition is not None and len(pairs):  # Flink: a pair failing ON's further condition is no match
        pairs = pairs[_passing(w.condition, pairs, candidates, left_payload, right_payload)].reset_index(drop=True)

    # arrival matches: pairs in which the record is the earlier of the two (the other arrived before it)
    trigger = np.maximum(pairs["l_ord"].to_numpy(), pairs["r_ord"].to_numpy()) if len(pairs) else np.array([], np.int64)
    first_match = pd.concat([
        pd.Series(trigger, index=pairs["l_ord"].to_numpy()), pd.Series(trigger, index=pairs["r_ord"].to_numpy())
    ]).groupby(level=0).min() if len(pairs) else pd.Series(dtype=np.int64)
    arrival_matched = data[ORD].map(first_match).eq(data[ORD]).to_numpy() if len(data) else np.array([], bool)

    out = [_pair_rows(pairs, trigger, candidates, keys, left_payload, right_payload, key_ids)]
    unmatched = outer & ~arrival_matched
    at_once = unmatched & (late | w.eager)  # null-padded on arrival
    padded = data[at_once]
    out.append(_padded(padded, padded[SEQ], 0, keys, left_payload, right_payload, key_ids))
    pending = unmatched & ~at_once  # with a grace period: padded when stream time passes its close, if unmatched
    data.loc[pending, "__pending"] = True
    new_store = _append(store, data[kept | pending])
    if not w.eager:
        emitted, new_store = _emit_closed(new_store, first_match, row_ords, row_seqs, st)
        out.append(emitted_rows(emitted, keys, left_payload, right_payload, key_ids))
    if len(st) and len(new_store):
        waiting = new_store["__pending"].to_numpy(dtype=bool)
        if w.watermark:  # no record read from now on can match a record whose close the clock passed
            keep = new_store["__close"].to_numpy(dtype=np.int64) >= int(st.max())
        else:
            stored_side = new_store[SIDE].to_numpy()
            keep = _visible(w, new_store[ROWTIME].to_numpy(dtype=np.int64),
                            np.where(stored_side == LEFT, clocks.left, clocks.right))
        new_store = new_store[keep | waiting].reset_index(drop=True)
    result = pd.concat([o for o in out if len(o)], ignore_index=True) if any(len(o) for o in out) else pd.DataFrame(columns=out_names)
    # dropped as late: Flink, a record behind the watermark that joined nothing on a side not preserved;
    # KSQL, a record its store would not keep (it may still have joined on arrival)
    dropped = (late & ~arrival_matched & ~outer) if w.watermark else (~kept & ~pending)
    return result.reindex(columns=out_names), new_store, (data, dropped)


def _clock_lookup(rows: pd.DataFrame):
    """(arrival orders) -> (left clock, right clock) at those rows of the batch."""
    first = int(rows[ORD].iloc[0]) if len(rows) else 0
    left, right = clock_values(rows[LEFT_CLOCK]), clock_values(rows[RIGHT_CLOCK])

    def at(ords):
        i = np.asarray(ords, dtype=np.int64) - first
        return left[i], right[i]

    return at


def _append(store: pd.DataFrame, fresh: pd.DataFrame) -> pd.DataFrame:
    """Stored records followed by this batch's, in arrival order."""
    if not len(store):
        return fresh[store.columns].reset_index(drop=True)
    if not len(fresh):
        return store
    return pd.concat([store, fresh[store.columns]], ignore_index=True)


def _pairs(w: Window, fresh, candidates, store, keys, clocks_at) -> pd.DataFrame:
    """Every matching (left, right) pair with at least one new record, as ORD pairs. The later of the two
    finds the earlier only while the earlier's store keeps it (KSQL: ``_visible`` by its side's clock when
    the later arrives; Flink: until the clock passes its close). Found with key codes and a sorted search
    (``_equal_pairs``): as two pandas merges, a batch of a few records against a few hundred stored ones took
    ~16 ms of CPU, nearly all of it fixed cost."""
    cols = keys + [ORD, ROWTIME, "__close", STREAM_TIME]

    def joinable(frame, side) -> dict:  # the columns of ``frame``'s rows of one side with a usable key
        if not len(frame):
            return {c: np.array([], dtype=np.int64) for c in cols}
        at = np.flatnonzero((frame[SIDE].to_numpy() == side) & frame[OK].astype(bool).to_numpy())
        return {c: frame[c].to_numpy()[at] for c in cols}

    found = []
    for lefts, rights in ((joinable(fresh, LEFT), joinable(candidates, RIGHT)), (joinable(store, LEFT), joinable(fresh, RIGHT))):
        li, ri = _equal_pairs([lefts[k] for k in keys], [rights[k] for k in keys], len(lefts[ORD]), len(rights[ORD]))
        if not len(li):
            continue
        l_ord, r_ord = lefts[ORD][li].astype(np.int64), rights[ORD][ri].astype(np.int64)
        lt, rt = lefts[ROWTIME][li].astype(np.int64), rights[ROWTIME][ri].astype(np.int64)
        keep = (rt >= lt - w.before) & (rt <= lt + w.after)
        later_left = l_ord > r_ord
        if w.watermark:  # the earlier record must still be live when the later one arrives
            close = np.where(later_left, rights["__close"][ri], lefts["__close"][li]).astype(np.int64)
            keep &= close >= clock_values(np.where(later_left, lefts[STREAM_TIME][li], rights[STREAM_TIME][ri]))
        else:  # the earlier record must still be in its store when the later one arrives
            left_clock, right_clock = clocks_at(np.maximum(l_ord, r_ord))
            keep &= _visible(w, np.where(later_left, rt, lt), np.where(later_left, right_clock, left_clock))
        found.append((l_ord[keep], r_ord[keep], lt[keep], rt[keep]))
    names = ("l_ord", "r_ord", "l_t", "r_t")
    if not found:
        return pd.DataFrame({name: np.array([], np.int64) for name in names})
    return pd.DataFrame({name: np.concatenate(column) for name, column in zip(names, zip(*found))})


def _equal_pairs(left: list, right: list, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions (i, j) of every pair of ``n`` left and ``m`` right rows whose key columns (``left``, ``right``:
    one array per key column) are all equal; every pair when there is no key."""
    if not left:
        return np.repeat(np.arange(n), m), np.tile(np.arange(m), n)
    code = np.zeros(n + m, dtype=np.int64)
    for a, b in zip(left, right):  # one code per distinct key, kept below n + m; NULL equals NULL, as in a merge
        values = pd.concat([pd.Series(a), pd.Series(b)], ignore_index=True)  # a stored and a new column may differ in dtype
        column, uniques = pd.factorize(values, use_na_sentinel=False)
        code = pd.factorize(code * (len(uniques) + 1) + column)[0]
    order = np.argsort(code[n:], kind="stable")
    ranked = code[n:][order]
    lo, hi = np.searchsorted(ranked, code[:n], "left"), np.searchsorted(ranked, code[:n], "right")
    counts = hi - lo
    li = np.repeat(np.arange(n), counts)
    ri = order[np.repeat(lo - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))]
    return li, ri


def _positions(candidates, *ords) -> list:
    """Where records of the given arrival orders are in ``candidates`` (ascending ORD: stored records, then
    this batch's, in arrival order)."""
    stored = candidates[ORD].to_numpy(np.int64)
    return [np.searchsorted(stored, np.asarray(o, dtype=np.int64)) for o in ords]


def _pair_payloads(candidates, lpos, rpos, left_payload, right_payload) -> pd.DataFrame:
    """One row per pair: the left record's columns, then the right record's."""
    out = pd.DataFrame({c: candidates[c].to_numpy()[lpos] for c in left_payload})
    for c in right_payload:
        out[c] = candidates[c].to_numpy()[rpos]
    return out


def _passing(condition, pairs, candidates, left_payload, right_payload) -> np.ndarray:
    """Which pairs pass the condition, evaluated over both records' columns."""
    lpos, rpos = _positions(candidates, pairs["l_ord"], pairs["r_ord"])
    return condition(_pair_payloads(candidates, lpos, rpos, left_payload, right_payload))


def _pair_rows(pairs, trigger, candidates, keys, left_payload, right_payload, key_ids) -> pd.DataFrame:
    """The joined rows of ``pairs``, each record's earlier matches in the order of their time, numbered within
    the record that triggered them (``SUB``); built column by column in numpy."""
    if not len(pairs):
        return pd.DataFrame()
    l_ord, r_ord = pairs["l_ord"].to_numpy(np.int64), pairs["r_ord"].to_numpy(np.int64)
    l_t, r_t = pairs["l_t"].to_numpy(np.int64), pairs["r_t"].to_numpy(np.int64)
    later_is_left = l_ord > r_ord
    order = np.lexsort((np.where(later_is_left, r_ord, l_ord), np.where(later_is_left, r_t, l_t), trigger))
    lpos, rpos, tpos = (at[order] for at in _positions(candidates, l_ord, r_ord, trigger))
    out = {c: candidates[c].to_numpy()[lpos] for c in left_payload}
    out.update({c: candidates[c].to_numpy()[rpos] for c in right_payload})
    out.update({jk: candidates[k].to_numpy()[lpos] for jk, k in zip(key_ids, keys)})
    out[ROWTIME] = np.maximum(l_t, r_t)[order]
    out[SEQ] = candidates[SEQ].to_numpy(np.int64)[tpos]
    out[STREAM_TIME] = candidates[STREAM_TIME].to_numpy()[tpos]
    out[SUB] = _rank_among_equal(out[SEQ]) + 1
    return pd.DataFrame(out)


def _rank_among_equal(values: np.ndarray) -> np.ndarray:
    """Each value's position among the equal values before it (0 for the first), in array order."""
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    at = np.arange(len(values))
    first = np.maximum.accumulate(np.where(np.r_[True, ranked[1:] != ranked[:-1]], at, 0))
    rank = np.empty(len(values), dtype=np.int64)
    rank[order] = at - first
    return rank


def _padded(recs, seqs, sub, keys, left_payload, right_payload, key_ids) -> pd.DataFrame:
    """Null-padded rows for records of either side (the other side's columns null). A column keeps its dtype
    where it has a null of its own (NaN, NaT): the rows then concatenate with the pair rows at numpy's speed."""
    if not len(recs):
        return pd.DataFrame()
    is_left = recs[SIDE].to_numpy() == LEFT
    out = {c: null_unless(recs[c].to_numpy(), is_left) for c in left_payload}
    out.update({c: null_unless(recs[c].to_numpy(), ~is_left) for c in right_payload})
    out.update({jk: recs[k].to_numpy() for jk, k in zip(key_ids, keys)})
    out[ROWTIME] = recs[ROWTIME].to_numpy(np.int64)
    out[SEQ] = np.asarray(seqs, dtype=np.int64)
    out[SUB] = np.full(len(recs), sub, dtype=np.int64)
    out[STREAM_TIME] = recs[STREAM_TIME].to_numpy()
    return pd.DataFrame(out)


def _emit_closed(store, first_match, row_ords, row_seqs, st):
    """Pending records: matched ones stop pending; those whose close stream time passed before any match
    are emitted, just before the first record of this bucket whose stream time passed their close."""
    pending = store["__pending"].to_numpy(dtype=bool)
    if not pending.any():
        return store.iloc[0:0], store
    ords = store[ORD].to_numpy()
    matched = store[ORD].map(first_match)
    match_at = np.where(matched.isna().to_numpy(), NEVER, matched.fillna(0).to_numpy().astype(np.int64))
    pos = np.searchsorted(st, store["__close"].to_numpy(np.int64), side="right")
    after_own = np.searchsorted(row_ords, ords, side="right")
    pos = np.maximum(pos, after_own)
    has_emit = pos < len(row_ords)
    emit_ord = np.where(has_emit, row_ords[np.minimum(pos, len(row_ords) - 1)], NEVER)
    emit = pending & has_emit & (emit_ord < match_at)
    resolved = pending & (match_at < NEVER) & ~emit
    emitted = store[emit].copy()
    emitted["__emit_ord"] = emit_ord[emit]
    emitted["__emit_st"] = st[np.minimum(pos, len(st) - 1)][emit]
    emitted["__emit_seq"] = row_seqs[np.minimum(pos, len(row_seqs) - 1)][emit]
    store = store.copy()
    store.loc[emit | resolved, "__pending"] = False
    return emitted, store


def emitted_rows(emitted, keys, left_payload, right_payload, key_ids) -> pd.DataFrame:
    if not len(emitted):
        return pd.DataFrame()
    emitted = emitted.sort_values(["__emit_ord", ROWTIME, ORD], kind="stable")
    out = _padded(emitted, emitted["__emit_seq"].to_numpy(), 0, keys, left_payload, right_payload, key_ids)
    out[SUB] = -len(out) + np.arange(len(out)) - 1
    out[STREAM_TIME] = emitted["__emit_st"].to_numpy(np.int64)
    return out


OPERATOR = StreamStreamJoin()
