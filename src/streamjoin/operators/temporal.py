"""Flink temporal joins: a stream looks up the version of a versioned table valid at its time.

Semantics (DIALECT §3). ``s JOIN t FOR SYSTEM_TIME AS OF s.rowtime ON s.k = t.pk`` (and ``LATERAL TABLE
(f(s.rowtime))`` over a temporal table function, whose history is an append-only stream keyed by the
function's KEY): a stream record ``s`` joins the version of its key with the largest time ``<= s.t``
(versions at exactly ``s.t`` count; of two versions with one time, the later read wins), unless that
version is a delete (a tombstone, or a change failing the table's ON predicates) — then it has no match.
INNER drops an unmatched record; LEFT emits it with the table columns null. Output time is ``s.t``.

Time is the query's watermark (``connectors.event_time``). A stream record is emitted in the micro-batch
in which the watermark passes its time (``W > s.t``), at the batch's end, in order of time: from then on, every version with a time ``<= s.t`` has been
read, because a version read later is older than the watermark. Records older than the watermark when
read (``t < W``), of either input, are late: dropped and counted (Flink would join them against whatever
versions it had not yet cleaned up, which depends on timing). ``FOR SYSTEM_TIME AS OF`` a processing-time
attribute is the latest version as of ingestion order: the stream-table join (``operators.stream_table``).

Algorithm: both inputs are unioned and grouped by a hash bucket of the join key, with one tick row per
bucket carrying the batch-end watermark. In each bucket a micro-batch appends its versions to the stored
ones, takes the waiting records whose time the batch-end watermark passed and looks them up with an as-of
merge on (key, time).

State (per bucket, one pickled value): the versions still reachable and the stream records waiting for
the watermark, and the counts of dropped records. Purge: once the watermark is ``W``, every later lookup
is at a time ``>= W``, so for each key only the latest version at or before ``W`` (if it is not a delete)
and the versions after ``W`` are kept; a waiting record leaves state when it is emitted.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.types import LongType, StructField, StructType

from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, Join
from .base import LoweringContext
from .keyed_inputs import (
    BUCKET, DELETE, NO_TIME, NULL_KEY, OK, SIDE, TICK, bucketed, clock_values, count_dropped, integral_columns, key_names, payload,
    restore_integers, tag_side, take, tick_rows,
)
from .state import run_bucketed
from .stream_table import OPERATOR as STREAM_TABLE

STREAM, VERSION = 0, 1
ORD, ALIVE = "__ord", "__alive"
ORDER_SCALE = 1_000_000  # _sub of an emitted row: its time, then its ingestion order


class TemporalJoin:
    def lower(self, join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext) -> DataFrame:
        if join.shape == "temporal-proctime":
            return STREAM_TABLE.lower(join, left, right, ctx)
        keys = key_names(len(join.key))
        stream_cols, table_cols = payload(left), payload(right)
        data = tag_side(left, STREAM, join.left_side.keys, join.left_side.filter, keys).unionByName(
            tag_side(right, VERSION, join.right_side.keys, join.right_side.filter, keys, join.right),
            allowMissingColumns=True)
        data = bucketed(data, keys, ctx.time_buckets).unionByName(tick_rows(ctx), allowMissingColumns=True)
        types = {f.name: f.dataType for f in data.schema.fields}
        schema = StructType(
            [StructField(c, types[c]) for c in stream_cols + table_cols]
            + [StructField(jk, types[k]) for jk, k in zip(join.key, keys)]
            + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB, STREAM_TIME)]
        )
        step = _bucket_step(keys, integral_columns(data, keys), stream_cols, table_cols, list(join.key),
                            join.join_type == "LEFT")
        return run_bucketed(data, BUCKET, step, schema)


def _bucket_step(keys, integral_keys, stream_cols, table_cols, key_ids, outer: bool):
    version_cols = keys + [ROWTIME, ORD, ALIVE] + table_cols
    waiting_cols = keys + [ROWTIME, SEQ, SUB, OK] + stream_cols

    def step(saved, rows: pd.DataFrame):
        saved = saved or {"store": pd.DataFrame(columns=version_cols), "waiting": pd.DataFrame(columns=waiting_cols),
                          "ord": 0, "dropped": {}}
        rows = rows.sort_values([SEQ, SUB, SIDE], kind="stable").reset_index(drop=True)
        clock = clock_values(rows[STREAM_TIME])
        data = restore_integers(rows[rows[SIDE] != TICK].copy(), integral_keys)
        times = data[ROWTIME].to_numpy(dtype=float)  # NaN: a record without an event time
        no_time = np.isnan(times)
        late = ~no_time & (times < clock_values(data[STREAM_TIME]))
        count_dropped(saved, "late", late.sum())
        count_dropped(saved, "no_time", no_time.sum())
        usable = ~late & ~no_time
        null_key = data[NULL_KEY].to_numpy(dtype=bool)
        is_version = data[SIDE].to_numpy() == VERSION
        count_dropped(saved, "null_key", (usable & null_key & (is_version | (not outer))).sum())

        versions = data[usable & is_version & ~null_key].copy()
        versions[ORD] = saved["ord"] + np.arange(len(versions), dtype=np.int64)
        versions[ALIVE] = versions[OK].to_numpy(dtype=bool) & ~versions[DELETE].to_numpy(dtype=bool)
        saved["ord"] += len(versions)
        store = _concat(saved["store"], versions[version_cols])

        arriving = data[usable & ~is_version & (outer | ~null_key)].copy()  # LEFT: a null key waits, to be padded
        arriving[OK] = arriving[OK].to_numpy(dtype=bool) & ~arriving[NULL_KEY].to_numpy(dtype=bool)
        waiting = _concat(saved["waiting"], arriving[waiting_cols])
        due = waiting[ROWTIME].to_numpy(dtype=np.int64) < (clock[-1] if len(clock) else NO_TIME)  # clock is sorted
        out = _emit(waiting[due], rows, store, keys, stream_cols, table_cols, key_ids, outer)
        saved["waiting"] = waiting[~due].reset_index(drop=True)
        saved["store"] = _purge(store, keys, int(clock[-1]) if len(clock) else NO_TIME)
        saved["rows"] = len(saved["store"]) + len(saved["waiting"])
        return out, saved

    return step


def _emit(due: pd.DataFrame, rows: pd.DataFrame, store: pd.DataFrame, keys, stream_cols,
          table_cols, key_ids, outer: bool) -> pd.DataFrame:
    """Join the due stream records with the version valid at their time, in the order they fall due."""
    if not len(due):
        return pd.DataFrame()
    due = due.sort_values([ROWTIME, SEQ, SUB], kind="stable").reset_index(drop=True)
    found = _as_of(due, store, keys)
    matched = due[OK].to_numpy(dtype=bool) & (found >= 0)
    matched[matched] = store[ALIVE].to_numpy(dtype=bool)[found[matched]]
    out = pd.DataFrame({c: due[c].to_numpy() for c in stream_cols})
    for c in table_cols:
        out[c] = take(store[c].to_numpy(), found, matched)
    for jk, k in zip(key_ids, keys):
        out[jk] = due[k].to_numpy()
    # Every record due in this batch leaves at the batch's end (its tick), ordered by (time, ingestion order):
    # the order in which the watermark passes them, whatever the cut. (The exact record whose watermark
    # passed each one may be in another bucket.)
    times = due[ROWTIME].to_numpy(dtype=np.int64)
    out[ROWTIME] = times
    out[SEQ] = int(rows[SEQ].iloc[-1])
    out[SUB] = times * ORDER_SCALE + due[SEQ].to_numpy(dtype=np.int64) % ORDER_SCALE
    out[STREAM_TIME] = rows[STREAM_TIME].iloc[-1]
    return out if outer else out[matched].reset_index(drop=True)


def _as_of(due: pd.DataFrame, store: pd.DataFrame, keys) -> np.ndarray:
    """Per due record, the position in ``store`` of its key's latest version at or before its time (-1: none)."""
    probes = due[~due[keys].isna().any(axis=1)]
    if not len(store) or not len(probes):
        return np.full(len(due), -1)
    versions = store[keys + [ROWTIME, ORD]].assign(__at=np.arange(len(store)))
    versions[ROWTIME] = versions[ROWTIME].astype(np.int64)
    versions = versions.sort_values([ROWTIME, ORD], kind="stable")
    left = probes[keys + [ROWTIME]].assign(__row=probes.index.to_numpy())
    left[ROWTIME] = left[ROWTIME].astype(np.int64)
    merged = pd.merge_asof(left.sort_values(ROWTIME, kind="stable"), versions[keys + [ROWTIME, "__at"]],
                           on=ROWTIME, by=keys, direction="backward", allow_exact_matches=True)
    found = np.full(len(due), -1)
    hit = merged["__at"].notna().to_numpy()
    found[merged["__row"].to_numpy()[hit]] = merged["__at"].to_numpy()[hit].astype(np.int64)
    return found


def _purge(store: pd.DataFrame, keys, watermark: int) -> pd.DataFrame:
    """Keep, per key, the latest version at or before the watermark (unless it is a delete) and every later one."""
    if not len(store) or watermark == NO_TIME:
        return store
    store = store.sort_values(keys + [ROWTIME, ORD], kind="stable").reset_index(drop=True)
    base = store[ROWTIME].to_numpy(dtype=np.int64) <= watermark
    same_key_next = np.ones(len(store), dtype=bool)
    for k in keys:
        values = store[k].to_numpy()
        same_key_next[:-1] &= values[1:] == values[:-1]
    same_key_next[-1] = False
    last_base = base & ~(same_key_next & np.append(base[1:], False))
    keep = ~base | (last_base & store[ALIVE].to_numpy(dtype=bool))
    return store[keep].reset_index(drop=True)


def _concat(stored: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    if not len(stored):
        return new.reset_index(drop=True)
    return pd.concat([stored, new], ignore_index=True) if len(new) else stored


OPERATOR = TemporalJoin()
