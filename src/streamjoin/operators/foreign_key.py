"""Foreign-key table-table join (ksqlDB): one table (the child) joins on a non-key column, the other (the
parent) on its whole primary key.

Semantics (DIALECT §3). The result has one row per child row, keyed by the child's primary key (ksqlDB);
a change of a parent updates (or deletes) every child row pointing at it, a change of a child's foreign key
moves its result to the new parent. INNER: a child row with its parent; child-preserving outer join (ksqlDB
LEFT): a child row with its parent or nulls. Parent-preserving outer joins, which ksqlDB lacks, add one row
per parent without matching children, keyed by (null child key, parent key), so the result key is then
(child key, join key). A tombstone is emitted only for a result row that existed. Output time is the later
of the triggering change and the rows joined.

Algorithm: three keyed stages, as Kafka Streams' subscription/response design, each on
``operators.state`` with rows grouped by a hash bucket:
1. by child key — remember each child's foreign key; a child change becomes a *leave* event for the
   parent it pointed at before (if it moved or was deleted) and a *join* event for its new parent;
2. by foreign key — the parents and, per parent key, the children pointing at it; every join/leave event
   and parent change, in ingestion order, emits the new result of each affected child (and, when parents
   are preserved, of the parent's own row), as a row or a "no row" marker;
3. by result key — remember which result keys exist; per key and input record the last event wins: a row
   is emitted, a "no row" marker becomes a tombstone only if the key existed.
The events of one input record carry its ingestion order and are numbered leave-before-join, so the output
order does not depend on batch cuts.

State (per bucket, pickled in Spark's state store): stage 1 child key → foreign key of every live child;
stage 2 every live parent row and every live child row under its foreign key; stage 3 the set of live
result keys. A tombstone removes its row from each stage at once.
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
from .base import LoweringContext
from .keyed_inputs import (
    BUCKET, DELETE, NULL_KEY, OK, bucketed, count_dropped, integral_columns, key_names, payload, restore_integers,
    tag_side,
)
from .state import run_bucketed

EVENT = "__event"
LEAVE_MOVED, LEAVE_DELETED, JOIN, PARENT_CHANGE = 0, 1, 2, 3  # also their order within one input record
SUB_STRIDE = 1_000_000  # output _sub = event kind * stride + position among the record's results
META = (ROWTIME, SEQ, SUB, STREAM_TIME)


class ForeignKeyJoin:
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

        children = bucketed(tag_side(child, 0, child_side.keys, child_side.filter, keys), child_key, buckets)
        types = {f.name: f.dataType for f in children.schema.fields}
        event_schema = StructType(
            [StructField(c, types[c]) for c in child_cols + keys] + [StructField(EVENT, IntegerType()), StructField(OK, BooleanType())]
            + [StructField(c, LongType()) for c in META])
        integral = integral_columns(children, child_key + keys)
        events = run_bucketed(children, BUCKET, _subscribe_step(child_key, keys, child_cols, integral), event_schema)

        parents = tag_side(parent, 1, parent_side.keys, parent_side.filter, keys, parent_node).withColumn(EVENT, F.lit(PARENT_CHANGE))
        both = bucketed(events.unionByName(parents, allowMissingColumns=True), keys, buckets)
        types.update({f.name: f.dataType for f in both.schema.fields})
        result_schema = StructType(
            [StructField(c, types[c]) for c in child_cols + parent_cols]
            + [StructField(jk, types[k]) for jk, k in zip(join.join_key, keys)]
            + [StructField(c, LongType()) for c in META] + [StructField(TOMBSTONE, BooleanType())])
        step = _parent_step(child_key, keys, child_cols, parent_cols, list(join.join_key), child_outer, parent_outer,
                            integral_columns(both, child_key + keys))
        results = run_bucketed(both, BUCKET, step, result_schema)

        out_key = list(join.key)
        return run_bucketed(bucketed(results, out_key, buckets), BUCKET, _resolve_step(out_key), result_schema)


def _subscribe_step(child_key, keys, child_cols, integral):
    """Stage 1, per child-key bucket: child changes → leave/join events routed by foreign key."""
    def step(saved, rows: pd.DataFrame):
        saved = saved or {"store": {}, "dropped": {}}
        pointers: dict = saved["store"]  # child key -> the foreign key it points at
        rows = restore_integers(rows, integral).sort_values([SEQ, SUB], kind="stable")
        out: list[tuple] = []
        pks = rows[child_key].itertuples(index=False, name=None)
        fks = rows[keys].itertuples(index=False, name=None)
        values = rows[child_cols].itertuples(index=False, name=None)
        flags = zip(rows[DELETE].to_numpy(dtype=bool), rows[OK].to_numpy(dtype=bool),
                    *[rows[c].to_numpy() for c in META])
        empty = (None,) * len(child_cols)
        positions = [child_cols.index(k) for k in child_key]
        for pk, fk, value, (deleted, ok, *meta) in zip(pks, fks, values, flags):
            pk, fk = _clean(pk), _clean(fk)
            if any(v is None for v in pk):
                count_dropped(saved, "null_key", 1)
                continue
            had = pk in pointers
            key_only = _with_key(empty, positions, pk)
            if deleted:
                if had:
                    out.append(key_only + pointers.pop(pk) + (LEAVE_DELETED, False, *meta))
                continue
            if had and pointers[pk] != fk:
                out.append(key_only + pointers[pk] + (LEAVE_MOVED, False, *meta))
            out.append(tuple(value) + tuple(fk) + (JOIN, bool(ok), *meta))
            pointers[pk] = fk
        return pd.DataFrame(out, columns=child_cols + keys + [EVENT, OK, *META]), saved

    return step


def _parent_step(child_key, keys, child_cols, parent_cols, join_key, child_outer, parent_outer, integral):
    """Stage 2, per foreign-key bucket: parents and their children; every event emits affected results."""
    no_child, no_parent = (None,) * len(child_cols), (None,) * len(parent_cols)
    positions = [child_cols.index(k) for k in child_key]

    def step(saved, rows: pd.DataFrame):
        saved = saved or {"store": {}, "children": {}, "dropped": {}}
        parents: dict = saved["store"]  # parent key -> (columns, time)
        children: dict = saved["children"]  # parent key -> {child key -> (columns, time, matches)}
        rows = restore_integers(rows, integral).sort_values([SEQ, SUB, EVENT], kind="stable")
        out: list[tuple] = []
        fks = rows[keys].itertuples(index=False, name=None)
        child_values = rows[child_cols].itertuples(index=False, name=None)
        parent_values = rows[parent_cols].itertuples(index=False, name=None)
        flags = zip(rows[EVENT].to_numpy(), rows[DELETE].to_numpy(dtype=object), rows[OK].to_numpy(dtype=object),
                    rows[NULL_KEY].to_numpy(dtype=object), *[rows[c].to_numpy() for c in META])
        for fk, child, parent, (event, deleted, ok, null_key, t, seq, sub, st) in zip(fks, child_values, parent_values, flags):
            fk = _clean(fk)
            emitted: list[tuple] = []

            def emit(child_row, parent_row, time, tombstone=False):
                emitted.append(child_row + parent_row + tuple(fk) + (int(time), int(seq),
                               int(event) * SUB_STRIDE + len(emitted), int(st), tombstone))

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
                    count_dropped(saved, "null_key", 1)
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
                        emit(_with_key(no_child, positions, pk), no_parent, t, True)
            if parent_outer:
                parent_only()
            out.extend(emitted)
        saved["rows"] = len(parents) + sum(len(k) for k in children.values())
        columns = child_cols + parent_cols + join_key + list(META) + [TOMBSTONE]
        return pd.DataFrame(out, columns=columns), saved

    return step


def _resolve_step(out_key):
    """Stage 3, per result-key bucket: the last event per key and record wins; tombstones only for live keys."""
    def step(saved, rows: pd.DataFrame):
        saved = saved or {"store": set(), "dropped": {}}
        live: set = saved["store"]
        rows = rows.sort_values([SEQ, SUB], kind="stable")
        last = rows.drop_duplicates(out_key + [SEQ], keep="last")
        keep = np.zeros(len(last), dtype=bool)
        for i, (key, tombstone) in enumerate(zip(last[out_key].itertuples(index=False, name=None),
                                                 last[TOMBSTONE].to_numpy(dtype=bool))):
            key = _clean(key)
            if not tombstone:
                live.add(key)
                keep[i] = True
            elif key in live:
                live.discard(key)
                keep[i] = True
        return last[keep], saved

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
