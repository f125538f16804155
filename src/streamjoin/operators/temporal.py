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
attribute is the latest version as of ingestion order: the planner gives it to the stream-table join
(``operators.stream_table``).

Algorithm: both inputs are unioned and grouped by a hash bucket of the join key, with one tick row per
bucket carrying the batch-end watermark ``W``. In each bucket a micro-batch adds its versions to the
*pending* ones and its stream records to the *waiting* ones, looks the waiting records whose time ``W``
passed up (the latest pending version at or before their time, by an as-of merge on key and time, else
the key's *base* row), then folds every pending version at or before ``W`` into the base: per key the
latest of them replaces the base row, or removes it if it is a delete.

State (per bucket, segmented: ``operators.state``): the base — per key the version valid at the
watermark, if it is not a delete; a table log of change chunks (``state.log_changes``), so a batch writes
only the keys whose base it changed; the pending versions (after the watermark) and the waiting records,
one segment each; and, in the bucket's meta value, the earliest time among each of those two, the counts
of dropped records and of rows held. A batch with nothing new whose watermark reaches neither earliest
time reads and writes nothing. Purge: a waiting record leaves when it is emitted; a pending version
leaves for the base when the watermark passes it; a base row is replaced by its key's next version, or
removed by a delete. Every lookup after watermark ``W`` is at a time ``>= W``, so nothing else is needed.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.types import LongType, StructField, StructType

from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, Join
from .base import DeclaredState, LoweringContext
from .keyed_inputs import (
    BUCKET, DELETE, NO_TIME, NULL_KEY, OK, SIDE, TICK, bucketed, clock_values, count_dropped, drop_records, integral_columns,
    key_names, payload, restore_integers, tag_side, take, tick_only_clock, tick_rows,
)
from .state import GONE, apply_changes, new_table_log, read_table, run_segmented

STREAM, VERSION = 0, 1
ORD, ALIVE = "__ord", "__alive"
ORDER_SCALE = 1_000_000  # _sub of an emitted row: its time, then its ingestion order


STATE = DeclaredState(
    "temporal", 1,
    keeps="per key the version valid at the watermark; versions after the watermark; stream records waiting "
          "for the watermark",
    segments="chunks of the valid versions' change log; one segment of later versions, one of waiting records",
    purged="a waiting record when emitted; a version when the next one of its key becomes valid, or at a delete")


class TemporalJoin:
    def state(self, join: Join) -> DeclaredState:
        return STATE

    def lower(self, join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext) -> DataFrame:
        keys = key_names(len(join.key))
        stream_cols, table_cols = payload(left), payload(right)
        data = tag_side(left, STREAM, join.left_side, keys).unionByName(
            tag_side(right, VERSION, join.right_side, keys, join.right),
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
        return run_segmented(data, BUCKET, step, schema, ctx, idle=_idle)


PENDING, WAITING = -1, -2  # segment numbers (the base's change chunks are numbered from 0)
EARLIEST = {PENDING: "pending_from", WAITING: "waiting_from"}  # in meta: the earliest time in each, None if empty


def _bucket_step(keys, integral_keys, stream_cols, table_cols, key_ids, outer: bool):
    version_cols = keys + [ROWTIME, ORD, ALIVE] + table_cols
    waiting_cols = keys + [ROWTIME, SEQ, SUB, OK] + stream_cols

    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"table": new_table_log(), "base_rows": 0, "ord": 0, "dropped": {}, "rows": 0,
                        **{name: None for name in EARLIEST.values()}}
        rows = rows.sort_values([SEQ, SUB, SIDE], kind="stable").reset_index(drop=True)
        clock = clock_values(rows[STREAM_TIME])
        end = int(clock[-1]) if len(clock) else NO_TIME  # clock is sorted
        data = restore_integers(rows[rows[SIDE] != TICK].copy(), integral_keys)
        times = data[ROWTIME].to_numpy(dtype=float)  # NaN: a record without an event time
        no_time = np.isnan(times)
        late = ~no_time & (times < clock_values(data[STREAM_TIME]))
        drop_records(meta, "late", data, late)
        count_dropped(meta, "no_time", no_time.sum())
        usable = ~late & ~no_time
        null_key = data[NULL_KEY].to_numpy(dtype=bool)
        is_version = data[SIDE].to_numpy() == VERSION
        drop_records(meta, "null_key", data, usable & null_key & (is_version | (not outer)))

        versions = data[usable & is_version & ~null_key].copy()
        arriving = data[usable & ~is_version & (outer | ~null_key)].copy()  # LEFT: a null key waits, to be padded
        if not len(versions) and not len(arriving) and not _due(meta, end):
            return pd.DataFrame(), meta  # nothing new, nothing due: no state read
        versions[ORD] = meta["ord"] + np.arange(len(versions), dtype=np.int64)
        versions[ALIVE] = versions[OK].to_numpy(dtype=bool) & ~versions[DELETE].to_numpy(dtype=bool)
        meta["ord"] += len(versions)
        arriving[OK] = arriving[OK].to_numpy(dtype=bool) & ~arriving[NULL_KEY].to_numpy(dtype=bool)
        pending = _concat(_part(meta, segments, PENDING, version_cols), versions[version_cols])
        waiting = _concat(_part(meta, segments, WAITING, waiting_cols), arriving[waiting_cols])

        due = waiting[ROWTIME].to_numpy(dtype=np.int64) < end
        folded = pending[ROWTIME].to_numpy(dtype=np.int64) <= end
        base = read_table(meta["table"], segments, keys, table_cols) if due.any() or folded.any() else None
        out = _emit(waiting[due], rows, base, pending, keys, stream_cols, table_cols, key_ids, outer)
        if folded.any():
            changes = pending[folded].sort_values([ROWTIME, ORD], kind="stable").drop_duplicates(keys, keep="last")
            changes = changes[keys + table_cols].assign(**{GONE: ~changes[ALIVE].to_numpy(dtype=bool)})
            table = apply_changes(meta["table"], segments, base, changes.reset_index(drop=True), keys)
            meta["base_rows"] = len(table)
        _keep_part(meta, segments, PENDING, pending[~folded], len(versions) or folded.any())
        _keep_part(meta, segments, WAITING, waiting[~due], len(arriving) or due.any())
        meta["rows"] = meta["base_rows"] + len(pending) - int(folded.sum()) + len(waiting) - int(due.sum())
        return out, meta

    return step


def _idle(meta: dict, rows) -> bool:
    """Whether a bucket's batch changes nothing: only the clock, and it reaches neither the earliest pending
    version nor the earliest waiting record."""
    end = tick_only_clock(rows)
    return end is not None and not _due(meta, end)


def _due(meta: dict, end: int) -> bool:
    return any(meta[name] is not None and meta[name] <= end for name in EARLIEST.values())


def _part(meta, segments, part: int, columns) -> pd.DataFrame:
    """The pending versions or the waiting records (``part``), an empty frame when there are none."""
    if meta[EARLIEST[part]] is None:
        return pd.DataFrame(columns=columns)
    return segments.get(part).set_axis(columns, axis=1)  # by position: see stream_stream's reading of its segments


def _keep_part(meta, segments, part: int, frame: pd.DataFrame, changed) -> None:
    """Store what remains of a part (when the batch changed it) and its earliest time."""
    if not changed:
        return
    if len(frame):
        segments.put(part, frame.reset_index(drop=True))
        meta[EARLIEST[part]] = int(frame[ROWTIME].to_numpy(dtype=np.int64).min())
    elif meta[EARLIEST[part]] is not None:
        segments.remove(part)
        meta[EARLIEST[part]] = None


def _emit(due: pd.DataFrame, rows: pd.DataFrame, base, pending: pd.DataFrame, keys, stream_cols,
          table_cols, key_ids, outer: bool) -> pd.DataFrame:
    """Join the due stream records with the version valid at their time, in the order they fall due: the
    latest pending version at or before it, else the key's base row."""
    if not len(due):
        return pd.DataFrame()
    due = due.sort_values([ROWTIME, SEQ, SUB], kind="stable").reset_index(drop=True)
    ok = due[OK].to_numpy(dtype=bool)
    found = _as_of(due, pending, keys)
    in_pending = found >= 0
    alive = np.zeros(len(due), dtype=bool)
    alive[in_pending] = pending[ALIVE].to_numpy(dtype=bool)[found[in_pending]]
    at = base.find(due)
    in_base = ~in_pending & (at >= 0)
    matched = ok & ((in_pending & alive) | in_base)
    out = pd.DataFrame({c: due[c].to_numpy() for c in stream_cols})
    for c in table_cols:
        out[c] = np.where(in_pending, take(pending[c].to_numpy(), found, matched & in_pending),
                          take(base.column(c), at, matched & in_base)) if len(base) else \
            take(pending[c].to_numpy(), found, matched)
    for jk, k in zip(key_ids, keys):
        out[jk] = due[k].to_numpy()
    # Every record due in this batch leaves at the batch's end (its tick), ordered by (time, ingestion order):
    # the order in which the watermark passes them, whatever the cut. (The exact record whose watermark
    # passed each one may be in another bucket.)
    times = due[ROWTIME].to_numpy(dtype=np.int64)
    out[ROWTIME] = times
    out[SEQ] = int(rows[SEQ].iloc[-1])
    out[SUB] = times * ORDER_SCALE + due[SEQ].to_numpy(dtype=np.int64) % ORDER_SCALE
    # a row leaves before the watermark that released it moves on (as Flink forwards it), so a temporal join
    # fed by this one reads it on time: its clock is its own time (the batch's watermark passed it)
    out[STREAM_TIME] = times
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


def _concat(stored: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    if not len(stored):
        return new.reset_index(drop=True)
    return pd.concat([stored, new], ignore_index=True) if len(new) else stored


OPERATOR = TemporalJoin()
