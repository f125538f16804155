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
(the table's primary key); each bucket walks its micro-batch in ingestion order, record at a time,
closing frames as stream time crosses their ends.

State (per bucket): the live table rows by key, the frame in progress and the keys matched in it. A
tombstone (or a table row failing the join's table predicates) removes its key; the matched set is
cleared when its frame closes; nothing else is purged.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from ..plan.frames import frame_of
from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, Join
from .base import LoweringContext
from .keyed_inputs import BUCKET, DELETE, NO_TIME, OK, SIDE, TICK, bucketed, clock_values, key_names, payload, tag_side, tick_rows
from .state import run_bucketed

STREAM, TABLE = 0, 1


class FramedTableJoin:
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
        step = framed_step(unit, keys, payload(stream), payload(table), list(join.key), schema.fieldNames(),
                           stream_padded=len(preserved) == 2, static=static)
        return run_bucketed(both, BUCKET, step, schema)


def _load_static(table: DataFrame, keys, table_cols, buckets: int) -> dict:
    """A bounded table's live rows (the last line of a key wins) by state bucket: bucket -> key -> row."""
    latest = table.withColumn("__rank", F.row_number().over(Window.partitionBy(*keys).orderBy(F.col(SEQ).desc())))
    live = latest.where((F.col("__rank") == 1) & F.col(OK) & ~F.col(DELETE))
    static: dict = {}
    for row in bucketed(live, keys, buckets).select(BUCKET, *keys, *table_cols).collect():
        static.setdefault(row[BUCKET], {})[tuple(row[k] for k in keys)] = {c: row[c] for c in table_cols}
    return static


def framed_step(unit: int, keys, stream_cols, table_cols, key_ids, out_names, stream_padded: bool, static=None):
    """``static``: bucket -> the rows of a table read from a file, or empty when the table is a changelog."""
    def step(saved, rows: pd.DataFrame):
        if saved is None:
            saved = {"table": dict((static or {}).get(int(rows[BUCKET].iloc[0]), {})), "frame": None, "matched": set()}
        rows = rows.sort_values([SEQ, SUB, SIDE], kind="stable").reset_index(drop=True)
        if saved["frame"] is None:  # frames count from the query's first clock (a tick's rowtime: its batch's first)
            first = clock_values(np.where(rows[SIDE] == TICK, rows[ROWTIME], rows[STREAM_TIME]))
            if (first != NO_TIME).any():
                saved["frame"] = int(first[first != NO_TIME].min()) // unit
        out: list[dict] = []
        st = clock_values(rows[STREAM_TIME])
        side = rows[SIDE].to_numpy()
        seq = rows[SEQ].to_numpy(np.int64)
        for i in range(len(rows)):
            if st[i] != NO_TIME:
                _close_frames(saved, int(st[i]) // unit, unit, int(seq[i]), int(st[i]), out)
            if side[i] == TICK:
                continue
            row = rows.iloc[i]
            key = tuple(row[k] for k in keys)
            if side[i] == TABLE:
                if bool(row[OK]) and not bool(row[DELETE]):
                    saved["table"][key] = {c: row[c] for c in table_cols}
                else:
                    saved["table"].pop(key, None)
                continue
            match = saved["table"].get(key) if bool(row[OK]) else None
            if match is None and not stream_padded:
                continue
            if match is not None:
                saved["matched"].add(key)
            out.append({**{c: row[c] for c in stream_cols}, **(match or {}), **dict(zip(key_ids, key)),
                        ROWTIME: row[ROWTIME], SEQ: row[SEQ], SUB: row[SUB], STREAM_TIME: row[STREAM_TIME]})
        frame = pd.DataFrame(out, columns=out_names, dtype=object)  # nullable columns stay None, not NaN
        for c in (ROWTIME, SEQ, SUB, STREAM_TIME):
            frame[c] = frame[c].astype(np.int64)
        return frame, saved

    def _close_frames(saved, frame: int, unit: int, seq: int, now: int, out: list) -> None:
        sub = -10**9  # before the record's own output, in the order emitted
        while saved["frame"] < frame:
            end = (saved["frame"] + 1) * unit
            for key, values in saved["table"].items():
                if key not in saved["matched"]:
                    out.append({**values, **dict(zip(key_ids, key)), ROWTIME: end, SEQ: seq, SUB: sub, STREAM_TIME: now})
                    sub += 1
            saved["matched"] = set()
            saved["frame"] += 1

    return step


OPERATOR = FramedTableJoin()
