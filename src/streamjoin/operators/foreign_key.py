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

from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StructField, StructType

from ..plan.joins import foreign_key_sides
from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, TOMBSTONE, Join
from .base import DeclaredState, LoweringContext
from .keyed_inputs import (
    BUCKET, DELETE, NULL_KEY, OK, bucketed, count_dropped, integral_columns, key_names, payload, restore_integers,
    tag_side,
)
from .state import apply_changes, as_changes, new_table_log, read_table, rows_for, run_segmented

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
    purged="a row at its tombstone")


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
        events = run_segmented(children, BUCKET, _subscribe_step(child_key, keys, child_cols, integral), event_schema)

        parents = tag_side(parent, 1, parent_side, keys, parent_node).withColumn(EVENT, F.lit(PARENT_CHANGE))
        both = bucketed(events.unionByName(parents, allowMissingColumns=True), keys, buckets)
        types.update({f.name: f.dataType for f in both.schema.fields})
        result_schema = StructType(
            [StructField(c, types[c]) for c in child_cols + parent_cols]
            + [StructField(jk, types[k]) for jk, k in zip(join.join_key, keys)]
            + [StructField(c, LongType()) for c in META] + [StructField(TOMBSTONE, BooleanType())])
        step = _parent_step(child_key, keys, child_cols, parent_cols, list(join.join_key), child_outer, parent_outer,
                            integral_columns(both, child_key + keys))
        results = run_segmented(both, BUCKET, step, StructType(result_schema.fields + [StructField(ALWAYS, BooleanType())]))

        out_key = list(join.key)
        return run_segmented(bucketed(results, out_key, buckets), BUCKET, _resolve_step(out_key), result_schema)


def _subscribe_step(child_key, keys, child_cols, integral):
    """Stage 1, per child-key bucket: child changes → leave/join events routed by foreign key."""
    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"table": new_table_log(), "dropped": {}, "rows": 0}
        rows = restore_integers(rows, integral).sort_values([SEQ, SUB], kind="stable")
        stored = read_table(meta["table"], segments, child_key, keys)
        pointers = _as_dict(rows_for(stored, child_key, rows), child_key, keys)  # child key -> its foreign key
        loaded = set(pointers)
        out: list[tuple] = []
        pks = rows[child_key].itertuples(index=False, name=None)
        fks = rows[keys].itertuples(index=False, name=None)
        values = rows[child_cols].itertuples(index=False, name=None)
        flags = zip(rows[DELETE].to_numpy(dtype=bool), rows[OK].to_numpy(dtype=bool),
                    *[rows[c].to_numpy() for c in META])
        empty = (None,) * len(child_cols)
        positions = [child_cols.index(k) for k in child_key]
        for pk, fk, value, (deleted, ok, *meta_values) in zip(pks, fks, values, flags):
            pk, fk = _clean(pk), _clean(fk)
            if any(v is None for v in pk):
                count_dropped(meta, "null_key", 1)
                continue
            had = pk in pointers
            key_only = _with_key(empty, positions, pk)
            if deleted:
                if had:
                    out.append(key_only + pointers.pop(pk) + (LEAVE_DELETED, False, *meta_values))
                continue
            if had and pointers[pk] != fk:
                out.append(key_only + pointers[pk] + (LEAVE_MOVED, False, *meta_values))
            out.append(tuple(value) + tuple(fk) + (JOIN, bool(ok), *meta_values))
            pointers[pk] = fk
        changes = as_changes(pointers, loaded, child_key, keys)
        meta["rows"] = len(apply_changes(meta["table"], segments, stored, changes, child_key))
        return pd.DataFrame(out, columns=child_cols + keys + [EVENT, OK, *META]), meta

    return step


def _as_dict(rows: pd.DataFrame, keys: list[str], columns: list[str]) -> dict:
    """Table rows as {key tuple: tuple of ``columns``}, nulls as None."""
    values = rows[columns].itertuples(index=False, name=None) if columns else iter(lambda: (), None)
    return {_clean(key): tuple(row) for key, row in zip(rows[keys].itertuples(index=False, name=None), values)}


def _parent_step(child_key, keys, child_cols, parent_cols, join_key, child_outer, parent_outer, integral):
    """Stage 2, per foreign-key bucket: parents and their children; every event emits affected results."""
    no_child, no_parent = (None,) * len(child_cols), (None,) * len(parent_cols)
    positions = [child_cols.index(k) for k in child_key]

    pk_names = [f"__pk{i}" for i in range(len(child_key))]

    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"parents": new_table_log("parents"), "children": new_table_log("children", CHILD_SEGMENTS),
                        "dropped": {}, "rows": 0}
        rows = restore_integers(rows, integral).sort_values([SEQ, SUB, EVENT], kind="stable")
        stored_parents = read_table(meta["parents"], segments, keys, parent_cols + [TIME])
        stored_children = read_table(meta["children"], segments, keys + pk_names, child_cols + [TIME, OK])
        parents = {k: (v[:-1], v[-1]) for k, v in  # parent key -> (columns, time)
                   _as_dict(rows_for(stored_parents, keys, rows), keys, parent_cols + [TIME]).items()}
        loaded_children = _as_dict(rows_for(stored_children, keys, rows), keys + pk_names, child_cols + [TIME, OK])
        children: dict = {}  # parent key -> {child key -> (columns, time, matches)}
        for key, values in loaded_children.items():
            children.setdefault(key[:len(keys)], {})[key[len(keys):]] = (values[:-2], int(values[-2]), bool(values[-1]))
        loaded_parents = set(parents)
        out: list[tuple] = []
        fks = rows[keys].itertuples(index=False, name=None)
        child_values = rows[child_cols].itertuples(index=False, name=None)
        parent_values = rows[parent_cols].itertuples(index=False, name=None)
        flags = zip(rows[EVENT].to_numpy(), rows[DELETE].to_numpy(dtype=object), rows[OK].to_numpy(dtype=object),
                    rows[NULL_KEY].to_numpy(dtype=object), *[rows[c].to_numpy() for c in META])
        for fk, child, parent, (event, deleted, ok, null_key, t, seq, sub, st) in zip(fks, child_values, parent_values, flags):
            fk = _clean(fk)
            emitted: list[tuple] = []

            def emit(child_row, parent_row, time, tombstone=False, always=False):
                emitted.append(child_row + parent_row + tuple(fk) + (int(time), int(seq),
                               int(event) * SUB_STRIDE + len(emitted), int(st), tombstone, always))

            def result(pk):
                c_row, c_time, c_ok = children[fk][pk]
                p = parents.get(fk) if c_ok else None
                if p is not None:
                    emit(c_row, p[0], max(t, c_time, p[1]))
                elif child_outer:
                    emit(c_row, no_parent, max(t, c_time))
                else:
                    emit(_with_key(no_child, positions, pk), no_parent, t, True)

            def parent_only():
                p = parents.get(fk)
                if p is not None and not any(m for _, _, m in children.get(fk, {}).values()):
                    emit(no_child, p[0], max(t, p[1]))
                else:
                    emit(no_child, no_parent, t, True)

            if event == PARENT_CHANGE:
                if null_key == True:  # noqa: E712 - None on events
                    count_dropped(meta, "null_key", 1)
                    continue
                if deleted or not ok:
                    parents.pop(fk, None)
                else:
                    parents[fk] = (tuple(parent), int(t))
                for pk in children.get(fk, {}):
                    result(pk)
            else:
                pk = _clean(child[i] for i in positions)
                if event == JOIN:
                    children.setdefault(fk, {})[pk] = (tuple(child), int(t), bool(ok))
                    result(pk)
                else:
                    kids = children.get(fk, {})
                    kids.pop(pk, None)
                    if not kids:
                        children.pop(fk, None)
                    if event == LEAVE_DELETED or parent_outer:  # the row keyed (child, old parent) is gone
                        p = parents.get(fk)
                        emit(_with_key(no_child, positions, pk), no_parent, max(t, p[1]) if p is not None else t, True,
                             always=event == LEAVE_DELETED and not child_outer and not parent_outer)
            if parent_outer:
                parent_only()
            out.extend(emitted)
        parent_changes = as_changes({k: (*v[0], v[1]) for k, v in parents.items()}, loaded_parents, keys, parent_cols + [TIME])
        flat = {fk + pk: (*row, time, ok) for fk, kids in children.items() for pk, (row, time, ok) in kids.items()}
        child_changes = as_changes(flat, loaded_children, keys + pk_names, child_cols + [TIME, OK])
        meta["rows"] = (len(apply_changes(meta["parents"], segments, stored_parents, parent_changes, keys))
                        + len(apply_changes(meta["children"], segments, stored_children, child_changes, keys + pk_names)))
        columns = child_cols + parent_cols + join_key + list(META) + [TOMBSTONE, ALWAYS]
        return pd.DataFrame(out, columns=columns), meta

    return step


def _resolve_step(out_key):
    """Stage 3, per result-key bucket: the last event per key and record wins; tombstones only for live keys."""
    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"table": new_table_log(), "dropped": {}, "rows": 0}
        rows = rows.sort_values([SEQ, SUB], kind="stable")
        last = rows.drop_duplicates(out_key + [SEQ], keep="last")
        stored = read_table(meta["table"], segments, out_key, [])
        live = _as_dict(rows_for(stored, out_key, last), out_key, [])
        loaded = set(live)
        keep = np.zeros(len(last), dtype=bool)
        for i, (key, tombstone, always) in enumerate(zip(last[out_key].itertuples(index=False, name=None),
                                                         last[TOMBSTONE].to_numpy(dtype=bool),
                                                         last[ALWAYS].to_numpy(dtype=bool))):
            key = _clean(key)
            if not tombstone:
                live[key] = ()
                keep[i] = True
            elif key in live or always:
                live.pop(key, None)
                keep[i] = True
        meta["rows"] = len(apply_changes(meta["table"], segments, stored, as_changes(live, loaded, out_key, []), out_key))
        return last[keep], meta

    return step


def _clean(values) -> tuple:
    """A key as a hashable tuple in which every null is None (pandas may hand over NaN)."""
    return tuple(None if v is None or v != v else v for v in values)


def _with_key(row: tuple, positions: list[int], key: tuple) -> tuple[Any, ...]:
    values = list(row)
    for p, v in zip(positions, key):
        values[p] = v
    return tuple(values)


OPERATOR = ForeignKeyJoin()
