"""Flink regular join: two Flink inputs joined without time bounds; both sides are kept and the result is a
changelog in which an update retracts what it replaced.

Semantics (DIALECT §3, Flink's streaming join). Each input is a set of rows that changes: a stream only
gains rows (each record is a row of its own); a table upserts and deletes rows by primary key. The result
holds one row per matching pair (equal join keys, each row passing its one-input ON predicates, the pair
passing ON's conditions over both inputs, evaluated pair by pair: ``operators.pair_condition``) and, on a
preserved side, one null-padded row per row that matches nothing. Every input change updates the result at
once: an inserted row adds its pairs (and removes the other side's padded rows it now matches); a deleted
or replaced row removes its pairs (and pads the other side's rows left without a match). A result row is
keyed by the identities of its two input rows (``plan.joins._regular_result_key``): it is written as an
upsert on that key, and its removal as a tombstone; of the changes one input change makes to a result key
within one join key only the net effect is written (an update of a matched row is one upsert). INNER between
two streams never removes anything and is written as a stream. Output time is the time of the input change.
A null join key never matches.

SEMI and ANTI joins (``[NOT] EXISTS`` and ``[NOT] IN`` subqueries: ``plan.subqueries``) write only the left
input's rows: a left row while at least one right row matches it (SEMI), or while none does (ANTI), keyed by
the left row's identity. A SEMI join of two streams never removes anything and is written as a stream.

With ``SET 'table.exec.state.ttl' = '<duration>'`` a stored row that has not changed for that long (by the
query's clock, so results are reproducible; Flink uses processing time) is forgotten, without retracting
the results it produced — as in Flink.

Algorithm: a table side whose rows may change their join key first goes through a stage keyed by its
primary key that turns each change into "retract the old row" (routed to the old join key) and "insert the
new row". The second stage is keyed by a hash bucket of the join key and applies the changes of both sides
in ingestion order: defined record at a time, computed for the whole batch at once (``_join_step``: every
message's partners found by one merge on the join key, not a Python loop per record). Its work is what the
record-at-a-time definition reads: each message against the rows of its join key.

State (per bucket, segmented: ``operators.state``; each stage a table log, ``state.log_changes``): stage 1 —
per primary key, the row's current values and join key; stage 2 — per stored row (``ENTRY``: its side and
identity), its join key, the clock of its last change and its values; plus the counts of dropped records. A
batch reads only the stored rows it can need (``_join_step``'s ``load``: never a stream side's own earlier
rows for an insert into it, unless the other side is preserved) from the worker's cached table, else the
log replayed, and logs only the rows it inserted or removed. A row leaves state when it is deleted or
replaced, or when its TTL expires (a vectorised pass over the table, with a TTL only).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

from ..errors import StatementError
from ..plan.nodes import EXISTENCE, ROWTIME, SEQ, STREAM_TIME, SUB, TOMBSTONE, Join, PlanNode
from ..plan.settings import STATE_TTL
from .base import DeclaredState, LoweringContext
from .keyed_inputs import (
    BUCKET, DELETE, NO_TIME, OK, SIDE, bucketed, clock_values, key_codes, key_names, payload, previous_row,
    restore_integers, tag_side, take, version_ends,
)
from .pair_condition import compile_condition, supported
from .state import GONE, LiveTable, log_changes, new_table_log, read_table, remove_where, run_segmented

LEFT, RIGHT = 0, 1
RETRACT, ROW_ID, CLOCK = "__retract", "__row_id", "__clock"  # CLOCK: in state, the clock of a row's last change
ENTRY = "__entry"  # in state: a stored row's side and identity, "<side>|<row id>"
UNITS_MS = {"ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1, "s": 1000, "sec": 1000,
            "second": 1000, "seconds": 1000, "min": 60_000, "minute": 60_000, "minutes": 60_000, "h": 3_600_000,
            "hour": 3_600_000, "hours": 3_600_000, "d": 86_400_000, "day": 86_400_000, "days": 86_400_000}


STATE = DeclaredState(
    "regular", 1,
    keeps="per primary key each input's current row (stage 1); every live row of both sides by join key, "
          "with the clock of its last change (stage 2)",
    segments="chunks of each stage's change log",
    purged="a row when retracted or replaced, or its 'table.exec.state.ttl' after its last change")


class RegularJoin:
    def state(self, join: Join) -> DeclaredState:
        if "TABLE" in (join.left.kind, join.right.kind):  # a table side's changes pass its per-primary-key stage
            return replace(STATE, stages=("each table side's primary key (a row's previous version retracted)",
                                          "the join key"))
        return STATE

    def lower(self, join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext) -> DataFrame:
        keys = key_names(len(join.join_key))
        ttl = parse_duration(ctx.properties.get(STATE_TTL))
        sides = []
        for side, df, node, join_side in ((LEFT, left, join.left, join.left_side), (RIGHT, right, join.right, join.right_side)):
            tagged = tag_side(df, side, join_side, keys, node)
            sides.append(_changes(tagged, node, keys, ctx, ttl))
        data = bucketed(sides[0].unionByName(sides[1], allowMissingColumns=True), keys, ctx.time_buckets)
        left_cols, right_cols = payload(left), payload(right)
        types = {f.name: f.dataType for f in data.schema.fields}
        row_ids = [k for k in join.key if k not in types and k not in join.join_key]  # stream rows' identities
        out_fields = [StructField(c, types[c]) for c in left_cols + ([] if join.join_type in EXISTENCE else right_cols)]
        out_fields += [StructField(jk, types[k]) for jk, k in zip(join.join_key, keys)]
        out_fields += [StructField(r, StringType()) for r in row_ids]
        out_fields += [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB, STREAM_TIME)]
        if join.kind == "TABLE":
            out_fields.append(StructField(TOMBSTONE, BooleanType()))
        schema = StructType(out_fields)
        identities = _identities(join, row_ids)
        condition = compile_condition(join.condition) if self.evaluates_condition(join) else None
        step = _join_step(keys, left_cols, right_cols, list(join.join_key), identities, join.join_type, ttl,
                          schema.fieldNames(), condition)
        return run_segmented(data, BUCKET, step, schema, ctx)

    @staticmethod
    def evaluates_condition(join: Join) -> bool:
        """Whether the step evaluates ``join.condition`` (ON's conditions over both inputs beyond the
        equalities) on each candidate pair. It must wherever a pair's passing decides more than whether the
        pair's row is written: padding in an outer join, and retractions in a changelog (a row updated to fail
        the condition retracts its pair). An INNER join of two streams filters its rows after the join."""
        if join.condition is None or not supported(join.condition):
            return False
        return not (join.join_type == "INNER" and join.left.kind == join.right.kind == "STREAM")


def parse_duration(text) -> int | None:
    """'1 h', '10 min', '30s', '3600000' (ms) -> milliseconds; None when unset."""
    if text is None or str(text).strip() == "":
        return None
    raw = str(text).strip().lower()
    number = raw.rstrip("abcdefghijklmnopqrstuvwxyz ").strip()
    unit = raw[len(number):].strip() or "ms"
    if unit not in UNITS_MS or not number.replace(".", "", 1).isdigit():
        raise StatementError(f"SET '{STATE_TTL}' = '{text}': expected a duration such as '1 h', '10 min' or '30 s'",
                             rule="state-ttl")
    return int(float(number) * UNITS_MS[unit])


def _identities(join: Join, row_ids: list[str]):
    """Per side: ('pk', primary-key columns) for a table, ('row', output column) for a stream."""
    out, rows = [], iter(row_ids)
    for node in (join.left, join.right):
        out.append(("pk", list(node.key)) if node.kind == "TABLE" else ("row", next(rows, None)))
    return out  # an append-only result (INNER of two streams) carries no identities


def _changes(tagged: DataFrame, node: PlanNode, keys, ctx: LoweringContext, ttl) -> DataFrame:
    """One side as ``insert`` / ``retract`` messages with a row identity. A stream's records are inserts; a
    table's changes pass the per-primary-key stage, which retracts each row's previous version."""
    if node.kind == "STREAM":
        row_id = F.concat_ws(":", F.col(SEQ).cast("string"), F.col(SUB).cast("string"))
        inserts = tagged.withColumn(RETRACT, F.lit(False)).withColumn(ROW_ID, row_id).drop(DELETE)
        return inserts.withColumn(SUB, 2 * F.col(SUB) + 1)  # as the per-primary-key stage numbers an insert
    pk = list(node.key)
    cols = payload(tagged)
    by_pk = bucketed(tagged.withColumn(ROW_ID, F.to_json(F.struct(*pk))), [ROW_ID], ctx.time_buckets)
    types = {f.name: f.dataType for f in by_pk.schema.fields}
    schema = StructType(
        [StructField(c, types[c]) for c in cols + keys]
        + [StructField(SIDE, types[SIDE]), StructField(OK, BooleanType()), StructField(RETRACT, BooleanType()),
           StructField(ROW_ID, StringType())]
        + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB, STREAM_TIME)]
    )
    return run_segmented(by_pk, BUCKET, _versions_step(cols, keys, ttl, schema.fieldNames()), schema, ctx)


def _versions_step(cols, keys, ttl, out_names):
    carried = cols + keys + [OK]

    def step(meta, rows: pd.DataFrame, segments):
        """Each change retracts its row's previous version (the previous change of its primary key in the
        batch, else the stored row), if that is still alive, and inserts the new one unless it deletes."""
        meta = meta or {"table": new_table_log(), "dropped": {}, "rows": 0}
        rows = rows.sort_values([SEQ, SUB], kind="stable").reset_index(drop=True)
        rows[CLOCK] = clock_values(rows[STREAM_TIME])
        stored = read_table(meta["table"], segments, [ROW_ID], carried + [CLOCK])
        before = previous_row(rows[ROW_ID].to_numpy())
        in_batch = before >= 0
        before = np.maximum(before, 0)
        at = stored.find(rows)
        deletes = rows[DELETE].to_numpy(dtype=bool)
        had = np.where(in_batch, ~deletes[before], at >= 0)  # a previous version exists
        stored_clock = np.where(at >= 0, take(stored.column(CLOCK), at, at >= 0), NO_TIME)
        old_clock = np.where(in_batch, rows[CLOCK].to_numpy()[before], stored_clock).astype(np.int64)
        clock = rows[CLOCK].to_numpy()
        alive = np.ones(len(rows), bool) if ttl is None else (clock == NO_TIME) | (old_clock >= clock - ttl)
        retracts = had & alive
        old = {c: np.where(in_batch, rows[c].to_numpy(dtype=object)[before], take(stored.column(c), at, at >= 0))
               for c in carried}
        retracted = pd.DataFrame({c: v[retracts] for c, v in old.items()}).assign(
            **_messages(rows[retracts], 2 * rows[SUB].to_numpy()[retracts], retract=True))
        inserted = rows.loc[~deletes, carried].assign(**_messages(rows[~deletes], 2 * rows[SUB].to_numpy()[~deletes] + 1,
                                                                 retract=False))
        last = rows.drop_duplicates(ROW_ID, keep="last")
        changes = last[[ROW_ID] + carried + [CLOCK]].assign(**{GONE: last[DELETE].to_numpy(dtype=bool)})
        _save(meta, segments, stored, changes.reset_index(drop=True), [ROW_ID], _clock(rows[STREAM_TIME].max()), ttl)
        return pd.concat([retracted, inserted], ignore_index=True).reindex(columns=out_names), meta

    return step


def _messages(rows: pd.DataFrame, sub, retract: bool) -> dict:
    """The columns a stage-1 message takes from its change besides the row's values."""
    return {ROWTIME: rows[ROWTIME].to_numpy(), SEQ: rows[SEQ].to_numpy(), SUB: sub, STREAM_TIME: rows[STREAM_TIME].to_numpy(),
            RETRACT: retract, ROW_ID: rows[ROW_ID].to_numpy(), SIDE: rows[SIDE].to_numpy()}


def _save(meta, segments, stored: LiveTable, changes: pd.DataFrame, keys, clock: int, ttl) -> None:
    """Apply and log a batch's changes to a table of rows with a ``CLOCK`` column (``state.log_changes``), and
    remove the rows whose TTL expired by ``clock`` (found by one pass of numpy over the clock column)."""
    stored.apply(changes)
    if ttl is not None and clock != NO_TIME and len(stored):
        _, changes = remove_where(stored, stored.column(CLOCK).astype(np.int64) < clock - ttl, changes, keys)
    log_changes(meta["table"], segments, changes, stored, keys)
    meta["rows"] = len(stored)


def _clock(value) -> int:
    return int(clock_values([value])[0])


class _Versions:
    """The stored rows a batch reads and the rows it inserts, as *versions* of input rows: each lives from its
    insert message (stored ones from before the batch: -1) until the message that retracts it (or, a row
    written again without a retraction, just after the message that overwrites it: +0.5). Columns are numpy
    arrays indexed by version number; the stored versions come first, then the inserts in message order (the
    order in which the record-at-a-time definition meets them)."""

    def __init__(self, found: pd.DataFrame, rows: pd.DataFrame, found_k, row_k, columns, ttl):
        inserts = np.flatnonzero(~rows[RETRACT].to_numpy(dtype=bool))
        self.stored = len(found)
        self.side = np.concatenate([found[SIDE].to_numpy(dtype=np.int64), rows[SIDE].to_numpy(dtype=np.int64)[inserts]])
        self.row_id = np.concatenate([found[ROW_ID].to_numpy(dtype=object), rows[ROW_ID].to_numpy(dtype=object)[inserts]])
        self.k = np.concatenate([found_k, row_k[inserts]])
        self.ok = np.concatenate([found[OK].to_numpy(dtype=bool), rows[OK].to_numpy(dtype=bool)[inserts]])
        self.clock = np.concatenate([found[CLOCK].to_numpy(dtype=np.int64), rows[CLOCK].to_numpy(dtype=np.int64)[inserts]])
        self.start = np.concatenate([np.full(len(found), -1.0), inserts.astype(float)])
        parts = [f for f in (found[columns], rows[columns].iloc[inserts]) if len(f)]
        self.values = pd.concat(parts, ignore_index=True) if parts else found[columns]
        self.of_insert = np.full(len(rows), -1)  # message -> the version it inserts
        self.of_insert[inserts] = self.stored + np.arange(len(inserts))
        self.ttl = ttl
        self.end, self.retracted = self._ends(rows, row_k)

    def _ends(self, rows, row_k):
        """Each version's end, and each retract message's version (-1: none live): the messages and versions
        of one row (side, identity, join key) in order, each message ending the version before it."""
        retracts = np.flatnonzero(rows[RETRACT].to_numpy(dtype=bool))
        row = pd.DataFrame({"s": np.concatenate([self.side, rows[SIDE].to_numpy(dtype=np.int64)[retracts]]),
                            "r": np.concatenate([self.row_id, rows[ROW_ID].to_numpy(dtype=object)[retracts]]),
                            "k": np.concatenate([self.k, row_k[retracts]])})
        identity = key_codes(row, ["s", "r", "k"])
        ends, closes = version_ends(identity[:len(self.side)], self.start, identity[len(self.side):], retracts,
                                    overwrite_lag=0.5)
        retracted = np.full(len(rows), -1)
        retracted[retracts] = closes
        return ends, retracted

    def alive(self, v, clock):
        """Whether versions ``v`` are still kept at message clocks ``clock`` (``table.exec.state.ttl``)."""
        if self.ttl is None:
            return np.ones(len(v), bool)
        return (clock == NO_TIME) | (self.clock[v] >= clock - self.ttl)

    def live(self, v, p, clock):
        """Whether versions ``v`` can pair at messages ``p``: present, matchable and kept."""
        return (self.start[v] < p) & (p < self.end[v]) & self.ok[v] & self.alive(v, clock)


def _join_step(keys, left_cols, right_cols, key_ids, identities, join_type, ttl, out_names, condition=None):
    """Stage 2, per bucket of join keys. Defined record at a time — each message (the insert or retraction of
    one row of one side) changes the result by the rows it pairs with at that moment — and computed for the
    whole batch at once over row versions (``_Versions``):

    - a message's *matches* are the versions of the other side, under its join key, live at it (and passing
      ON's condition with the row it moves), when that row is matchable;
    - it adds (an insert) or removes (a retraction) a pair row with each match; a match on a preserved side
      that has no other live partner on the message's side loses (gains) its padded row before (after) that;
      a message with no match pads (un-pads) its own row on a preserved side;
    - SEMI/ANTI: a left message writes its row when it has a match (SEMI) or none (ANTI); a right message
      flips each match that has no other live right partner;
    - of the rows one input change (a retraction and an insert of one row under one join key) writes, each
      result key keeps only its net effect: its last row, written if it existed before the change or is not
      a removal.
    """
    existence = join_type in EXISTENCE
    # whether a row's having a match decides what is written: a preserved side's rows (padded while they have
    # none), and the left rows of a SEMI or ANTI join
    outer = np.array([join_type in ("LEFT", "FULL") or existence, join_type in ("RIGHT", "FULL")])
    columns = left_cols + right_cols
    row_identity = {side: column for side, (kind, column) in enumerate(identities) if kind == "row" and column}
    stored_key = [ENTRY]  # which side and which of its rows: "<side>|<row id>"
    stored_cols = keys + [SIDE, ROW_ID, OK, CLOCK] + columns
    last_slot = np.iinfo(np.int64).max

    def load(stored: LiveTable, rows: pd.DataFrame) -> pd.DataFrame:
        """The stored rows the batch can read. A side's rows of a join key are read when the batch changes the
        other side there (they are its matches), retracts one of them, or changes the side itself while the
        other side is preserved (whether the side has a row there decides the other's padding). An insert into
        a stream side reads none of its own earlier rows."""
        batch_side, retract = rows[SIDE].to_numpy(), rows[RETRACT].to_numpy(dtype=bool)
        parts = []
        for side in (LEFT, RIGHT):
            needed = (batch_side != side) | (retract & (batch_side == side))
            if outer[1 - side]:
                needed |= batch_side == side
            parts.append(stored.rows_for(rows.loc[needed, keys].assign(**{SIDE: side}), [SIDE] + keys))
        return pd.concat(parts, ignore_index=True)

    def paired(versions: _Versions, a: np.ndarray, b: np.ndarray):
        """Whether versions ``a`` (of either side) and ``b`` (of the other) pass ON's condition."""
        if condition is None or not len(a):
            return np.ones(len(a), bool)
        left, right = np.where(versions.side[a] == LEFT, a, b), np.where(versions.side[a] == LEFT, b, a)
        pairs = {c: versions.values[c].to_numpy()[left] for c in left_cols}
        pairs.update({c: versions.values[c].to_numpy()[right] for c in right_cols})
        return np.asarray(condition(pd.DataFrame(pairs)), dtype=bool)

    def candidates(versions: _Versions, p: np.ndarray, k: np.ndarray, side: np.ndarray, other: bool):
        """(message, version) pairs under one join key: versions of the other side (or the same side) of
        each message ``p``."""
        if not len(p):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        a = pd.DataFrame({"i": np.arange(len(p)), "k": k, "s": 1 - side if other else side})
        b = pd.DataFrame({"v": np.arange(len(versions.k)), "k": versions.k, "s": versions.side})
        m = a.merge(b, on=["k", "s"])
        return m["i"].to_numpy(), m["v"].to_numpy()

    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"table": new_table_log(), "dropped": {}, "rows": 0}
        rows = restore_integers(rows, keys).assign(__change=rows[SUB] // 2, **{CLOCK: clock_values(rows[STREAM_TIME])})
        rows = rows.sort_values([SEQ, "__change", SIDE, SUB], kind="stable").reset_index(drop=True)
        rows = rows.assign(**{c: None for c in columns if c not in rows.columns})  # a side absent from the batch
        stored = read_table(meta["table"], segments, stored_key, stored_cols)
        found = load(stored, rows)
        codes = key_codes(pd.concat([f for f in (found[keys], rows[keys]) if len(f)] or [rows[keys]], ignore_index=True), keys)
        row_k = codes[len(found):]
        versions = _Versions(found, rows, codes[:len(found)], row_k, columns, ttl)
        out = _emitted(versions, rows, row_k)
        last = rows.drop_duplicates([SIDE, ROW_ID], keep="last")  # each row's entry after the batch, or its removal
        gone = last[RETRACT].to_numpy(dtype=bool)
        changes = last[keys + [SIDE, ROW_ID, OK, CLOCK] + columns].assign(
            **{ENTRY: last[SIDE].astype(str).to_numpy(dtype=object) + "|" + last[ROW_ID].astype(str).to_numpy(dtype=object),
               OK: last[OK].to_numpy(dtype=bool) & ~gone, GONE: gone})
        clock = _clock(rows[STREAM_TIME].max()) if len(rows) else NO_TIME
        _save(meta, segments, stored, changes[stored_key + stored_cols + [GONE]].reset_index(drop=True), stored_key, clock, ttl)
        return out, meta

    def _emitted(versions: _Versions, rows: pd.DataFrame, row_k: np.ndarray) -> pd.DataFrame:
        n = len(rows)
        side, retract = rows[SIDE].to_numpy(dtype=np.int64), rows[RETRACT].to_numpy(dtype=bool)
        clock = rows[CLOCK].to_numpy(dtype=np.int64)
        mover = np.where(retract, versions.retracted, versions.of_insert)  # the version each message moves
        active = mover >= 0
        active[active] = versions.alive(mover[active], clock[active])  # a retraction of an expired row: nothing
        matchable = active.copy()
        matchable[active] = versions.ok[mover[active]]
        p = np.flatnonzero(matchable)
        i, x = candidates(versions, p, row_k[p], side[p], other=True)
        mp = p[i]
        keep = versions.live(x, mp, clock[mp]) & paired(versions, mover[mp], x)
        mp, x = mp[keep], x[keep]
        matches = np.bincount(mp, minlength=n)
        # whether a match has another live partner on the message's side (only asked where it is preserved)
        asked = np.flatnonzero(outer[versions.side[x]])
        partners = np.zeros(len(x), np.int64)
        if len(asked):
            j, y = candidates(versions, mp[asked], row_k[mp[asked]], side[mp[asked]], other=False)
            at = mp[asked][j]
            ok = versions.live(y, at, clock[at]) & paired(versions, y, x[asked][j])
            partners[asked] = np.bincount(j[ok], minlength=len(asked))
        alone = outer[versions.side[x]] & (partners == 0)
        emitted = []  # (message, order, slot, left version, right version, removed)

        def emit(at, order, slot, row, other, removed):
            row_is_left = versions.side[row] == LEFT if len(row) else np.zeros(0, bool)
            left = np.where(row_is_left, row, other)
            right = np.where(row_is_left, other, row)
            emitted.append((at, order, np.full(len(at), slot), left, right, np.broadcast_to(removed, len(at))))

        none = np.full(len(x), -1)
        if existence:
            own = np.flatnonzero(active & (side == LEFT))
            writes = own[(matches[own] > 0) == (join_type == "SEMI")]
            emit(writes, np.full(len(writes), last_slot), 0, mover[writes], np.full(len(writes), -1), retract[writes])
            flips = (side[mp] == RIGHT) & alone
            emit(mp[flips], x[flips], 0, x[flips], none[flips], retract[mp[flips]] == (join_type == "SEMI"))
        else:
            before, after = alone & ~retract[mp], alone & retract[mp]
            emit(mp[before], x[before], 0, x[before], none[before], True)
            emit(mp, x, 1, mover[mp], x, retract[mp])
            emit(mp[after], x[after], 2, x[after], none[after], False)
            own = np.flatnonzero(active & (matches == 0) & outer[side])
            emit(own, np.full(len(own), last_slot), 0, mover[own], np.full(len(own), -1), retract[own])
        at, order, slot, left, right, removed = (np.concatenate(parts) for parts in zip(*emitted))
        return _written(versions, rows, row_k, at, order, slot, left, right, removed)

    def _written(versions: _Versions, rows, row_k, at, order, slot, left, right, removed) -> pd.DataFrame:
        """The net effect per input change and result key, as output rows."""
        n = len(rows)
        key = [rows[SEQ].to_numpy(), rows["__change"].to_numpy(), rows[SIDE].to_numpy(), row_k]
        starts = np.ones(n, bool)
        if n > 1:
            starts[1:] = np.any([c[1:] != c[:-1] for c in key], axis=0)
        change = np.cumsum(starts) - 1  # an input change: consecutive messages of one row's side, seq and key
        final = np.append(np.flatnonzero(starts[1:]), n - 1)  # each change's last message
        identity = key_codes(pd.DataFrame({"s": versions.side, "r": versions.row_id}), ["s", "r"])
        events = pd.DataFrame({"change": change[at], "l": np.where(left >= 0, identity[np.maximum(left, 0)], -1),
                               "r": np.where(right >= 0, identity[np.maximum(right, 0)], -1), "removed": removed,
                               "at": at, "order": order, "slot": slot, "lv": left, "rv": right})
        events = events.sort_values(["at", "order", "slot"], kind="stable")
        existed = events.groupby(["change", "l", "r"], sort=False)["removed"].transform("first").to_numpy(dtype=bool)
        last = ~events.duplicated(["change", "l", "r"], keep="last").to_numpy()
        written = events[last & (existed | ~events["removed"].to_numpy(dtype=bool))]
        lv, rv, change_of = written["lv"].to_numpy(), written["rv"].to_numpy(), written["change"].to_numpy()
        message = final[change_of]
        number = written.groupby("change", sort=False).cumcount().to_numpy()
        out = {c: take(versions.values[c].to_numpy(), lv, lv >= 0) for c in left_cols}
        out.update({c: take(versions.values[c].to_numpy(), rv, rv >= 0) for c in right_cols})
        out.update({jk: rows[k].to_numpy()[message] for jk, k in zip(key_ids, keys)})
        for side, column in row_identity.items():
            v = lv if side == LEFT else rv
            out[column] = take(versions.row_id, v, v >= 0)
        out.update({ROWTIME: rows[ROWTIME].to_numpy()[message], SEQ: rows[SEQ].to_numpy()[message],
                    SUB: rows[SUB].to_numpy(dtype=np.int64)[message] * 1000 + number,
                    STREAM_TIME: rows[STREAM_TIME].to_numpy()[message], TOMBSTONE: written["removed"].to_numpy(dtype=bool)})
        return pd.DataFrame(out).reindex(columns=out_names)

    return step


OPERATOR = RegularJoin()
