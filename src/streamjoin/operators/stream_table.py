"""Stream-table join (KSQL, Lenses, SQLstream): each stream record looks up the table as of ingestion order.

Semantics (DIALECT §3). A stream record joins the table row that holds its join key at the moment it is
read: the latest change of that key earlier in ingestion order, unless that change deleted it (a
tombstone) or fails the table's one-input ON predicates. Table changes emit nothing. INNER drops a stream
record without a match; LEFT (and ``table RIGHT JOIN stream``) emits it with the table columns null.
Output time is the stream record's. A stream record with a null join key is dropped and counted.

Two lowerings:
- The table is a changelog (a topic): both inputs are unioned and grouped by a hash bucket of the join
  key (``operators.keyed_inputs``). In each bucket a micro-batch is sorted by ingestion order; every
  stream record finds the latest earlier table change of its key in the same batch (a forward fill per
  key), or else the stored table row. The stream side may join on any expression: the union is a Spark
  shuffle on the expression's value, so the stream is repartitioned by it.
- The table is bounded (a file, SQLstream's static table): it is read once at query start and joined with
  Spark's native stream-static hash join; nothing is kept in streaming state. Its null-key drops are
  counted per batch in the checkpoint (``runtime.observed_counts``).

Lenses exception (DIALECT §3): in a LEFT join whose table is a Lenses ``SELECT TABLE`` view
(``Join.rematch_ms``), a padded stream record waits for its table row, and the first live row of its key
read later (while stream time has not passed the record's time + the retention, 24 h by default) emits it
once more, joined, at the table row's time.

State (changelog table only; per bucket, segmented: ``operators.state``): the live table rows — join key and
the table's columns — as a log of change chunks, one per micro-batch that changed the table, compacted
size-tiered (``state.log_changes``); with the Lenses exception, the
waiting padded records in one more segment, purged once stream time passes their time + the retention;
and, in the bucket's meta value, the count of stream records dropped for a null key and the number of live
rows and waiting records. A batch writes only its own
changes; the table it looks up is the worker's ``state.LiveTable`` (found by key, changed in place) while that
still matches the store, else the chunks replayed. A tombstone, or a change that fails the table's ON predicates, removes its key at once;
nothing else is purged (a table holds every live key, as in ksqlDB).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, Join, Scan, walk
from .base import DeclaredState, LoweringContext
from .keyed_inputs import (
    BUCKET, DELETE, NULL_KEY, OK, SIDE, bucketed, drop_records, integral_columns, observe_dropped, key_names, payload,
    restore_integers, tag_side, take,
)
from .state import GONE, LiveTable, apply_changes, new_table_log, read_table, run_segmented

STREAM, TABLE = 0, 1  # sort order within one record: a stream record looks up before its own table copy


STATE = DeclaredState(
    "stream_table", 1,
    keeps="the table's live rows (join key, columns); with the Lenses exception, the padded stream records "
          "waiting for their table row",
    segments="chunks of the table's change log; one segment of waiting records",
    purged="a table row at its tombstone (or when it fails the ON filter); a waiting record once stream time "
           "passes its time + the retention")


class StreamTableJoin:
    def state(self, join: Join) -> Optional[DeclaredState]:
        return None if join.static_table else STATE  # a table from a file: Spark's stream-static join

    def lower(self, join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext) -> DataFrame:
        if join.left.kind == "STREAM":
            stream, stream_side, table, table_side = left, join.left_side, right, join.right_side
            stream_node, table_node = join.left, join.right
        else:  # table RIGHT JOIN stream is stream LEFT JOIN table
            stream, stream_side, table, table_side = right, join.right_side, left, join.left_side
            stream_node, table_node = join.right, join.left
        outer = join.join_type in ("LEFT", "RIGHT")
        keys = key_names(len(join.key))
        s = tag_side(stream, STREAM, stream_side, keys, stream_node)
        t = tag_side(table, TABLE, table_side, keys, table_node)
        if join.static_table:
            return _static_join(join, s, t, keys, outer, ctx)
        stream_cols, table_cols = payload(stream), payload(table)
        data = bucketed(s.unionByName(t, allowMissingColumns=True), keys, ctx.time_buckets)
        types = {f.name: f.dataType for f in data.schema.fields}
        schema = StructType(
            [StructField(c, types[c]) for c in stream_cols + table_cols]
            + [StructField(jk, types[k]) for jk, k in zip(join.key, keys)]
            + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB, STREAM_TIME)]
        )
        step = _bucket_step(keys, integral_columns(data, keys), stream_cols, table_cols, list(join.key), outer,
                            join.rematch_ms)
        return run_segmented(data, BUCKET, step, schema, ctx)


WAITING = -1  # segment number of the padded records waiting for their table row (the table's chunks: 0, 1, ...)


def _bucket_step(keys, integral_keys, stream_cols, table_cols, key_ids, outer: bool, rematch_ms=None):
    """The per-bucket step over segmented state: the table is a log of change chunks (``state.read_table``);
    with ``rematch_ms``, padded stream records wait for their table row in one more segment."""
    waiting_cols = keys + stream_cols + [ROWTIME, SEQ, SUB, STREAM_TIME]

    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"dropped": {}, "rows": 0, "table": new_table_log(), "waiting": 0}
        null_key = rows[NULL_KEY].to_numpy(dtype=bool)
        drop_records(meta, "null_key", rows, null_key & (rows[SIDE].to_numpy() == STREAM))
        rows = restore_integers(rows[~null_key], integral_keys)
        rows = rows.sort_values([SEQ, SUB, SIDE], kind="stable").reset_index(drop=True)
        store = read_table(meta["table"], segments, keys, table_cols)
        out, unmatched = lookup(rows, store, keys, stream_cols, table_cols, key_ids, outer)
        if rematch_ms is not None:
            padded = out[unmatched].assign(**{k: out[jk].to_numpy()[unmatched] for k, jk in zip(keys, key_ids)})
            rematched = _rematch(meta, segments, rows, padded[waiting_cols], keys, table_cols, key_ids, rematch_ms)
            out = pd.concat([out, rematched[list(out.columns)]], ignore_index=True)
        changes = last_changes(rows[rows[SIDE] == TABLE], keys, table_cols)
        table = apply_changes(meta["table"], segments, store, changes, keys)
        meta["rows"] = len(table) + meta.get("waiting", 0)
        return out, meta

    return step


def _rematch(meta, segments, rows, padded, keys, table_cols, key_ids, retention: int) -> pd.DataFrame:
    """Lenses (DIALECT §3): a stream record padded for want of its table row (``padded``: this batch's, as
    waiting rows) waits, up to ``retention`` ms of stream time, and is emitted once more, joined, when a live
    row of its key arrives later in ingestion order — at that table record's time and ingestion position
    (its own position breaking ties). Waiting records leave when re-matched or too old."""
    waiting_cols = list(padded.columns)
    stored = segments.get(WAITING).set_axis(waiting_cols, axis=1) if meta.get("waiting") else padded.iloc[:0]
    waiting = pd.concat([stored, padded], ignore_index=True)
    live = rows[(rows[SIDE] == TABLE).to_numpy() & rows[OK].to_numpy(dtype=bool) & ~rows[DELETE].to_numpy(dtype=bool)]
    emitted = pd.DataFrame(columns=waiting_cols + table_cols + list(key_ids))
    if len(waiting) and len(live):
        pairs = waiting.reset_index().merge(live[keys + table_cols + [ROWTIME, SEQ, STREAM_TIME]].rename(
            columns={ROWTIME: "__t_time", SEQ: "__t_seq", STREAM_TIME: "__t_clock"}), on=keys)
        # a later row, read while the record still waited (stream time not yet past its time + retention)
        clock = pairs["__t_clock"].to_numpy(dtype=float)
        pairs = pairs[(pairs["__t_seq"].to_numpy() > pairs[SEQ].to_numpy())
                      & ~(clock - retention > pairs[ROWTIME].to_numpy(dtype=float))]
        first = pairs.sort_values("__t_seq", kind="stable").drop_duplicates("index")  # the first later table row
        emitted = first.assign(**{jk: first[k].to_numpy() for jk, k in zip(key_ids, keys)},
                               **{SUB: first[SEQ].to_numpy(), ROWTIME: first["__t_time"].to_numpy(),
                                  SEQ: first["__t_seq"].to_numpy()})
        waiting = waiting.drop(index=first["index"].to_numpy())
    clock = rows[STREAM_TIME].to_numpy(dtype=float)
    if len(clock) and not np.isnan(clock).all():
        waiting = waiting[waiting[ROWTIME].to_numpy(dtype=float) >= np.nanmax(clock) - retention]
    if len(waiting) != meta.get("waiting", 0) or len(padded):
        if len(waiting):
            segments.put(WAITING, waiting.reset_index(drop=True))
        elif meta.get("waiting"):
            segments.remove(WAITING)
        meta["waiting"] = len(waiting)
    return emitted


def lookup(rows, store: LiveTable, keys, stream_cols, table_cols, key_ids, outer) -> tuple[pd.DataFrame, np.ndarray]:
    """Every stream record of ``rows`` (sorted by ingestion order) joined with the latest earlier change of its
    key in ``rows``, else with ``store``'s row: the output rows (all of them when ``outer``, else the matched
    ones) and which of them could match but found no live row."""
    is_table = (rows[SIDE] == TABLE).to_numpy()
    position = np.where(is_table, np.arange(len(rows)), np.nan)
    latest = pd.Series(position).groupby([rows[k] for k in keys], sort=False).ffill().to_numpy()
    stream = ~is_table
    recs = rows[stream].reset_index(drop=True)
    in_batch = ~np.isnan(latest[stream])
    batch_pos = np.where(in_batch, latest[stream], 0).astype(np.int64)
    live = (rows[OK].to_numpy(dtype=bool) & ~rows[DELETE].to_numpy(dtype=bool))[batch_pos] & in_batch
    stored_pos = store.find(recs)
    from_store = ~in_batch & (stored_pos >= 0)
    matched = recs[OK].to_numpy(dtype=bool) & (live | from_store)
    out = pd.DataFrame({c: recs[c].to_numpy() for c in stream_cols})
    for c in table_cols:
        value = np.where(in_batch, take(rows[c].to_numpy(), batch_pos, in_batch), take(store.column(c), stored_pos, from_store))
        out[c] = np.where(matched, value, None)
    for jk, k in zip(key_ids, keys):
        out[jk] = recs[k].to_numpy()
    for c in (ROWTIME, SEQ, SUB, STREAM_TIME):
        out[c] = recs[c].to_numpy()
    if outer:  # and which of them found no table row (though they could: their own ON predicates hold)
        return out, recs[OK].to_numpy(dtype=bool) & ~matched
    return out[matched].reset_index(drop=True), np.zeros(int(matched.sum()), bool)


def last_changes(changes: pd.DataFrame, keys, table_cols) -> pd.DataFrame:
    """This batch's table changes as a log chunk: the last change per key wins; a deletion (or a row failing
    the table's ON predicates) removes the key."""
    last = changes.drop_duplicates(keys, keep="last")
    gone = ~last[OK].to_numpy(dtype=bool) | last[DELETE].to_numpy(dtype=bool)
    return last[keys + table_cols].assign(**{GONE: gone}).reset_index(drop=True)


def _static_join(join: Join, stream: DataFrame, table: DataFrame, keys, outer: bool, ctx: LoweringContext) -> DataFrame:
    """Spark's stream-static hash join against a bounded table, loaded once: from a file, the last line per key
    wins (a file holds a changelog); from a database, every row of the key matches (a table's rows, as Flink
    joins a bounded scan). Stream records with a null join key are dropped and counted (an observed metric: no
    state here)."""
    if _reads_database(join):
        live = table.where(F.col(OK) & ~F.col(DELETE))
    else:
        latest = table.withColumn("__rank", F.row_number().over(Window.partitionBy(*keys).orderBy(F.col(SEQ).desc())))
        live = latest.where((F.col("__rank") == 1) & F.col(OK) & ~F.col(DELETE))
    table_cols = payload(table)
    renamed = _loaded(live.select(*table_cols, *[F.col(k).alias(f"__t{k}") for k in keys]), ctx)
    condition = F.col(OK)
    for k in keys:
        condition = condition & (F.col(k) == F.col(f"__t{k}"))
    stream = observe_dropped(stream, ctx, "null_key", F.col(NULL_KEY))
    joined = stream.where(~F.col(NULL_KEY)).join(F.broadcast(renamed), condition, "left" if outer else "inner")
    meta = (ROWTIME, SEQ, SUB, STREAM_TIME)
    return joined.select(*payload(stream), *table_cols, *[F.col(k).alias(jk) for jk, k in zip(join.key, keys)], *meta)


def _loaded(table: DataFrame, ctx: LoweringContext) -> DataFrame:
    """``table`` loaded once, now, as a checkpointed batch result (a streaming plan may not hold row ids or row
    windows): in Spark's reliable checkpoint in ``ctx.loaded_tables`` (any URI), which every micro-batch's
    broadcast reads again and which outlives the executor that wrote it. Lowered outside a query (benchmarks), in
    the executors' memory."""
    if not ctx.loaded_tables:
        return table.localCheckpoint(eager=True)
    table.sparkSession.sparkContext.setCheckpointDir(ctx.loaded_tables)
    return table.checkpoint(eager=True)


def _reads_database(join: Join) -> bool:
    table = join.right if join.left.kind == "STREAM" else join.left
    return any(isinstance(n, Scan) and n.source.database is not None for n in walk(table))


OPERATOR = StreamTableJoin()
