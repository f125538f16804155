"""SQLstream stream-table join whose stream side has an OVER window: every table row, every frame.

Semantics (DIALECT §3, stream ⋈ table, the exception for OVER frames). Each stream row looks up the table
row of its key as of ingestion order, as in the plain stream-table join, and a matched pair leaves at
once with the stream row's rowtime. When the table side is preserved (``stream RIGHT JOIN table``,
``table LEFT JOIN stream``, FULL) the stream side must have a tumbling frame (``ORDER BY FLOOR(ROWTIME TO
unit) RANGE CURRENT ROW``): when stream time enters a later frame, the frames it leaves are closed, and for
each of them every live table row that no stream row matched in that frame is emitted null-padded, with
the frame's end as rowtime. Frames are counted from the first record the bucket reads; a jump of stream
time over several frames closes each of them. In FULL, a stream row without a table row is also emitted
null-padded at once. INNER and stream-preserving joins ignore the window and are the plain stream-table
join (``operators.stream_table``).

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
from pyspark.sql import DataFrame
from pyspark.sql.types import LongType, StructField, StructType

from ..plan.frames import frame_of
from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, Join
from .base import LoweringContext
from .keyed_inputs import BUCKET, DELETE, NO_TIME, OK, SIDE, TICK, bucketed, clock_values, key_names, payload, tag_side, tick_rows
from .state import run_keyed
from .stream_table import OPERATOR as STREAM_TABLE

STREAM, TABLE = 0, 1


class FramedTableJoin:
    def lower(self, join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext) -> DataFrame:
        stream_on_left = join.left.kind == "STREAM"
        preserved = {"LEFT": ("left",), "RIGHT": ("right",), "FULL": ("left", "right")}.get(join.join_type, ())
        table_preserved = ("right" if stream_on_left else "left") in preserved
        if not table_preserved:
            return STREAM_TABLE.lower(join, left, right, ctx)
        stream_side, table_side = (join.left_side, join.right_side) if stream_on_left else (join.right_side, join.left_side)
        stream, table = (left, right) if stream_on_left else (right, left)
        keys = key_names(len(join.key))
        data = tag_side(stream, STREAM, stream_side.keys, stream_side.filter, keys).unionByName(
            tag_side(table, TABLE, table_side.keys, table_side.filter, keys, join.right if stream_on_left else join.left),
            allowMissingColumns=True)
        both = bucketed(data, keys, ctx.time_buckets).unionByName(tick_rows(ctx), allowMissingColumns=True)
        left_payload, right_payload = payload(left), payload(right)
        types = {f.name: f.dataType for f in both.schema.fields}
        schema = StructType(
            [StructField(c, types[c]) for c in left_payload + right_payload]
            + [StructField(jk, types[k]) for jk, k in zip(join.key, keys)]
            + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB, STREAM_TIME)]
        )
        unit = frame_of(stream_side.window).unit
        step = framed_step(unit, keys, payload(stream), payload(table), list(join.key), schema.fieldNames(),
                           stream_padded=len(preserved) == 2)
        return run_keyed(both, [BUCKET], step, schema)


def framed_step(unit: int, keys, stream_cols, table_cols, key_ids, out_names, stream_padded: bool):
    def step(saved, rows: pd.DataFrame):
        saved = saved or {"table": {}, "frame": None, "matched": set()}
        rows = rows.sort_values([SEQ, SUB, SIDE], kind="stable").reset_index(drop=True)
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
        if saved["frame"] is None:
            saved["frame"] = frame
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
