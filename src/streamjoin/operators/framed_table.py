"""SQLstream stream-table join whose stream side has an OVER window: every table row, every frame.

Semantics (DIALECT §3, stream ⋈ table, the exception for OVER frames). Each stream row looks up the table
row of its key as of ingestion order, as in the plain stream-table join, and a matched pair leaves at
once with the stream row's rowtime. When the table side is preserved (``stream RIGHT JOIN table``,
``table LEFT JOIN stream``, FULL) the stream side must have a tumbling frame (``ORDER BY FLOOR(ROWTIME TO
unit) RANGE CURRENT ROW``): when stream time enters a later frame, the frames it leaves are closed, and for
each of them every live table row that no stream row matched in that frame is emitted null-padded, with
the frame's end as rowtime. Frames are counted from the query's first stream time (every bucket sees it
on the first batch's tick rows); a jump of stream time over several frames closes each of them. In FULL, a stream row without a table row is also emitted
null-padded at once. INNER and stream-preserving joins ignore the window: the planner gives them to the
plain stream-table join (``operators.stream_table``).

A table read from a file (SQLstream's static table) is loaded at query start, and each bucket's state
starts with its share of it.

Algorithm: both inputs and the batch's tick rows are grouped into state buckets by a hash of the join key
(the table's primary key). A bucket's micro-batch, in ingestion order, is cut where stream time enters a
later frame; each run between cuts is joined vectorised as in ``operators.stream_table`` (every stream
record looks up the latest earlier change of its key in the run, else the table as the run starts), and at
each cut the frames left are closed: the live table rows outside the closing frame's matched keys, then
every live row for each empty frame skipped.

State (per bucket, segmented: ``operators.state.run_segmented``): the live table rows as a log of change
chunks (``state.log_changes``: a batch writes only its own changes); the keys matched in the frame in
progress, one segment rewritten only when a batch adds to it or a frame closes; and, in the meta value, the
frame in progress. A tombstone (or a table row failing the join's table predicates) removes its key; the
matched keys are cleared when their frame closes; nothing else is purged. Closing a frame reads the whole
bucket's table: its output is every unmatched live row.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from ..plan.frames import frame_of
from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, Join
from .base import DeclaredState, LoweringContext
from .keyed_inputs import (
    BUCKET, DELETE, NO_TIME, NULL_KEY, OK, SIDE, TICK, bucketed, clock_values, integral_columns, key_index, key_names,
    payload, restore_integers, tag_side, tick_rows,
)
from .state import GONE, apply_changes, log_changes, new_table_log, read_table, run_segmented
from .stream_table import last_changes, lookup

STREAM, TABLE = 0, 1
MATCHED = -1  # segment number of the keys matched in the frame in progress (the table's chunks: 0, 1, ...)


STATE = DeclaredState(
    "framed_table", 1,
    keeps="the table's live rows, and the keys matched in the frame in progress",
    segments="chunks of the table's change log; one segment of matched keys",
    purged="a table row at its delete; the matched keys when their frame closes")


class FramedTableJoin:
    def state(self, join: Join) -> DeclaredState:
        return STATE

    def lower(self, join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext) -> DataFrame:
        stream_on_left = join.left.kind == "STREAM"
        preserved = {"LEFT": ("left",), "RIGHT": ("right",), "FULL": ("left", "right")}.get(join.join_type, ())
        stream_side, table_side = (join.left_side, join.right_side) if stream_on_left else (join.right_side, join.left_side)
        stream, table = (left, right) if stream_on_left else (right, left)
        keys = key_names(len(join.key))
        data = tag_side(stream, STREAM, stream_side, keys)
        tagged = tag_side(table, TABLE, table_side, keys, join.right if stream_on_left else join.left)
        static: dict = {}
        if tagged.isStreaming:
            data = data.unionByName(tagged, allowMissingColumns=True)
        else:  # a table read from a file: loaded now, each bucket starts with its share
            static = _load_static(tagged, keys, payload(table), ctx.time_buckets)
        both = bucketed(data, keys, ctx.time_buckets).unionByName(tick_rows(ctx), allowMissingColumns=True)
        left_payload, right_payload = payload(left), payload(right)
        types = {f.name: f.dataType for df in (tagged, both) for f in df.schema.fields}
        schema = StructType(
            [StructField(c, types[c]) for c in left_payload + right_payload]
            + [StructField(jk, types[k]) for jk, k in zip(join.key, keys)]
            + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB, STREAM_TIME)]
        )
        unit = frame_of(stream_side.window).unit
        step = framed_step(unit, keys, integral_columns(both, keys), payload(stream), payload(table), list(join.key),
                           schema.fieldNames(), stream_padded=len(preserved) == 2, static=static)
        return run_segmented(both, BUCKET, step, schema, ctx)


def _load_static(table: DataFrame, keys, table_cols, buckets: int) -> dict:
    """A bounded table's live rows (the last line of a key wins) by state bucket: bucket -> key -> row."""
    latest = table.withColumn("__rank", F.row_number().over(Window.partitionBy(*keys).orderBy(F.col(SEQ).desc())))
    live = latest.where((F.col("__rank") == 1) & F.col(OK) & ~F.col(DELETE))
    static: dict = {}
    for row in bucketed(live, keys, buckets).select(BUCKET, *keys, *table_cols).collect():
        static.setdefault(row[BUCKET], {})[tuple(row[k] for k in keys)] = {c: row[c] for c in table_cols}
    return static


def framed_step(unit: int, keys, integral_keys, stream_cols, table_cols, key_ids, out_names, stream_padded: bool,
                static=None):
    """The per-bucket step ``(meta, rows, segments) -> (output, meta)``. ``static``: bucket -> key -> row of a
    table read from a file (each bucket's table starts as its share), or empty when the table is a changelog."""
    def step(meta, rows: pd.DataFrame, segments):
        if meta is None:
            meta = {"table": new_table_log(), "frame": None, "matched": False, "rows": 0, "dropped": {}}
            _seed(meta, segments, (static or {}).get(int(rows[BUCKET].iloc[0]), {}), keys, table_cols)
        rows = rows.sort_values([SEQ, SUB, SIDE], kind="stable").reset_index(drop=True)
        side = rows[SIDE].to_numpy()
        st = clock_values(rows[STREAM_TIME])
        if meta["frame"] is None:  # frames count from the query's first clock (a tick's rowtime: its batch's first)
            first = clock_values(np.where(side == TICK, rows[ROWTIME], rows[STREAM_TIME]))
            if (first != NO_TIME).any():
                meta["frame"] = int(first[first != NO_TIME].min()) // unit
        if meta["frame"] is None:  # no clock yet, so no frame to close: the records alone
            frames = np.zeros(len(rows), np.int64)
        else:  # the frame in progress when each row is read
            frames = np.maximum.accumulate(np.where(st != NO_TIME, st // unit, meta["frame"]).clip(meta["frame"]))
        table = read_table(meta["table"], segments, keys, table_cols)
        matched = segments.get(MATCHED).set_axis(keys, axis=1) if meta["matched"] else pd.DataFrame(columns=keys)
        matched_before = len(matched)
        null_key = rows[NULL_KEY].to_numpy(dtype=object) == True  # noqa: E712 - ticks carry None
        out = [_padded_records(rows[null_key & (side == STREAM)], stream_cols, table_cols, key_ids)] if stream_padded else []
        records = restore_integers(rows[~null_key & (side != TICK)], integral_keys)
        # a table read from a file sends no rows, so its columns may be absent from the batch
        records = records.reindex(columns=[*records.columns, *(c for c in table_cols if c not in records.columns)])
        cuts = np.flatnonzero(np.diff(frames, prepend=frames[:1] if meta["frame"] is None else meta["frame"]) > 0)
        bounds = np.searchsorted(records.index.to_numpy(), [*cuts.tolist(), len(rows)])
        for i, (a, b) in enumerate(zip([0, *bounds[:-1]], bounds)):
            joined, table, matched = _join_run(records.iloc[a:b], table, matched, keys, stream_cols, table_cols, key_ids,
                                               stream_padded)
            out.append(joined)
            if i < len(cuts):
                cut = cuts[i]
                out.append(_close(meta, int(frames[cut]), unit, table, matched, keys, stream_cols, key_ids,
                                  int(rows[SEQ].iloc[cut]), int(st[cut])))
                matched = matched.iloc[:0]
        log_changes(meta["table"], segments, last_changes(records[records[SIDE] == TABLE], keys, table_cols), table, keys)
        if len(cuts) or len(matched) != matched_before:  # a frame closed, or the open frame matched more keys
            _store_matched(meta, segments, matched)
        meta["rows"] = len(table)
        produced = [o for o in out if len(o)]
        result = pd.concat(produced, ignore_index=True) if produced else pd.DataFrame(columns=out_names)
        return result.reindex(columns=out_names), meta

    return step


def _seed(meta, segments, rows: dict, keys, table_cols) -> None:
    """A bucket's share of a table read from a file, as its table's first chunk."""
    if rows:
        changes = pd.DataFrame([(*key, *(row[c] for c in table_cols), False) for key, row in rows.items()],
                               columns=keys + table_cols + [GONE])
        apply_changes(meta["table"], segments, read_table(meta["table"], segments, keys, table_cols), changes, keys)


def _join_run(run, table, matched, keys, stream_cols, table_cols, key_ids, stream_padded: bool):
    """One run of records read within one frame: the stream records joined (``stream_table.lookup``), the
    table (a ``state.LiveTable``) changed in place by the run's changes, and the frame's matched keys with the
    run's."""
    if not len(run):
        return run.iloc[:0], table, matched
    out, unmatched = lookup(run.reset_index(drop=True), table, keys, stream_cols, table_cols, key_ids, outer=True)
    found = (run[run[SIDE] == STREAM][OK].to_numpy(dtype=bool)) & ~unmatched
    if found.any():
        hits = out[found][key_ids].set_axis(keys, axis=1)
        matched = pd.concat([matched, hits], ignore_index=True).drop_duplicates(keys, ignore_index=True)
    if not stream_padded:
        out = out[found]
    table.apply(last_changes(run[run[SIDE] == TABLE], keys, table_cols))
    return out, table, matched


def _close(meta, frame: int, unit: int, table, matched, keys, stream_cols, key_ids, seq: int, now: int) -> pd.DataFrame:
    """Close every frame before ``frame``: for the one in progress, the live table rows it matched no stream
    record with; for each later (empty) one, every live row; each at its frame's end, emitted at ``seq``."""
    table = table.frame()
    silent = table[~key_index(table, keys).isin(key_index(matched, keys))] if len(matched) and len(table) else table
    closing = []
    for f in range(meta["frame"], frame):
        rows = silent if f == meta["frame"] else table
        closing.append(rows.assign(**{ROWTIME: (f + 1) * unit}))
    meta["frame"] = frame
    padded = pd.concat(closing, ignore_index=True) if closing else table.iloc[:0]
    padded = padded.rename(columns=dict(zip(keys, key_ids)))
    return padded.assign(**{c: None for c in stream_cols}, **{SEQ: seq, STREAM_TIME: now},
                         **{SUB: -10**9 + np.arange(len(padded), dtype=np.int64)})


def _padded_records(records, stream_cols, table_cols, key_ids) -> pd.DataFrame:
    """Stream records with a null join key: they match nothing, and leave padded at once."""
    return records[stream_cols + [ROWTIME, SEQ, SUB, STREAM_TIME]].assign(
        **{c: None for c in [*table_cols, *key_ids]}).reset_index(drop=True)


def _store_matched(meta, segments, matched) -> None:
    if len(matched):
        segments.put(MATCHED, matched.reset_index(drop=True))
    elif meta["matched"]:
        segments.remove(MATCHED)
    meta["matched"] = bool(len(matched))


OPERATOR = FramedTableJoin()
