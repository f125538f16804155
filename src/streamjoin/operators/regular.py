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
in ingestion order, record at a time.

State (per bucket, segmented: ``operators.state``; each stage a table log, ``state.log_changes``): stage 1 —
per primary key, the row's current values and join key; stage 2 — per stored row (``ENTRY``: its side and
identity), its join key, the clock of its last change and its values; plus the counts of dropped records. A
batch reads only the stored rows it can need (``_join_step``'s ``load``: never a stream side's own earlier
rows for an insert into it, unless the other side is preserved) from the worker's cached table, else the
log replayed, and logs only the rows it inserted or removed. A row leaves state when it is deleted or
replaced, or when its TTL expires (a vectorised pass over the table, with a TTL only).
"""
from __future__ import annotations

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
    BUCKET, DELETE, NO_TIME, OK, SIDE, bucketed, clock_values, key_names, payload, restore_integers, tag_side, take,
)
from .pair_condition import compile_condition, supported
from .state import GONE, key_index, log_changes, merge_changes, new_table_log, read_table, rows_for, run_segmented

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
        return run_segmented(data, BUCKET, step, schema)

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
    return run_segmented(by_pk, BUCKET, _versions_step(cols, keys, ttl, schema.fieldNames()), schema)


def _versions_step(cols, keys, ttl, out_names):
    carried = cols + keys + [OK]

    def step(meta, rows: pd.DataFrame, segments):
        """Each change retracts its row's previous version (the previous change of its primary key in the
        batch, else the stored row), if that is still alive, and inserts the new one unless it deletes."""
        meta = meta or {"table": new_table_log(), "dropped": {}, "rows": 0}
        rows = rows.sort_values([SEQ, SUB], kind="stable").reset_index(drop=True)
        rows[CLOCK] = clock_values(rows[STREAM_TIME])
        stored = read_table(meta["table"], segments, [ROW_ID], carried + [CLOCK])
        ids = rows[ROW_ID].to_numpy()
        before = pd.Series(np.arange(len(rows))).groupby(ids, sort=False).shift(1).to_numpy()
        in_batch = ~np.isnan(before)
        before = np.where(in_batch, before, 0).astype(np.int64)
        at = key_index(stored, [ROW_ID]).get_indexer(ids) if len(stored) else np.full(len(rows), -1)
        deletes = rows[DELETE].to_numpy(dtype=bool)
        had = np.where(in_batch, ~deletes[before], at >= 0)  # a previous version exists
        old_clock = np.where(in_batch, rows[CLOCK].to_numpy()[before],
                             stored[CLOCK].to_numpy(dtype=np.int64)[np.maximum(at, 0)] if len(stored) else NO_TIME)
        clock = rows[CLOCK].to_numpy()
        alive = np.ones(len(rows), bool) if ttl is None else (clock == NO_TIME) | (old_clock >= clock - ttl)
        retracts = had & alive
        old = {c: np.where(in_batch, rows[c].to_numpy(dtype=object)[before],
                           take(stored[c].to_numpy(), at, at >= 0) if len(stored) else None) for c in carried}
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


def _save(meta, segments, stored: pd.DataFrame, changes: pd.DataFrame, keys, clock: int, ttl) -> None:
    """Log a batch's changes to a table of rows with a ``CLOCK`` column (``state.log_changes``), and remove
    the rows whose TTL expired by ``clock``."""
    table = merge_changes(stored, changes, keys)
    if ttl is not None and clock != NO_TIME and len(table):
        expired = table[CLOCK].to_numpy(dtype=np.int64) < clock - ttl
        if expired.any():
            gone = table[expired].assign(**{GONE: True})
            changes = pd.concat([changes[~key_index(changes, keys).isin(key_index(gone, keys))], gone], ignore_index=True)
            table = table[~expired].reset_index(drop=True)
    log_changes(meta["table"], segments, changes, table)
    meta["rows"] = len(table)


def _meta(rec, sub):
    return {ROWTIME: rec[ROWTIME], SEQ: rec[SEQ], SUB: sub, STREAM_TIME: rec[STREAM_TIME]}


def _clock(value) -> int:
    return int(clock_values([value])[0])


def _alive(last_change: int, clock: int, ttl) -> bool:
    """Whether a row last changed at ``last_change`` is still kept when the clock reads ``clock``."""
    return ttl is None or clock == NO_TIME or last_change >= clock - ttl


def _join_step(keys, left_cols, right_cols, key_ids, identities, join_type, ttl, out_names, condition=None):
    existence = join_type in EXISTENCE
    # whether a row's having a match decides what is written: a preserved side's rows (padded while they have
    # none), and the left rows of a SEMI or ANTI join
    outer = {LEFT: join_type in ("LEFT", "FULL") or existence, RIGHT: join_type in ("RIGHT", "FULL")}
    cols = {LEFT: left_cols, RIGHT: right_cols}

    def passing(entry, side, candidates: list) -> list:
        """The rows of the other side that pair with ``entry`` (a row of ``side``) under ON's further
        condition (``pair_condition``; all of them without one)."""
        if condition is None or not candidates:
            return candidates
        pairs = {c: [entry["values"][c]] * len(candidates) for c in cols[side]}
        pairs.update({c: [m["values"][c] for m in candidates] for c in cols[1 - side]})
        return [m for m, ok in zip(candidates, condition(pd.DataFrame(pairs))) if ok]

    absent_identities = {column: None for kind, column in identities if kind == "row" and column}

    def identity(side, row_id) -> dict:
        kind, column = identities[side]
        return {column: row_id} if kind == "row" and column else {}

    def new_entry(side, rec) -> dict:
        return {"id": rec[ROW_ID], "values": {c: rec[c] for c in cols[side]}, "ok": bool(rec[OK]),
                "identity": identity(side, rec[ROW_ID]), "clock": rec[CLOCK]}

    def result(l_entry, r_entry, key, retract: bool, rec, sub) -> dict:
        row = {TOMBSTONE: retract, **_meta(rec, sub), **dict(zip(key_ids, key)), **absent_identities}
        for side, entry in ((LEFT, l_entry), (RIGHT, r_entry)):
            for c in cols[side]:
                row[c] = entry["values"][c] if entry is not None else None
            if entry is not None:
                row.update(entry["identity"])
        return row

    def apply(group, side, rec, changes: dict) -> None:
        """One message: insert or retract a row of ``side``; record the result rows it adds or removes."""
        other, retract, clock = 1 - side, bool(rec[RETRACT]), rec[CLOCK]
        entry = group[side].pop(rec[ROW_ID], None) if retract else new_entry(side, rec)
        if entry is None or not _alive(entry["clock"], clock, ttl):
            return  # a retraction of a row whose TTL expired: its results stay, as in Flink

        def emit(l_entry, r_entry, removed: bool):
            pair = (None if l_entry is None else l_entry["id"], None if r_entry is None else r_entry["id"])
            # within one input change only the net effect on a result key is written: a key first retracted
            # existed before it; an insert and a retract of a key that did not exist cancel out
            previous = changes.pop(pair, None)
            existed = previous[3] if previous is not None else removed
            changes[pair] = (l_entry, r_entry, removed, existed)

        def live(s):
            return [e for e in group[s].values() if e["ok"] and _alive(e["clock"], clock, ttl)]

        matches = passing(entry, side, live(other)) if entry["ok"] else []
        mine = live(side) if outer[other] else []  # (without ``entry``: not added yet, or just removed)
        if existence:  # a left row is written while it has a match (SEMI), or while it has none (ANTI)
            if side == LEFT and bool(matches) == (join_type == "SEMI"):
                emit(entry, None, removed=retract)
            for m in matches if side == RIGHT else ():
                if not passing(m, LEFT, mine):  # m's first match arrived, or its last one left
                    emit(m, None, removed=retract == (join_type == "SEMI"))
            if not retract:
                group[side][entry["id"]] = entry
            return
        for m in matches:
            first_or_last = outer[other] and not passing(m, other, mine)  # m matches no other row of this side
            if first_or_last and not retract:
                emit(*_padded(other, m), removed=True)
            emit(*((entry, m) if side == LEFT else (m, entry)), removed=retract)
            if first_or_last and retract:
                emit(*_padded(other, m), removed=False)
        if not matches and outer[side]:
            emit(*_padded(side, entry), removed=retract)
        if not retract:
            group[side][entry["id"]] = entry

    stored_key = [ENTRY]  # which side and which of its rows: "<side>|<row id>"
    stored_cols = keys + [SIDE, ROW_ID, OK, CLOCK] + left_cols + right_cols

    def load(stored: pd.DataFrame, rows: pd.DataFrame) -> dict:
        """The stored rows the batch can read: join key -> {side: {row id: entry}}. A side's rows of a join key
        are read when the batch changes the other side there (they are its matches), retracts one of them, or
        changes the side itself while the other side is preserved (whether the side has a row there decides
        the other's padding). An insert into a stream side reads none of its own earlier rows."""
        groups: dict = {}
        batch_side, retract = rows[SIDE].to_numpy(), rows[RETRACT].to_numpy(dtype=bool)
        for side in (LEFT, RIGHT):
            needed = (batch_side != side) | (retract & (batch_side == side))
            if outer[1 - side]:
                needed |= batch_side == side
            part = stored[stored[SIDE].to_numpy() == side] if len(stored) else stored
            found = rows_for(part, keys, rows[needed])
            if not len(found):
                continue
            values = {c: found[c].to_numpy() for c in cols[side]}
            for i, (key, row_id, ok, clock) in enumerate(zip(_group_keys(found, keys), found[ROW_ID].to_numpy(),
                                                             found[OK].to_numpy(dtype=bool), found[CLOCK].to_numpy())):
                entry = {"id": row_id, "values": {c: v[i] for c, v in values.items()}, "ok": bool(ok),
                         "identity": identity(side, row_id), "clock": int(clock)}
                groups.setdefault(key, {LEFT: {}, RIGHT: {}})[side][row_id] = entry
        return groups

    def changed(touched: dict) -> pd.DataFrame:
        """The batch's changes to the stored rows: each row it inserted or removed, by ``ENTRY``."""
        records = []
        for (side, row_id), (key, entry) in touched.items():
            if entry is None:
                records.append((f"{side}|{row_id}", *[None] * len(keys), side, row_id, False, NO_TIME,
                                *[None] * (len(left_cols) + len(right_cols)), True))
                continue
            values = [entry["values"].get(c) for c in left_cols + right_cols]
            records.append((f"{side}|{row_id}", *key, side, row_id, entry["ok"], entry["clock"], *values, False))
        return pd.DataFrame(records, columns=stored_key + stored_cols + [GONE])

    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"table": new_table_log(), "dropped": {}, "rows": 0}
        rows = restore_integers(rows, keys).assign(__change=rows[SUB] // 2, **{CLOCK: clock_values(rows[STREAM_TIME])})
        rows = rows.sort_values([SEQ, "__change", SIDE, SUB], kind="stable")
        stored = read_table(meta["table"], segments, stored_key, stored_cols)
        groups = load(stored, rows)  # join key -> {side: {row id: entry}}
        touched: dict = {}  # (side, row id) -> (join key, its entry now, or None: removed)
        out, changes, current, last = [], {}, None, None

        def flush():
            written = [(l_entry, r_entry, removed) for l_entry, r_entry, removed, existed in changes.values()
                       if existed or not removed]
            for n, (l_entry, r_entry, removed) in enumerate(written):
                out.append(result(l_entry, r_entry, current[3], removed, last, int(last[SUB]) * 1000 + n))
            changes.clear()

        for key, rec in zip(_group_keys(rows, keys), rows.to_dict("records")):
            change = (rec[SEQ], rec["__change"], rec[SIDE], key)  # one input change: its retract and its insert
            if change != current:
                if current is not None:
                    flush()
                current = change
            last = rec
            group = groups.setdefault(key, {LEFT: {}, RIGHT: {}})
            apply(group, rec[SIDE], rec, changes)
            row_id = rec[ROW_ID]
            touched[(rec[SIDE], row_id)] = (key, group[rec[SIDE]].get(row_id))
        if current is not None:
            flush()
        clock = _clock(rows[STREAM_TIME].max()) if len(rows) else NO_TIME
        _save(meta, segments, stored, changed(touched), stored_key, clock, ttl)
        return pd.DataFrame(out, columns=out_names), meta

    return step


def _group_keys(frame: pd.DataFrame, keys) -> list:
    """Each row's join key as a tuple, None for a missing value."""
    columns = [np.where(frame[k].isna().to_numpy(), None, frame[k].to_numpy(dtype=object)) for k in keys]
    return list(zip(*columns))


def _padded(side, entry):
    return (entry, None) if side == LEFT else (None, entry)


OPERATOR = RegularJoin()
