"""GROUP BY over a stream, one changelog update per input record (ksqlDB with caching off).

Algorithm: rows are grouped by the grouping columns (a Spark shuffle); for each group, a micro-batch's
rows are sorted by ingestion order (``_seq``, ``_sub``) and folded one at a time into the group's
accumulators, emitting the group's new aggregate values after each record. The output therefore does
not depend on how input is cut into micro-batches.

State: one value per group — the pickled accumulators (``operators.state``). State is never purged: an unwindowed aggregate needs
every group forever (as in ksqlDB); table TTL is for the Flink issue.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, DecimalType, DoubleType, LongType, StructField, StructType

from ..errors import NotYetSupported
from ..lower.expressions import compile_expr
from ..plan.nodes import ROWTIME, SEQ, SUB, Aggregate
from .state import run_keyed


@dataclass(frozen=True)
class AggSpec:
    """One aggregate: its function, the column holding its argument (None for COUNT(*)), its output id."""

    fn: str
    arg: str | None
    out: str
    distinct: bool = False


def result_type(fn: str, arg_type: DataType | None) -> DataType:
    if fn == "COUNT":
        return LongType()
    if fn == "AVG":
        return DoubleType()
    if fn == "SUM":
        if isinstance(arg_type, DecimalType):
            return DecimalType(38, arg_type.scale)
        return DoubleType() if isinstance(arg_type, DoubleType) or arg_type.typeName() == "float" else LongType()
    if fn in ("COLLECT_LIST", "COLLECT_SET"):
        return ArrayType(arg_type)
    return arg_type  # MIN MAX LATEST_BY_OFFSET EARLIEST_BY_OFFSET


def _fold(fn: str, acc: Any, value: Any, distinct: bool) -> Any:
    """The accumulator after one more record (``value`` is the argument, None = SQL NULL)."""
    if fn == "COUNT":
        if distinct:
            seen = acc or set()
            if value is not None:
                seen.add(value)
            return seen
        return (acc or 0) + (1 if value is not None else 0)
    if value is None:
        return acc
    if fn == "SUM":
        return value if acc is None else acc + value
    if fn == "AVG":
        total, count = acc or (0, 0)
        return (total + value, count + 1)
    if fn == "MIN":
        return value if acc is None or value < acc else acc
    if fn == "MAX":
        return value if acc is None or value > acc else acc
    if fn == "COLLECT_LIST":
        return (acc or []) + [value]
    if fn == "COLLECT_SET":
        return acc if acc and value in acc else (acc or []) + [value]
    if fn == "LATEST_BY_OFFSET":
        return value
    if fn == "EARLIEST_BY_OFFSET":
        return value if acc is None else acc
    raise NotYetSupported(f"aggregate function {fn}", issue=4)


def _result(fn: str, acc: Any, distinct: bool) -> Any:
    if fn == "COUNT":
        return len(acc or ()) if distinct else (acc or 0)
    if fn == "AVG":
        return None if not acc else float(acc[0]) / acc[1]
    return acc


def _scalar(v: Any) -> Any:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return None
    if hasattr(v, "item") and not isinstance(v, (list, Decimal)):
        return v.item()
    if hasattr(v, "tolist"):
        return v.tolist()
    return v


class AggregateOperator:
    def lower(self, node: Aggregate, df: DataFrame) -> DataFrame:
        if node.input.kind == "TABLE":  # a changelog: each row counts once, in its current group
            from .table_aggregate import OPERATOR as TABLE_AGGREGATE

            return TABLE_AGGREGATE.lower(node, df)
        groups = [(f.id, e) for f, e in node.groups]

        arg_cols, specs = [], []
        for i, (f, call) in enumerate(node.aggregates):
            arg_id = None
            if call.args and not call.star:
                arg_id = f"__arg{i}"
                arg_cols.append(compile_expr(call.args[0]).alias(arg_id))
            specs.append(AggSpec(call.name, arg_id, f.id, call.distinct))
        prepared = df.select(*[compile_expr(e).alias(gid) for gid, e in groups], *arg_cols, ROWTIME, SEQ, SUB)
        types = {fld.name: fld.dataType for fld in prepared.schema.fields}
        out_fields = [StructField(gid, types[gid]) for gid, _ in groups]
        out_fields += [StructField(s.out, result_type(s.fn, types.get(s.arg))) for s in specs]
        out_fields += [StructField(ROWTIME, LongType()), StructField(SEQ, LongType()), StructField(SUB, LongType())]
        output_schema = StructType(out_fields)
        group_ids = [gid for gid, _ in groups]
        fold = _make_fold(group_ids, specs, output_schema.fieldNames())
        if not group_ids:  # a global aggregate: one group
            prepared = prepared.withColumn("__all", F.lit(0))
        return run_keyed(prepared, group_ids or ["__all"], fold, output_schema)


def _make_fold(group_ids: list[str], specs: list[AggSpec], out_names: list[str]):
    def fold(accs, rows: pd.DataFrame):
        rows = rows.sort_values([SEQ, SUB], kind="stable")
        accs = accs or [None] * len(specs)
        out = []
        for rec in rows.to_dict("records"):
            accs = [_fold(s.fn, a, _scalar(rec[s.arg]) if s.arg else 1, s.distinct) for s, a in zip(specs, accs)]
            values = {g: _scalar(rec[g]) for g in group_ids}
            values.update({s.out: _result(s.fn, a, s.distinct) for s, a in zip(specs, accs)})
            values.update({ROWTIME: rec[ROWTIME], SEQ: rec[SEQ], SUB: rec[SUB]})
            out.append(values)
        return pd.DataFrame(out, columns=out_names), accs

    return fold


OPERATOR = AggregateOperator()
