"""Table-table join on both primary keys (KSQL): a changelog in on each side, a changelog out.

Semantics (DIALECT §3, the KSQL semantic table). Each change of either table, in ingestion order, updates
that side's row for its key (a tombstone deletes it) and re-evaluates the key's result row:
- the row exists when INNER: both sides are present and match; LEFT: the left side is present; RIGHT: the
  right side; FULL: either. "Match" also requires each side's one-input ON predicates;
- if it exists, it is emitted (an upsert), with a side's columns null where that side is absent or, for
  the preserved side's partner, does not match;
- if it does not exist but did before this change, a tombstone is emitted; otherwise nothing.
Output time is the later of the change's own time and the other side's row time.

Algorithm: both changelogs are unioned and grouped by a hash bucket of the key (``operators.keyed_inputs``).
In a bucket, the stored rows of the keys this micro-batch touches are put ahead of the batch's changes;
a forward fill per key then gives, after every change, the position of each side's current row, from
which presence, the result and the previous result (the same, one change earlier) follow for the whole
batch at once. Results do not depend on batch cuts.

State (per bucket, segmented: ``operators.state``): the current row of each side per key — its columns,
time and whether it matches — as one table keyed by (side, key), kept as a log of change chunks like the
stream-table join's (a batch writes its own changes; the worker's cached table is used while it matches
the store). A tombstone removes its side's row at once; a key whose two sides are both deleted holds
nothing.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.types import BooleanType, LongType, StructField, StructType

from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, TOMBSTONE, Join
from .base import DeclaredState, LoweringContext
from .keyed_inputs import (
    BUCKET, DELETE, NULL_KEY, OK, SIDE, bucketed, drop_records, integral_columns, key_index, key_names, payload,
    restore_integers, tag_side, take,
)
from .state import GONE, apply_changes, new_table_log, read_table, run_segmented

LEFT, RIGHT = 0, 1


STATE = DeclaredState(
    "table_table", 1,
    keeps="the current row of each side per key: columns, time, whether it matches",
    segments="chunks of the change log",
    purged="a side's row at its tombstone")


class TableTableJoin:
    def state(self, join: Join) -> DeclaredState:
        return STATE

    def lower(self, join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext) -> DataFrame:
        keys = key_names(len(join.key))
        left_cols, right_cols = payload(left), payload(right)
        data = tag_side(left, LEFT, join.left_side, keys, join.left).unionByName(
            tag_side(right, RIGHT, join.right_side, keys, join.right), allowMissingColumns=True)
        data = bucketed(data, keys, ctx.time_buckets)
        types = {f.name: f.dataType for f in data.schema.fields}
        schema = StructType(
            [StructField(c, types[c]) for c in left_cols + right_cols]
            + [StructField(jk, types[k]) for jk, k in zip(join.key, keys)]
            + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB, STREAM_TIME)]
            + [StructField(TOMBSTONE, BooleanType())]
        )
        outer = (join.join_type in ("LEFT", "FULL"), join.join_type in ("RIGHT", "FULL"))
        step = _bucket_step(keys, integral_columns(data, keys), left_cols, right_cols, list(join.key), outer)
        return run_segmented(data, BUCKET, step, schema, ctx)


def _bucket_step(keys, integral_keys, left_cols, right_cols, key_ids, outer):
    """The per-bucket step over segmented state: both sides' rows in one table keyed by (side, key), kept
    as a log of change chunks (``state.read_table``)."""
    row_key, columns = [SIDE] + keys, [OK, ROWTIME] + left_cols + right_cols

    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"dropped": {}, "rows": 0, "table": new_table_log()}
        null_key = rows[NULL_KEY].to_numpy(dtype=bool)
        drop_records(meta, "null_key", rows, null_key)
        rows = restore_integers(rows[~null_key], integral_keys)
        rows = rows.sort_values([SEQ, SUB, SIDE], kind="stable").reset_index(drop=True)
        store = read_table(meta["table"], segments, row_key, columns)
        wanted = rows[keys].drop_duplicates()
        touched = store.rows_for(pd.concat([wanted.assign(**{SIDE: side}) for side in (LEFT, RIGHT)], ignore_index=True))
        prior = touched.assign(**{DELETE: False, "__new": False})
        frame = pd.concat([prior, rows.assign(__new=True)], ignore_index=True) if len(prior) else rows.assign(__new=True)
        out = _changes(frame, keys, left_cols, right_cols, key_ids, outer)
        last = rows.drop_duplicates(row_key, keep="last")
        changes = last[row_key + columns].assign(**{GONE: last[DELETE].to_numpy(dtype=bool)}).reset_index(drop=True)
        table = apply_changes(meta["table"], segments, store, changes, row_key)
        meta["rows"] = len(table)
        return out, meta

    return step


def _changes(frame, keys, left_cols, right_cols, key_ids, outer) -> pd.DataFrame:
    """One output row per change whose result row exists after it, or existed before it."""
    n = len(frame)
    group = pd.Series(pd.factorize(key_index(frame, keys))[0])
    side = frame[SIDE].to_numpy()
    deleted, ok = frame[DELETE].to_numpy(dtype=bool), frame[OK].to_numpy(dtype=bool)
    times = frame[ROWTIME].to_numpy(dtype=np.int64)
    current = {}
    for s in (LEFT, RIGHT):  # per change: position of each side's current row (-1: none yet)
        pos = pd.Series(np.where(side == s, np.arange(n), np.nan)).groupby(group).ffill().to_numpy()
        has = ~np.isnan(pos)
        pos = np.where(has, pos, 0).astype(np.int64)
        present = has & ~deleted[pos]
        current[s] = (pos, present, present & ok[pos])
    (lpos, lp, lok), (rpos, rp, rok) = current[LEFT], current[RIGHT]
    matched = lok & rok
    show_left = lp & (matched | outer[0])
    show_right = rp & (matched | outer[1])
    exists = matched | show_left | show_right
    before = pd.Series(exists).groupby(group).shift(1, fill_value=False).to_numpy(dtype=bool)
    emit = frame["__new"].to_numpy(dtype=bool) & (exists | before)
    other_time = np.where(side == LEFT, np.where(rp, times[rpos], times), np.where(lp, times[lpos], times))
    out = pd.DataFrame(index=range(int(emit.sum())))
    for cols, pos, show in ((left_cols, lpos, show_left), (right_cols, rpos, show_right)):
        for c in cols:
            out[c] = take(frame[c].to_numpy(), pos[emit], show[emit])
    for jk, k in zip(key_ids, keys):
        out[jk] = frame[k].to_numpy()[emit]
    out[ROWTIME] = np.maximum(times, other_time)[emit]
    for c in (SEQ, SUB, STREAM_TIME):  # stored rows ahead of the batch have none: they never emit
        out[c] = frame[c].to_numpy()[emit].astype(np.int64)
    out[TOMBSTONE] = ~exists[emit]
    return out


OPERATOR = TableTableJoin()
