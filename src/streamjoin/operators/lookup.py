"""Flink's lookup join: ``s JOIN t FOR SYSTEM_TIME AS OF s.proc AS r ON r.a = s.x [AND ...]`` where ``t`` is a
table in a database ('jdbc'). Stateless: no operator state, no clock.

Algorithm, per partition of a micro-batch (``mapInArrow``, on the executors):
1. The partition's stream records that may match (key not null, their one-input ON predicates hold).
2. Their distinct join keys, looked up in one query (``connectors.database.Lookup``): in the cache first when
   'lookup.cache' = 'PARTIAL' (one cache per executor, shared by its Python workers and kept across
   micro-batches: ``connectors.lookup_service``; rows leave it at 'max-rows', least recently used first, or when
   their 'expire-after-*' time passed), then in the database for the rest. A failed query is tried again
   'lookup.max-retries' times, a second longer each time, then the query stops with the database's error (the
   table and URL named, the password masked).
3. Each record paired with every row of its key (equalities on any columns: a key may have several rows);
   LEFT: a record with no row (or a null key, as in Flink) is padded with nulls; INNER drops it (a null key
   counted as ``null_key``).

The table's one-input ON predicates and the further ON conditions over both inputs are tested on these
pairs, afterwards, in Spark: INNER keeps the pairs that pass; LEFT keeps a record's passing pairs, or
one padded row when none passes (a second ``mapInArrow`` over the same partition: a record's pairs are
adjacent and never cross a partition).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import BooleanType, LongType, StructField, StructType

from ..connectors.database import Lookup, parse_url, with_retries
from ..connectors.lookup_service import RemoteLookup, describe
from ..lower.expressions import compile_expr
from ..plan.catalog import DatabaseTable
from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, Join, base_scan
from ..plan import expressions as ex
from .base import DeclaredState, LoweringContext
from .keyed_inputs import NULL_KEY, OK, key_names, observe_dropped, payload, tag_side

STREAM = 0
RECORD, FOUND, PASSES = "__record", "__found", "__passes"  # a record's position in its partition; a row was found
TRIPS = "__trips"  # on one extra row per partition, null elsewhere: the database round trips it made
META = (ROWTIME, SEQ, SUB, STREAM_TIME)


class LookupJoin:
    def state(self, join: Join) -> Optional[DeclaredState]:
        return None

    def evaluates_condition(self, join: Join) -> bool:
        return True  # on the candidate pairs, before a LEFT join pads (see the module's docstring)

    def lower(self, join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext) -> DataFrame:
        keys = key_names(len(join.key))
        stream = tag_side(left, STREAM, join.left_side, keys, join.left)
        outer = join.join_type == "LEFT"
        if not outer:
            stream = observe_dropped(stream, ctx, "null_key", F.col(NULL_KEY))
        scan = base_scan(join.right)
        columns = {f.id: f.name for f in scan.fields if not f.hidden}
        table_cols = payload(right)
        types = {f.name: f.dataType for f in stream.schema.fields} | {f.name: f.dataType for f in right.schema.fields}
        condition = ex.conjoin([t for t in (join.right_side.filter, join.condition) if t is not None])
        marks = outer and condition is not None  # a LEFT join's pairs are settled after the condition
        schema = StructType(
            [StructField(c, types[c]) for c in payload(left) + table_cols]
            + [StructField(jk, types[k]) for jk, k in zip(join.key, keys)]
            + [StructField(c, LongType()) for c in META]
            + ([StructField(RECORD, LongType()), StructField(FOUND, BooleanType())] if marks else [])
            + [StructField(TRIPS, LongType())]
        )
        plan = _LookupPlan(  # validation admits only plain columns of the table as its lookup keys
            database=scan.source.database, key_columns=[columns[e.id] for e in join.right_side.keys],
            table_cols=table_cols, db_columns=[columns.get(c) for c in table_cols], keys=keys,
            stream_cols=payload(left), key_ids=list(join.key), outer=outer, marks=marks,
            arrow_types={c: to_arrow_type(types[c]) for c in table_cols},
            key_schema=pa.schema([(k, to_arrow_type(types[k])) for k in keys]),
        )
        joined = stream.mapInArrow(plan.run, schema)
        if ctx.observe_counts is not None:
            joined = ctx.observe_counts(joined, {"lookup_round_trips": F.col(TRIPS)})
        joined = joined.where(F.col(TRIPS).isNull()).drop(TRIPS)
        schema = StructType([f for f in schema.fields if f.name != TRIPS])
        if condition is None:
            return joined
        passes = F.coalesce(compile_expr(condition), F.lit(False))
        if not outer:
            return joined.where(passes)
        settled = StructType([f for f in schema.fields if f.name not in (RECORD, FOUND)])
        return joined.withColumn(PASSES, passes & F.col(FOUND)).mapInArrow(
            _settle(table_cols, [f.name for f in settled.fields]), settled)


class _LookupPlan:
    """What the executors need to run one lookup join (pickled into the ``mapInArrow`` function)."""

    def __init__(self, database: DatabaseTable, key_columns, table_cols, db_columns, keys, stream_cols, key_ids,
                 outer: bool, marks: bool, arrow_types: dict, key_schema: pa.Schema):
        self.database, self.key_columns = database, list(key_columns)
        self.table_cols, self.db_columns = list(table_cols), list(db_columns)
        self.keys, self.stream_cols, self.key_ids = list(keys), list(stream_cols), list(key_ids)
        self.outer, self.marks, self.arrow_types, self.key_schema = outer, marks, arrow_types, key_schema

    def run(self, batches):
        batches = list(batches)
        records = pa.Table.from_batches(batches) if batches else None
        if records is None or records.num_rows == 0:
            return
        may_match = pc.fill_null(records.column(OK), False)
        candidates = records.filter(may_match).select(self.keys)
        distinct = candidates.group_by(self.keys).aggregate([]) if candidates.num_rows else candidates
        rows, trips = _rows(self, distinct)
        record_index, row_index = _pairs(records, may_match, rows, self.keys, self.outer)
        out = {c: records.column(c).take(record_index) for c in self.stream_cols}
        for c in self.table_cols:  # a column the database does not hold (the table's hidden ROWTIME) is null
            out[c] = rows.column(c).take(row_index) if c in rows.column_names else \
                pa.nulls(len(record_index), self.arrow_types[c])
        for jk, k in zip(self.key_ids, self.keys):
            out[jk] = records.column(k).take(record_index)
        for c in META:
            out[c] = records.column(c).take(record_index)
        if self.marks:
            out[RECORD] = record_index
            out[FOUND] = pc.is_valid(row_index)
        out[TRIPS] = pa.nulls(len(record_index), pa.int64())
        joined = pa.table(out)
        yield from joined.to_batches()
        marker = {c: pa.nulls(1, joined.schema.field(c).type) for c in joined.column_names}
        yield pa.RecordBatch.from_pydict({**marker, TRIPS: pa.array([trips], pa.int64())}, schema=joined.schema)


_LOOKUPS: dict = {}  # per Python worker: (database, key columns, columns, key types) -> its Lookup


def _lookup(plan: _LookupPlan):
    """This worker's ``Lookup`` for the plan's table, key columns and columns: its own without a cache; with
    'PARTIAL', a handle on the executor's cache (``connectors.lookup_service``), shared by its workers."""
    db = plan.database
    fetched = [(c, db_c) for c, db_c in zip(plan.table_cols, plan.db_columns) if db_c is not None]
    schema = pa.schema([pa.field(c, plan.arrow_types[c]) for c, _ in fetched] + list(plan.key_schema))
    identity = (db, tuple(plan.key_columns), tuple(fetched), plan.key_schema)
    lookup = _LOOKUPS.get(identity)
    if lookup is None:
        endpoint, columns = parse_url(db.url, db.username, db.password), [d for _, d in fetched]
        if db.cache == "PARTIAL":
            limits = (db.cache_max_rows, db.expire_after_write_ms, db.expire_after_access_ms, db.cache_missing_key)
            lookup = RemoteLookup(describe(endpoint, db.table, plan.key_columns, columns, schema, plan.key_schema,
                                           limits))
        else:
            lookup = Lookup(endpoint, db.table, plan.key_columns, columns, schema, plan.key_schema)
        _LOOKUPS[identity] = lookup
    return lookup


def _rows(plan: _LookupPlan, distinct: pa.Table) -> tuple[pa.Table, int]:
    """The database rows of ``distinct`` keys (the table's columns, by plan id, and the keys ``__k*``), and the
    round trips that took."""
    db, lookup = plan.database, _lookup(plan)
    before = lookup.round_trips
    rows = with_retries(lambda: lookup.rows(distinct), db.max_retries, db.table, db.url, db.password)
    return rows, lookup.round_trips - before


def _pairs(records: pa.Table, may_match: pa.ChunkedArray, rows: pa.Table, keys, outer: bool):
    """(record index, row index) of every matching pair, in record order; LEFT: a record with no row once,
    with a null row index."""
    probe = records.select(keys).append_column(RECORD, pa.array(np.arange(records.num_rows)))
    probe = probe.filter(may_match)
    build = rows.select(keys).append_column("__row", pa.array(np.arange(rows.num_rows)))
    matched = probe.join(build, keys, join_type="inner").select([RECORD, "__row"]) if rows.num_rows else \
        pa.table({RECORD: pa.array([], pa.int64()), "__row": pa.array([], pa.int64())})
    record_index = matched.column(RECORD).to_numpy()
    row_index = matched.column("__row").to_numpy()
    if outer:
        paired = np.zeros(records.num_rows, bool)
        paired[record_index] = True
        alone = np.flatnonzero(~paired)
        record_index = np.concatenate([record_index, alone])
        row_index = pa.array(np.concatenate([row_index, np.zeros(len(alone), np.int64)]),
                             mask=np.concatenate([np.zeros(len(matched), bool), np.ones(len(alone), bool)]))
    else:
        row_index = pa.array(row_index, pa.int64())
    order = np.lexsort((pc.fill_null(row_index, -1).to_numpy(zero_copy_only=False), record_index))
    return pa.array(record_index[order], pa.int64()), row_index.take(pa.array(order))


def _settle(table_cols, columns):
    """LEFT join with conditions: a record's passing pairs, else the record once, padded."""

    def settle(batches):
        batches = list(batches)
        pairs = pa.Table.from_batches(batches) if batches else None
        if pairs is None or pairs.num_rows == 0:
            return
        record = pairs.column(RECORD).to_numpy()
        passes = pc.fill_null(pairs.column(PASSES), False).to_numpy(zero_copy_only=False)
        passing_records = np.unique(record[passes])
        first = np.unique(record, return_index=True)[1]
        lonely = first[~np.isin(record[first], passing_records)]
        keep = np.sort(np.concatenate([np.flatnonzero(passes), lonely]))
        kept = pairs.take(pa.array(keep))
        as_fetched = pa.array(~np.isin(keep, lonely))
        out = {}
        for c in columns:
            col = kept.column(c)
            out[c] = pc.if_else(as_fetched, col, pa.nulls(len(col), col.type)) if c in table_cols else col
        yield from pa.table(out).to_batches()

    return settle


OPERATOR = LookupJoin()
