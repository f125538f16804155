"""GROUP BY over a stream, one changelog update per input record (ksqlDB with caching off).

Algorithm: rows are grouped into state buckets by a hash of the grouping values (a Spark shuffle). In a
bucket, a micro-batch's rows are sorted by ingestion order (``_seq``, ``_sub``) and every aggregate is
accumulated per group along that order, starting from the group's stored accumulator, emitting the
group's new aggregate values after each record; the output therefore does not depend on how input is cut
into micro-batches. COUNT, SUM and AVG of integers, MIN and MAX of numbers, LATEST_BY_OFFSET and
EARLIEST_BY_OFFSET are cumulative sums, minima and fills over the whole batch at once (``_cumulative``);
the others (COUNT(DISTINCT), COLLECT_LIST, COLLECT_SET, ksqlDB's TOPK, TOPKDISTINCT and ATTR, sums of floats and
decimals, MIN/MAX of strings) are folded record by record (``_fold``), the reference the whole-batch forms are
tested against.

State (per bucket, segmented: ``operators.state``): one row per group — its grouping values and one
accumulator per aggregate — as a log of change chunks holding the groups a batch touched
(``state.log_changes``); the bucket's meta value counts the groups. A batch reads the accumulators of its
own groups only (from the worker's cached table, else the chunks replayed) and writes only those. Never
purged: an unwindowed aggregate needs every group forever (as in ksqlDB).

A record whose grouping value is null is dropped and counted, as ksqlDB (and Kafka Streams, under Lenses)
excludes it; Flink's GROUP BY keeps it, in the NULL group.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType, DataType, DecimalType, DoubleType, LongType, MapType, StringType, StructField, StructType,
)

from ..errors import NotYetSupported
from ..lower.expressions import compile_expr
from ..plan.expressions import BY_OFFSET, TOP_K
from ..plan.nodes import ROWTIME, SEQ, SUB, Aggregate, naming_style
from .base import DeclaredState, LoweringContext
from .keyed_inputs import BUCKET, bucketed, described_by, drop_records, integral_columns, restore_integers, take
from .state import GONE, apply_changes, new_table_log, read_table, run_segmented

GLOBAL = "__all"  # the one group of an aggregate without GROUP BY
COLLECTS = ("COLLECT_LIST", "COLLECT_SET")  # ksqlDB's: their parameter, when given, is how many values they keep


@dataclass(frozen=True)
class AggSpec:
    """One aggregate: its function, the column holding its argument (None for COUNT(*)), its output id, and a
    constant parameter (TOPK's k; the most values COLLECT_LIST or COLLECT_SET keeps; EARLIEST_BY_OFFSET's and
    LATEST_BY_OFFSET's count of values and whether they ignore NULLs)."""

    fn: str
    arg: str | None
    out: str
    distinct: bool = False
    param: Any = None


def result_type(spec: AggSpec, arg_type: DataType | None) -> DataType:
    fn = spec.fn
    if fn == "COUNT":
        return LongType()
    if fn == "CORRELATION":  # as text (``_correlation``); the lowering casts it to the DOUBLE it is
        return StringType()
    if fn == "AVG" or fn in VARIANCES:
        return DoubleType()
    if fn == "SUM":
        if isinstance(arg_type, DecimalType):
            return DecimalType(38, arg_type.scale)
        return DoubleType() if isinstance(arg_type, DoubleType) or arg_type.typeName() == "float" else LongType()
    if fn in ("COLLECT_LIST", "COLLECT_SET", *TOP_K) or fn in BY_OFFSET and spec.param and spec.param[0]:
        return ArrayType(arg_type)
    if fn == "HISTOGRAM":
        return MapType(arg_type, LongType())
    return arg_type  # MIN MAX LATEST_BY_OFFSET EARLIEST_BY_OFFSET


def _fold(spec: AggSpec, acc: Any, value: Any) -> Any:
    """The accumulator after one more record (``value`` is the argument, None = SQL NULL). A set
    accumulator (COUNT(DISTINCT)) is grown in place: the caller hands over a copy of a stored one."""
    fn, distinct = spec.fn, spec.distinct
    if fn in BY_OFFSET and spec.param is not None:
        return _by_offset(spec, acc, value)
    if fn in COLLECTS:  # ksqlDB's keep NULLs (CollectListUdaf adds whatever it is given), up to their limit
        acc = acc or []
        full = spec.param is not None and len(acc) >= spec.param
        return acc if full or fn == "COLLECT_SET" and value in acc else acc + [value]
    if fn == "ATTR":
        return attr_seen(acc or [], [value])
    if fn == "COUNT":
        if distinct:
            seen = acc if acc is not None else set()
            if value is not None:
                seen.add(value)
            return seen
        return (acc or 0) + (1 if value is not None else 0)
    if value is None:
        return acc
    if fn == "SUM":
        return value if acc is None else _added(acc, value)
    if fn == "AVG":
        total, count = acc or (0, 0)
        return (_added(total, value), count + 1)
    if fn == "MIN":
        return value if acc is None or value < acc else acc
    if fn == "MAX":
        return value if acc is None or value > acc else acc
    if fn == "LATEST_BY_OFFSET":
        return value
    if fn == "EARLIEST_BY_OFFSET":
        return value if acc is None else acc
    if fn in TOP_K:
        return top_k(spec, acc or [], [value])
    if fn in VARIANCES:
        return _youngs_cramer(acc, value)
    if fn == "CORRELATION":  # ksqlDB's: running sums of x, y, x², y², xy and their count, as doubles
        x, y = value["X"], value["Y"]
        if x is None or y is None:
            return acc
        x, y = float(x), float(y)
        sx, sy, sxx, syy, sxy, n = acc or (0.0, 0.0, 0.0, 0.0, 0.0, 0)
        return (sx + x, sy + y, sxx + x * x, syy + y * y, sxy + x * y, n + 1)
    if fn == "HISTOGRAM":
        return counted(acc or {}, {value: 1})
    raise NotYetSupported(f"aggregate function {fn}", issue=4)


def _added(total: Any, value: Any) -> Any:
    """``total + value``; whole numbers as a Java ``long`` adds them (ksqlDB's and Flink's SUM and AVG of a BIGINT),
    wrapping around past 2^63."""
    if isinstance(total, int) and isinstance(value, int) and not isinstance(value, bool):
        return (total + value + 2 ** 63) % 2 ** 64 - 2 ** 63
    return total + value


def _by_offset(spec: AggSpec, acc: Any, value: Any) -> Any:
    """ksqlDB's EARLIEST_BY_OFFSET / LATEST_BY_OFFSET with parameters (``spec.param``: the count of values, None for
    one, and whether NULLs are ignored): the first (last) values so far as a list, or one value kept in a 1-tuple
    (a NULL value differs from none yet)."""
    count, ignore_nulls = spec.param
    if value is None and ignore_nulls:
        return acc
    if count is None:
        return acc if spec.fn == "EARLIEST_BY_OFFSET" and acc is not None else (value,)
    acc = acc or []
    if spec.fn == "EARLIEST_BY_OFFSET":
        return acc if len(acc) >= count else acc + [value]
    return (acc + [value])[-count:]


def attr_seen(seen: list, values: list) -> list:
    """ksqlDB's ATTR over a stream: the distinct values so far (a NULL is one of them), in order of arrival, ``seen``
    with ``values`` added; kept up to two, as its result is the value when there is one and NULL once there are
    more (``Attr.Impl.map``), and a stream's values are never taken back. A new list."""
    out = list(seen)
    for value in values:
        if len(out) < 2 and not any(same_value(value, kept) for kept in out):
            out.append(value)
    return out


def same_value(a: Any, b: Any) -> bool:
    """Whether two SQL values are equal as Java's ``Objects.equals`` compares them: NULL equals NULL, NaN equals NaN."""
    return a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)


HISTOGRAM_LIMIT = 1000


def counted(counts: dict, more: dict) -> dict:
    """ksqlDB's HISTOGRAM counts with ``more`` added: at most ``HISTOGRAM_LIMIT`` distinct values (later new ones are
    not counted); a new dict."""
    out = dict(counts)
    for value, n in more.items():
        if len(out) < HISTOGRAM_LIMIT or value in out:
            out[value] = out.get(value, 0) + n
    return out

VARIANCES = ("STDDEV_SAMPLE", "KSQL_STDDEV_SAMP")  # ksqlDB's: the sample standard deviation, and (its STDDEV_SAMP) the
# sample variance


def _youngs_cramer(acc: Any, value: Any) -> tuple:
    """ksqlDB's running (sum, count, M2) of its standard deviations (``StandardDeviationSampleUdaf``: the
    Youngs-Cramer update, in the argument's own arithmetic, then in doubles)."""
    total, count, m2 = acc or (0, 0, 0.0)
    if count:
        delta = float(value * (count + 1) - (total + value))
        m2 += delta * delta / ((count + 1) * count)
    return (total + value, count + 1, m2)


def top_k(spec: AggSpec, acc: list, values: list) -> list:
    """ksqlDB's TOPK (TOPKDISTINCT): the ``spec.param`` largest of the values so far (distinct ones), largest
    first, from the kept list ``acc`` and further values; of equal ones, the earlier. A TOPK with further columns
    keeps records (STRUCTs, ``plan.binder._one_argument``) ordered by their first field, ``sort_col``; a record whose
    ``sort_col`` is NULL is left out."""
    if values and isinstance(values[0], dict):
        values = [v for v in values if v["sort_col"] is not None]
        return sorted([*acc, *values], key=lambda row: row["sort_col"], reverse=True)[:spec.param]
    merged = sorted([*acc, *values], reverse=True)
    if spec.fn == "TOPKDISTINCT":
        merged = list(dict.fromkeys(merged))
    return merged[:spec.param]


def _result(spec: AggSpec, acc: Any) -> Any:
    fn = spec.fn
    if fn == "COUNT":
        return len(acc or ()) if spec.distinct else (acc or 0)
    if fn in BY_OFFSET and spec.param is not None:  # the n values, or the one value kept in a 1-tuple (``_by_offset``)
        return list(acc or []) if spec.param[0] else (acc[0] if acc else None)
    if fn == "AVG":
        return None if not acc else float(acc[0]) / acc[1]
    if fn in TOP_K:  # ksqlDB starts it as an empty list, which NULLs leave as it is
        return list(acc or [])
    if fn == "HISTOGRAM":  # likewise an empty map
        return dict(acc or {})
    if fn == "ATTR":  # the one value (maybe NULL) seen; NULL for none or more
        return acc[0] if acc and len(acc) == 1 else None
    if fn == "CORRELATION":
        return _correlation(acc)
    if fn in VARIANCES:  # 0.0 for fewer than two values, as ksqlDB gives
        _, count, m2 = acc or (0, 0, 0.0)
        variance = m2 / (count - 1) if count > 1 else 0.0
        return math.sqrt(variance) if fn == "STDDEV_SAMPLE" else variance
    return acc


def _correlation(acc) -> str:
    """Pearson's coefficient from the running sums, in doubles as ksqlDB's ``CorrelationUdaf.map`` (0/0 is NaN, as
    Java's division gives), written as its text (``repr``, which reads back as the same double): a NaN in a frame's
    float column would reach Spark as a NULL (Arrow takes pandas' NaN for a missing value)."""
    sx, sy, sxx, syy, sxy, n = acc or (0.0, 0.0, 0.0, 0.0, 0.0, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        numerator = np.float64(n * sxy - sx * sy)
        denominator = np.sqrt(np.float64((n * sxx - sx * sx) * (n * syy - sy * sy)))
        value = float(numerator / denominator)
    return "NaN" if math.isnan(value) else repr(value)


def _scalar(v: Any) -> Any:
    if v is None or v is pd.NaT or (isinstance(v, float) and pd.isna(v)):  # NaT: a null TIMESTAMP
        return None
    if hasattr(v, "item") and not isinstance(v, (list, Decimal)):
        return v.item()
    if hasattr(v, "tolist"):
        return v.tolist()
    return v


STATE = DeclaredState(
    "aggregate", 2,
    keeps="one row per group: its grouping values, one accumulator per aggregate and (ksqlDB, Lenses) the latest "
          "time of its records",
    segments="chunks of the groups' change log",
    purged="never: an unwindowed aggregate needs every group (as in ksqlDB)")


def aggregate_specs(node: Aggregate) -> tuple[list, list[AggSpec]]:
    """Each aggregate's argument as a column ``__arg<i>`` to select (none for COUNT(*)), and its ``AggSpec``."""
    arg_cols, specs = [], []
    for i, (f, call) in enumerate(node.aggregates):
        arg_id = None
        if call.args and not call.star:
            arg_id = f"__arg{i}"
            arg_cols.append(compile_expr(call.args[0]).alias(arg_id))
        param = call.args[1].value if call.name in TOP_K + COLLECTS and len(call.args) > 1 else None
        if call.name in BY_OFFSET and len(call.args) > 1:  # (x, n or NULL, ignoreNulls): ``plan.binder._by_offset``
            param = (call.args[1].value, call.args[2].value)
        specs.append(AggSpec(call.name, arg_id, f.id, call.distinct, param))
    return arg_cols, specs


class AggregateOperator:
    def state(self, node: Aggregate) -> DeclaredState:
        return STATE

    def lower(self, node: Aggregate, df: DataFrame, ctx: LoweringContext) -> DataFrame:
        groups = [(f.id, e) for f, e in node.groups]

        arg_cols, specs = aggregate_specs(node)
        prepared = df.select(*[compile_expr(e).alias(gid) for gid, e in groups], *arg_cols, ROWTIME, SEQ, SUB,
                             *described_by(df, ROWTIME))
        types = {fld.name: fld.dataType for fld in prepared.schema.fields}
        out_fields = [StructField(gid, types[gid]) for gid, _ in groups]
        out_fields += [StructField(s.out, result_type(s, types.get(s.arg))) for s in specs]
        out_fields += [StructField(ROWTIME, LongType()), StructField(SEQ, LongType()), StructField(SUB, LongType())]
        output_schema = StructType(out_fields)
        group_ids = [gid for gid, _ in groups]
        if not group_ids:  # a global aggregate: one group
            prepared = prepared.withColumn(GLOBAL, F.lit(0))
        keys = group_ids or [GLOBAL]
        data = bucketed(prepared, keys, ctx.time_buckets)
        kafka_streams = naming_style(node) != "flink"
        step = bucket_step(keys, group_ids, specs, integral_columns(data, keys + [s.arg for s in specs if s.arg]),
                           output_schema.fieldNames(), drop_null_groups=kafka_streams, latest_time=kafka_streams)
        return run_segmented(data, BUCKET, step, output_schema, ctx)


def bucket_step(keys: list[str], group_ids: list[str], specs: list[AggSpec], integral: list[str], out_names: list[str],
                drop_null_groups: bool = False, latest_time: bool = False):
    """The per-bucket step over segmented state: the groups' accumulators are a table log keyed by ``keys``
    (``state.read_table``), one accumulator column ``__acc<i>`` per aggregate. ``drop_null_groups``: a record
    with a null grouping value is dropped and counted (``null_key``), as ksqlDB and Kafka Streams exclude it;
    Flink groups it under NULL. ``latest_time``: an update's time is the latest time of its group's records so
    far, kept as one more accumulator (Kafka Streams' ``KStreamAggregate``); otherwise its record's time."""
    accs = [f"__acc{i}" for i in range(len(specs))]
    if latest_time:
        specs, accs = [*specs, AggSpec("MAX", ROWTIME, ROWTIME)], [*accs, "__latest"]

    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"dropped": {}, "rows": 0, "table": new_table_log()}
        if drop_null_groups and group_ids:
            null_group = rows[group_ids].isna().any(axis=1).to_numpy()
            drop_records(meta, "null_key", rows, null_group)
            rows = rows[~null_group]
        rows = restore_integers(rows, integral).sort_values([SEQ, SUB], kind="stable").reset_index(drop=True)
        store = read_table(meta["table"], segments, keys, accs)
        codes = rows.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
        heads = rows.iloc[_first_rows(codes)].reset_index(drop=True)  # one row per group, in the order of ``codes``
        found = store.find(heads)
        out = pd.DataFrame({g: rows[g].to_numpy() for g in group_ids})
        changes = heads[keys].copy()
        for spec, acc in zip(specs, accs):
            prior = take(store.column(acc), found, found >= 0)  # a stored TIMESTAMP stays one (numpy: nanoseconds)
            values = rows[spec.arg] if spec.arg else None
            out[spec.out], changes[acc] = accumulate(spec, values, codes, prior, spec.arg in integral or spec.arg == ROWTIME)
        for c in (SEQ, SUB) if latest_time else (ROWTIME, SEQ, SUB):
            out[c] = rows[c].to_numpy()
        table = apply_changes(meta["table"], segments, store, changes.assign(**{GONE: False}), keys)
        meta["rows"] = len(table)
        return out[out_names], meta

    return step


def accumulate(spec: AggSpec, values: pd.Series | None, codes: np.ndarray, prior: np.ndarray, integral: bool):
    """One aggregate over a batch sorted by ingestion order: (its value after every row, every group's
    accumulator after its last row). ``codes``: each row's group, 0..G-1; ``prior``: each group's stored
    accumulator (None for a new group); ``values``: the argument, None for COUNT(*)."""
    vectorised = _cumulative(spec, values, codes, prior, integral)
    if vectorised is not None:
        return vectorised
    if values is not None and integral and values.dtype.kind == "f":  # nulls made it float: whole numbers again
        values = pd.Series([None if v != v else int(v) for v in values.to_numpy()], dtype=object)
    accs = [set(a) if isinstance(a, set) else a for a in prior]  # copies: stored sets are shared with the cache
    results = np.empty(len(codes), dtype=object)
    for j, (g, v) in enumerate(zip(codes, values if values is not None else np.ones(len(codes), dtype=object))):
        accs[g] = _fold(spec, accs[g], _scalar(v))
        results[j] = _result(spec, accs[g])
        if isinstance(results[j], list):
            results[j] = list(results[j])
    final = np.empty(len(accs), dtype=object)
    final[:] = accs
    return results, final


def _cumulative(spec: AggSpec, values, codes, prior, integral: bool):
    """``accumulate`` as whole-batch cumulative operations, for the aggregates of numbers that have one;
    None for the others. Each group's stored accumulator is put before its rows."""
    fn, n, groups = spec.fn, len(codes), len(prior)
    if spec.distinct or fn not in ("COUNT", "SUM", "AVG", "MIN", "MAX", *BY_OFFSET) or fn in BY_OFFSET and spec.param:
        return None
    if values is None:
        present = np.ones(n, dtype=bool)
    else:
        present = values.notna().to_numpy()
        numbers = values.to_numpy()
        if integral and numbers.dtype.kind in "fO":  # nulls made it float (objects beyond 2^53: ``state.as_frame``)
            numbers = np.where(present, numbers, 0).astype(np.int64)  # whole numbers, as the fold sees them
        if fn in ("MIN", "MAX") and numbers.dtype.kind not in "iuf":
            return None  # decimals, strings: folded record by record
        if numbers.dtype.kind in "iuf":
            numbers = numbers.astype(np.int64 if numbers.dtype.kind in "iu" else np.float64)
        elif fn in ("SUM", "AVG"):
            numbers = values.to_numpy(dtype=object)  # decimals
    order = np.concatenate([np.arange(groups), codes])  # group of every row, stored accumulators first
    last = _last_rows(codes, groups)

    def running(step_values, how):
        """Per group, ``how`` (cumsum, cummin, cummax, ffill) along stored-then-batch order; the batch rows'."""
        series = pd.Series(step_values).groupby(order, sort=False)
        return getattr(series, how)().to_numpy()[groups:]

    if fn == "COUNT":
        stored = np.array([a or 0 for a in prior], dtype=np.int64)
        counts = running(np.concatenate([stored, present.astype(np.int64)]), "cumsum")
        counts = _objects(counts)
        return counts, counts[last]
    if fn in ("LATEST_BY_OFFSET", "EARLIEST_BY_OFFSET"):
        kept = _objects(numbers, present) if integral else values.to_numpy(dtype=object).copy()
        kept[~present] = None
        if fn == "EARLIEST_BY_OFFSET":
            new = np.array([a is None for a in prior], dtype=bool)
            count = running(np.concatenate([~new, present]).astype(np.int64), "cumsum")
            kept[~(present & (count == 1) & new[codes])] = None  # all but each new group's first value
        filled = pd.Series(np.concatenate([prior, kept]), dtype=object).groupby(order, sort=False).ffill().to_numpy()[groups:]
        results = np.empty(len(filled), dtype=object)  # one value per row, an ARRAY's tuple too (np.array would nest it)
        for j, v in enumerate(filled):
            results[j] = _scalar(v)
        return results, results[last]
    seen = running(np.concatenate([[a is not None for a in prior], present]).astype(np.int64), "cumsum") > 0
    if fn in ("SUM", "AVG"):
        totals = np.array([(a[0] if fn == "AVG" else a) if a is not None else 0 for a in prior], dtype=numbers.dtype)
        totals = running_totals(totals, np.where(present, numbers, 0), codes)
        if fn == "SUM":
            results = _objects(totals, seen)
            return results, results[last]
        stored = np.array([a[1] if a is not None else 0 for a in prior], dtype=np.int64)
        counts = running(np.concatenate([stored, present.astype(np.int64)]), "cumsum")
        means = _objects(totals.astype(np.float64) / np.maximum(counts, 1), seen)
        accs = np.empty(len(last), dtype=object)
        accs[:] = [(t, c) if s else None for t, c, s in zip(_objects(totals[last]), counts[last].tolist(), seen[last])]
        return means, accs
    # MIN, MAX: a row without a value (or a group without a stored one) holds the identity of the operation
    identity = (np.inf if fn == "MIN" else -np.inf) if numbers.dtype.kind == "f" else \
        (np.iinfo(np.int64).max if fn == "MIN" else np.iinfo(np.int64).min)
    stored = np.array([a if a is not None else identity for a in prior], dtype=numbers.dtype)
    extremes = running(np.concatenate([stored, np.where(present, numbers, identity)]), "cummin" if fn == "MIN" else "cummax")
    results = _objects(extremes, seen)
    return results, results[last]


def _first_rows(codes: np.ndarray) -> np.ndarray:
    """The position of every group's first row (groups numbered 0..G-1)."""
    first = np.full(codes.max() + 1 if len(codes) else 0, len(codes), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(codes)))
    return first


def _last_rows(codes: np.ndarray, groups: int) -> np.ndarray:
    """The position of every group's last row."""
    last = np.zeros(groups, dtype=np.int64)
    np.maximum.at(last, codes, np.arange(len(codes)))
    return last


SHORT_SEGMENT = 64  # ``running_totals`` adds segments up to this length position by position, longer ones alone


def running_totals(start: np.ndarray, steps: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """Each row's running total within its segment: ``start[segment]`` plus the segment's ``steps`` up to and
    including the row, added one at a time in row order, as a record-at-a-time fold adds them, so a float or
    decimal total does not depend on how the records were cut into batches (pandas' grouped cumsum compensates
    float additions; numpy's sum pairs them up). ``segment``: each row's segment, 0..len(start)-1.

    Algorithm: rows are ordered by segment (stable); a segment longer than ``SHORT_SEGMENT`` is one
    ``np.add.accumulate`` (sequential); the short ones advance together, one vectorised addition per position
    (the first row of each, then the second, ...). Cost: at most SHORT_SEGMENT + rows / SHORT_SEGMENT numpy calls."""
    n = len(steps)
    dtype = object if object in (start.dtype, steps.dtype) else np.result_type(start, steps)
    order = np.argsort(segment, kind="stable")
    seg, values = segment[order], steps[order].astype(dtype)
    counts = np.bincount(seg, minlength=len(start))
    first = np.cumsum(counts) - counts
    out = np.empty(n, dtype=dtype)
    long = counts > SHORT_SEGMENT
    for s in np.flatnonzero(long):
        a, b = first[s], first[s] + counts[s]
        out[a:b] = np.add.accumulate(np.concatenate([np.asarray(start[s:s + 1], dtype=dtype), values[a:b]]))[1:]
    short = np.flatnonzero(~long[seg])
    depth = short - first[seg[short]]
    by_depth = short[np.argsort(depth, kind="stable")]
    per_depth = np.bincount(depth, minlength=1)
    ends = np.cumsum(per_depth)
    for d, (a, b) in enumerate(zip(ends - per_depth, ends)):
        rows = by_depth[a:b]
        out[rows] = (start[seg[rows]].astype(dtype) if d == 0 else out[rows - 1]) + values[rows]
    totals = np.empty(n, dtype=dtype)
    totals[order] = out
    return totals


def _objects(values: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
    """Numbers as Python scalars in an object array (None where not ``present``)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values.tolist()
    if present is not None:
        out[~present] = None
    return out


OPERATOR = AggregateOperator()
