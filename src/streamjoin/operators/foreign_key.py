"""Foreign-key table-table join (ksqlDB): one table (the child) joins on a non-key column, the other (the
parent) on its whole primary key.

Semantics (DIALECT §3). The result has one row per child row, keyed by the child's primary key (ksqlDB);
a change of a parent updates (or deletes) every child row pointing at it, a change of a child's foreign key
moves its result to the new parent. INNER: a child row with its parent; child-preserving outer join (ksqlDB
LEFT): a child row with its parent or nulls. Parent-preserving outer joins, which ksqlDB lacks, add one row
per parent without matching children, keyed by (null child key, parent key), so the result key is then
(child key, join key). A tombstone is emitted only for a result row that existed, except that, as in Kafka
Streams' foreign-key join, deleting a child in an INNER join always emits one (its subscription is deleted
and the empty response propagated), at the later of the delete and its parent's time. Output time is the
later of the triggering change and the rows joined.

Algorithm: three keyed stages, as Kafka Streams' subscription/response design, each on
``operators.state`` with rows grouped by a hash bucket:
1. by child key — remember each child's foreign key; a child change becomes a *leave* event for the
   parent it pointed at before (if it moved or was deleted) and a *join* event for its new parent;
2. by foreign key — the parents and, per parent key, the children pointing at it; every join/leave event
   and parent change, in ingestion order, emits the new result of each affected child (and, when parents
   are preserved, of the parent's own row), as a row or a "no row" marker;
3. by result key — remember which result keys exist; per key and input record the last event wins: a row
   is emitted, a "no row" marker becomes a tombstone only if the key existed (or it is a deleted INNER
   child's, ``ALWAYS``).
The events of one input record carry its ingestion order and are numbered leave-before-join, so the output
order does not depend on batch cuts.

State (per bucket, segmented: ``operators.state``; each a table log, ``state.log_changes``): stage 1
child key → foreign key of every live child; stage 2 every live parent row, and every live child row
under its foreign key; stage 3 the set of live result keys. A batch reads the rows of the keys it
touches (from the worker's cached tables, else the logs replayed), runs its records through them in
ingestion order, and logs what changed. A tombstone removes its row from each stage at once.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StructField, StructType

from ..plan.joins import foreign_key_sides
from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, TOMBSTONE, Join
from .base import DeclaredState, LoweringContext
from .keyed_inputs import (
    BUCKET, DELETE, NULL_KEY, OK, bucketed, drop_records, integral_columns, key_codes, key_names, payload,
    previous_row, restore_integers, tag_side, take, version_ends,
)
from .state import GONE, apply_changes, new_table_log, read_table, run_segmented

EVENT = "__event"
LEAVE_MOVED, LEAVE_DELETED, JOIN, PARENT_CHANGE = 0, 1, 2, 3  # also their order within one input record
SUB_STRIDE = 1_000_000  # output _sub = event kind * stride + position among the record's results
TIME = "__time"  # in stage 2's state: the time of a row's last change
ALWAYS = "__always"  # on stage 2's output: a tombstone emitted whether or not its key has a row
CHILD_SEGMENTS = 1 << 40  # stage 2 keeps two table logs; the children's segments are numbered from here
META = (ROWTIME, SEQ, SUB, STREAM_TIME)


STATE = DeclaredState(
    "foreign_key", 1,
    keeps="each live child's foreign key (stage 1); every live parent row and every live child row under its "
          "foreign key (stage 2); the live result keys (stage 3)",
    segments="chunks of each stage's change log",
    purged="a row at its tombstone",
    stages=("the child's primary key", "the foreign key", "the result key"))


class ForeignKeyJoin:
    def state(self, join: Join) -> DeclaredState:
        return STATE

    def lower(self, join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext) -> DataFrame:
        child_on = foreign_key_sides(join)[0]
        if child_on == "left":
            child, child_side, child_node, parent, parent_side, parent_node = left, join.left_side, join.left, right, join.right_side, join.right
        else:
            child, child_side, child_node, parent, parent_side, parent_node = right, join.right_side, join.right, left, join.left_side, join.left
        preserved = {"INNER": (), "LEFT": ("left",), "RIGHT": ("right",), "FULL": ("left", "right")}[join.join_type]
        child_outer, parent_outer = child_on in preserved, (("right" if child_on == "left" else "left") in preserved)
        keys = key_names(len(join.join_key))
        child_key, child_cols, parent_cols = list(child_node.key), payload(child), payload(parent)
        buckets = ctx.time_buckets

        children = bucketed(tag_side(child, 0, child_side, keys), child_key, buckets)
        types = {f.name: f.dataType for f in children.schema.fields}
        event_schema = StructType(
            [StructField(c, types[c]) for c in child_cols + keys] + [StructField(EVENT, IntegerType()), StructField(OK, BooleanType())]
            + [StructField(c, LongType()) for c in META])
        integral = integral_columns(children, child_key + keys)
        events = run_segmented(children, BUCKET, _subscribe_step(child_key, keys, child_cols, integral), event_schema, ctx)

        parents = tag_side(parent, 1, parent_side, keys, parent_node).withColumn(EVENT, F.lit(PARENT_CHANGE))
        both = bucketed(events.unionByName(parents, allowMissingColumns=True), keys, buckets)
        types.update({f.name: f.dataType for f in both.schema.fields})
        result_schema = StructType(
            [StructField(c, types[c]) for c in child_cols + parent_cols]
            + [StructField(jk, types[k]) for jk, k in zip(join.join_key, keys)]
            + [StructField(c, LongType()) for c in META] + [StructField(TOMBSTONE, BooleanType())])
        step = _parent_step(child_key, keys, child_cols, parent_cols, list(join.join_key), child_outer, parent_outer,
                            integral_columns(both, child_key + keys))
        results = run_segmented(both, BUCKET, step, StructType(result_schema.fields + [StructField(ALWAYS, BooleanType())]), ctx)

        out_key = list(join.key)
        return run_segmented(bucketed(results, out_key, buckets), BUCKET, _resolve_step(out_key), result_schema, ctx)


def _subscribe_step(child_key, keys, child_cols, integral):
    """Stage 1, per child-key bucket: child changes → leave/join events routed by foreign key. A change leaves
    the parent its child pointed at before it (the previous change of its child key in the batch, else the
    stored pointer) when it deletes the child or moves it to another foreign key, and joins its new parent
    unless it deletes; computed for the batch at once."""
    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"table": new_table_log(), "dropped": {}, "rows": 0}
        rows = restore_integers(rows, integral).sort_values([SEQ, SUB], kind="stable").reset_index(drop=True)
        null_pk = rows[child_key].isna().any(axis=1).to_numpy()
        drop_records(meta, "null_key", rows, null_pk)
        rows = rows[~null_pk].reset_index(drop=True)
        stored = read_table(meta["table"], segments, child_key, keys)
        found = stored.rows_for(rows)
        codes = key_codes(pd.concat([found[child_key], rows[child_key]], ignore_index=True), child_key)
        at = pd.Index(codes[:len(found)]).get_indexer(codes[len(found):])  # the child's stored pointer, or -1
        before = previous_row(codes[len(found):])  # its previous change in the batch, or -1
        deleted = rows[DELETE].to_numpy(dtype=bool)
        had = np.where(before >= 0, ~deleted[np.maximum(before, 0)], at >= 0)  # a pointer before the change
        old = {k: np.where(before >= 0, rows[k].to_numpy(dtype=object)[np.maximum(before, 0)],
                           take(found[k].to_numpy(), at, at >= 0)) for k in keys}
        moved = np.zeros(len(rows), bool)
        for k in keys:
            new = rows[k].to_numpy(dtype=object)
            moved |= ~((new == old[k]) | (pd.isna(new) & pd.isna(old[k])))
        leaves = np.flatnonzero(had & (deleted | moved))
        joins = np.flatnonzero(~deleted)
        left = pd.DataFrame({c: rows[c].to_numpy()[leaves] if c in child_key else None for c in child_cols})
        left = left.assign(**{k: old[k][leaves] for k in keys}, **{EVENT: np.where(deleted[leaves], LEAVE_DELETED, LEAVE_MOVED),
                                                                  OK: False, "__at": leaves})
        joined = rows.loc[joins, child_cols + keys].assign(**{EVENT: JOIN, OK: rows[OK].to_numpy(dtype=bool)[joins],
                                                             "__at": joins})
        events = pd.concat([f for f in (left, joined) if len(f)] or [joined], ignore_index=True)
        events = events.sort_values(["__at", EVENT], kind="stable")
        at_row = events["__at"].to_numpy()
        events = events.assign(**{c: rows[c].to_numpy()[at_row] for c in META}).drop(columns="__at")
        last = ~pd.Series(codes[len(found):]).duplicated(keep="last").to_numpy()  # each child's pointer after the batch
        final = last & (~deleted | (at >= 0))
        changes = rows.loc[final, child_key + keys].assign(**{GONE: deleted[final]}).reset_index(drop=True)
        meta["rows"] = len(apply_changes(meta["table"], segments, stored, changes, child_key))
        return events.reset_index(drop=True), meta

    return step


def _parent_step(child_key, keys, child_cols, parent_cols, join_key, child_outer, parent_outer, integral):
    """Stage 2, per foreign-key bucket: parents and their children; every event emits affected results.

    Defined event by event, in ingestion order: a parent change sets (or removes) its key's parent and emits
    the result of every child under it; a join event puts (or replaces) a child under its foreign key and
    emits its result; a leave takes it away and, for a deleted child (or when parents are preserved), emits a
    tombstone of its (child, old parent) row; when parents are preserved, every event then emits its parent's
    own row (a parent without an ok child) or that row's removal. A child's result is the child with its
    parent (when the child is ok and the parent exists), else the child padded (child-preserving joins), else a
    tombstone. Computed for the batch at once: each event reads the parent as of it (its key's last parent
    change up to it, else the stored parent) and the children live after it (stored, or joined up to it, and
    not replaced or gone since)."""
    pk_names = [f"__pk{i}" for i in range(len(child_key))]

    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"parents": new_table_log("parents"), "children": new_table_log("children", CHILD_SEGMENTS),
                        "dropped": {}, "rows": 0}
        rows = restore_integers(rows, integral).sort_values([SEQ, SUB, EVENT], kind="stable").reset_index(drop=True)
        event = rows[EVENT].to_numpy(dtype=np.int64)
        dropped = (event == PARENT_CHANGE) & _flag(rows[NULL_KEY])
        drop_records(meta, "null_key", rows, dropped)
        rows, event = rows[~dropped].reset_index(drop=True), event[~dropped]
        n, t = len(rows), rows[ROWTIME].to_numpy(dtype=np.int64)
        stored_parents = read_table(meta["parents"], segments, keys, parent_cols + [TIME])
        stored_children = read_table(meta["children"], segments, keys + pk_names, child_cols + [TIME, OK])
        parents = stored_parents.rows_for(rows)
        children = stored_children.rows_for(rows, keys)
        codes = key_codes(pd.concat([f for f in (parents[keys], children[keys], rows[keys]) if len(f)] or [rows[keys]],
                                    ignore_index=True), keys)
        p_fk, c_fk, fk = codes[:len(parents)], codes[len(parents):len(parents) + len(children)], codes[len(parents) + len(children):]

        # the parent as of each event
        is_parent = event == PARENT_CHANGE
        change = _last_up_to(is_parent, fk)
        stored_at = pd.Index(p_fk).get_indexer(fk)
        by_change, at = change >= 0, np.maximum(change, 0)
        alive = _flag(rows[OK]) & ~_flag(rows[DELETE])
        has_parent = np.where(by_change, alive[at], stored_at >= 0)
        stored_time = np.zeros(n, np.int64)
        stored_time[stored_at >= 0] = parents[TIME].to_numpy(dtype=np.int64)[stored_at[stored_at >= 0]]
        parent_time = np.where(by_change, t[at], stored_time)
        parent_values = {c: np.where(by_change, rows[c].to_numpy(dtype=object)[at],
                                     take(parents[c].to_numpy(), stored_at, stored_at >= 0)) for c in parent_cols}

        # the children as versions: the stored ones, and each join event's, until their child's next event
        stored_identity = children[keys + pk_names].set_axis(keys + child_key, axis=1)
        identity = key_codes(pd.concat([f for f in (stored_identity, rows[keys + child_key]) if len(f)] or [stored_identity],
                                       ignore_index=True), keys + child_key)
        joins = np.flatnonzero(event == JOIN)
        leaves = np.flatnonzero((event == LEAVE_MOVED) | (event == LEAVE_DELETED))
        v_identity = np.concatenate([identity[:len(children)], identity[len(children):][joins]])
        v_start = np.concatenate([np.full(len(children), -1), joins])
        v_end, _ = version_ends(v_identity, v_start, identity[len(children):][leaves], leaves)
        v_fk = np.concatenate([c_fk, fk[joins]])
        v_ok = np.concatenate([children[OK].to_numpy(dtype=bool), _flag(rows[OK])[joins]])
        v_time = np.concatenate([children[TIME].to_numpy(dtype=np.int64), t[joins]])
        v_values = pd.concat([f for f in (children[child_cols], rows.loc[joins, child_cols]) if len(f)]
                             or [children[child_cols]], ignore_index=True)

        # rows: (event, slot, order, child version, event of a leaving child, whole child?, parent?, tombstone, time,
        # always): a child's key comes from its version, or from the leave event; its other columns only when whole
        out = []
        pairs = pd.DataFrame({"q": np.flatnonzero(is_parent), "k": fk[is_parent]}).merge(
            pd.DataFrame({"v": np.arange(len(v_fk)), "k": v_fk}), on="k")
        q, v = pairs["q"].to_numpy(), pairs["v"].to_numpy()
        live = (v_start[v] <= q) & (q < v_end[v])
        q = np.concatenate([q[live], joins])
        v = np.concatenate([v[live], len(children) + np.arange(len(joins))])
        joined = v_ok[v] & has_parent[q]
        padded = ~joined & child_outer
        out.append((q, 0, v, v, np.full(len(q), -1), joined | padded, joined, ~(joined | padded),
                    np.where(joined, np.maximum(np.maximum(t[q], v_time[v]), parent_time[q]),
                             np.where(padded, np.maximum(t[q], v_time[v]), t[q])), np.zeros(len(q), bool)))
        gone = leaves[(event[leaves] == LEAVE_DELETED) | parent_outer]  # the row keyed (child, old parent) is gone
        out.append((gone, 0, np.zeros(len(gone), np.int64), np.full(len(gone), -1), gone, False, False, True,
                    np.where(has_parent[gone], np.maximum(t[gone], parent_time[gone]), t[gone]),
                    (event[gone] == LEAVE_DELETED) & (not child_outer) & (not parent_outer)))
        if parent_outer:  # after every event, its parent's own row: while no ok child is under it
            delta = np.zeros(n, np.int64)
            np.add.at(delta, v_start[v_start >= 0], v_ok[v_start >= 0].astype(np.int64))
            ending = np.isfinite(v_end)
            np.add.at(delta, v_end[ending].astype(np.int64), -v_ok[ending].astype(np.int64))
            stored_ok = np.bincount(c_fk[children[OK].to_numpy(dtype=bool)], minlength=len(codes) + 1)
            ok_children = stored_ok[fk] + pd.Series(delta).groupby(fk, sort=False).cumsum().to_numpy()
            alone = has_parent & (ok_children == 0)
            every = np.arange(n)
            out.append((every, 1, np.zeros(n, np.int64), np.full(n, -1), np.full(n, -1), False, alone, ~alone,
                        np.where(alone, np.maximum(t, parent_time), t), np.zeros(n, bool)))
        q, slot, order, version, leaving, whole, with_parent, tombstone, time, always = (
            np.concatenate([np.broadcast_to(np.asarray(part[i]), len(part[0])) for part in out]) for i in range(10))
        rank = np.lexsort((order, slot, q))
        q, version, leaving, whole, with_parent, tombstone, time, always = (
            a[rank] for a in (q, version, leaving, whole, with_parent, tombstone, time, always))
        number = pd.Series(q).groupby(q, sort=False).cumcount().to_numpy()
        result = {c: take(v_values[c].to_numpy(), version, (version >= 0) & whole) for c in child_cols}
        for c in child_key:
            result[c] = np.where(version >= 0, take(v_values[c].to_numpy(), version, version >= 0),
                                 take(rows[c].to_numpy(), leaving, leaving >= 0))
        result.update({c: np.where(with_parent, parent_values[c][q], None) for c in parent_cols})
        result.update({jk: rows[k].to_numpy()[q] for jk, k in zip(join_key, keys)})
        result.update({ROWTIME: time, SEQ: rows[SEQ].to_numpy()[q], SUB: event[q] * SUB_STRIDE + number,
                       STREAM_TIME: rows[STREAM_TIME].to_numpy()[q], TOMBSTONE: tombstone, ALWAYS: always})
        columns = child_cols + parent_cols + join_key + list(META) + [TOMBSTONE, ALWAYS]

        last = _last_of(fk[is_parent])  # each parent after the batch
        changed = np.flatnonzero(is_parent)[last]
        keep = alive[changed] | (stored_at[changed] >= 0)
        changed = changed[keep]
        parent_changes = rows.loc[changed, keys + parent_cols].assign(
            **{TIME: t[changed], GONE: ~alive[changed]}).reset_index(drop=True)
        touched = np.concatenate([joins, leaves])
        final = touched[_last_of(identity[len(children):][touched], order=touched)]  # each child after the batch
        existed = np.isin(identity[len(children):][final], identity[:len(children)])
        final = final[(event[final] == JOIN) | existed]
        child_changes = rows.loc[final, keys + child_key + child_cols].set_axis(
            keys + pk_names + child_cols, axis=1).assign(**{TIME: t[final], OK: _flag(rows[OK])[final],
                                                             GONE: event[final] != JOIN}).reset_index(drop=True)
        meta["rows"] = (len(apply_changes(meta["parents"], segments, stored_parents, parent_changes, keys))
                        + len(apply_changes(meta["children"], segments, stored_children, child_changes, keys + pk_names)))
        return pd.DataFrame(result)[columns], meta

    return step


def _flag(column: pd.Series) -> np.ndarray:
    """A boolean column that events may lack (None/NaN: false)."""
    return np.asarray(column.to_numpy(dtype=object) == True, dtype=bool)  # noqa: E712 - None and NaN are not True


def _last_up_to(flag: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """For each row, the position of the last flagged row of its code at or before it, or -1."""
    marked = pd.Series(np.where(flag, np.arange(len(flag)), np.nan))
    filled = marked.groupby(codes, sort=False).ffill().to_numpy()
    return np.where(np.isnan(filled), -1, filled).astype(np.int64)


def _last_of(codes: np.ndarray, order=None) -> np.ndarray:
    """Positions (into ``codes``) of each code's last row, by ``order`` (default: position)."""
    if order is None:
        return np.flatnonzero(~pd.Series(codes).duplicated(keep="last").to_numpy())
    by_order = np.argsort(order, kind="stable")
    return by_order[~pd.Series(codes[by_order]).duplicated(keep="last").to_numpy()]


def _resolve_step(out_key):
    """Stage 3, per result-key bucket: the last event per key and record wins; a tombstone is written only for
    a key that holds a row before it (the previous event of its key in the batch, else the stored keys), or
    when it must be (``ALWAYS``)."""
    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"table": new_table_log(), "dropped": {}, "rows": 0}
        rows = rows.sort_values([SEQ, SUB], kind="stable")
        last = rows.drop_duplicates(out_key + [SEQ], keep="last").reset_index(drop=True)
        stored = read_table(meta["table"], segments, out_key, [])
        found = stored.rows_for(last)
        codes = key_codes(pd.concat([found[out_key], last[out_key]], ignore_index=True), out_key)
        stored_live = np.isin(codes[len(found):], codes[:len(found)])
        before = previous_row(codes[len(found):])
        tombstone, always = last[TOMBSTONE].to_numpy(dtype=bool), last[ALWAYS].to_numpy(dtype=bool)
        live = np.where(before >= 0, ~tombstone[np.maximum(before, 0)], stored_live)
        final = ~pd.Series(codes[len(found):]).duplicated(keep="last").to_numpy() & (~tombstone | stored_live)
        changes = last.loc[final, out_key].assign(**{GONE: tombstone[final]}).reset_index(drop=True)
        meta["rows"] = len(apply_changes(meta["table"], segments, stored, changes, out_key))
        return last[~tombstone | live | always], meta

    return step


OPERATOR = ForeignKeyJoin()
