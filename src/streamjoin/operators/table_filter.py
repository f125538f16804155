"""WHERE or HAVING over a table (ksqlDB, Lenses), as Kafka Streams filters a ``KTable`` with its old values
(``KTableFilter``): a row that passes is written; a row that fails, or a delete, is written as a tombstone
only when its key's previous row passed. A key the result never held gets no tombstone (ksqlDB's
"table table join with where clause": the joined rows that fail WHERE before any passes write nothing).
Flink's filters over changelogs stay stateless (``lower.lowering``: every failing row deletes its key).

Algorithm: rows are grouped into state buckets by a hash of the table's key. In a bucket, a micro-batch's
rows are sorted by ingestion order; whether a row's predecessor passed is the stored flag of its key for the
key's first row in the batch and the previous row's result after that, so the output does not depend on how
input is cut into micro-batches.

State (per bucket, segmented: ``operators.state``): the keys (with a windowed table's window) whose last row
passed, as a log of change chunks (``state.new_table_log``); a batch reads and writes only its own keys'
entries. Purged: a key leaves when its row fails or is deleted.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructField, StructType

from ..lower.expressions import compile_expr
from ..plan.nodes import SEQ, SUB, TOMBSTONE, WINDOW_END, WINDOW_START, Filter
from .base import DeclaredState, LoweringContext
from .keyed_inputs import BUCKET, bucketed, integral_columns, key_index, restore_integers
from .state import GONE, apply_changes, new_table_log, read_table, run_segmented

PASSES = "__passes"

STATE = DeclaredState(
    "table_filter", 1,
    keeps="the keys whose last row passed the filter",
    segments="chunks of the change log",
    purged="a key whose row fails or is deleted")


class TableFilter:
    def state(self, node: Filter) -> DeclaredState:
        return STATE

    def lower(self, node: Filter, df: DataFrame, ctx: LoweringContext) -> DataFrame:
        passes = F.coalesce(compile_expr(node.predicate), F.lit(False))
        if TOMBSTONE in df.columns:
            passes = passes & ~F.coalesce(F.col(TOMBSTONE), F.lit(False))
        rows = df.withColumn(PASSES, passes).drop(TOMBSTONE)
        keys = list(node.key) + [c for c in (WINDOW_START, WINDOW_END) if c in df.columns]  # a windowed table's key
        columns = [c for c in df.columns if c != TOMBSTONE]
        data = bucketed(rows, keys, ctx.time_buckets)
        schema = StructType([f for f in rows.schema.fields if f.name != PASSES] + [StructField(TOMBSTONE, BooleanType())])
        step = _bucket_step(keys, integral_columns(data, keys), columns + [TOMBSTONE])
        return run_segmented(data, BUCKET, step, schema, ctx)


def _bucket_step(keys: list[str], integral_keys: list[str], out_columns: list[str]):
    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"dropped": {}, "rows": 0, "table": new_table_log()}
        rows = restore_integers(rows, integral_keys).sort_values([SEQ, SUB], kind="stable").reset_index(drop=True)
        store = read_table(meta["table"], segments, keys, [])
        passes = rows[PASSES].to_numpy(dtype=bool)
        index = key_index(rows, keys)
        group = pd.factorize(index)[0]
        before = pd.Series(passes.astype(np.int8)).groupby(group).shift(1, fill_value=-1).to_numpy()
        stored = store.find(rows) >= 0
        previous = np.where(before < 0, stored, before == 1)
        emit = passes | previous
        out = rows[emit].assign(**{TOMBSTONE: ~passes[emit]})
        last = rows.assign(**{GONE: ~passes}).drop_duplicates(keys, keep="last")[keys + [GONE]]
        table = apply_changes(meta["table"], segments, store, last.reset_index(drop=True), keys)
        meta["rows"] = len(table)
        return out[out_columns], meta

    return step


OPERATOR = TableFilter()
