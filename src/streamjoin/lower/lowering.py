"""Lowering a logical plan to Spark: one streaming DataFrame per persistent query.

All inputs of one query are read through a single source over their topics, so a micro-batch is one
contiguous slice of ingestion order across every input; each scan then filters its topic and decodes.
Stateless nodes (filter, lateral explode, project, re-key) become DataFrame operations; joins are
handed to the operator the operator table picks; GROUP BY is the record-at-a-time aggregate operator.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..connectors.event_time import CHANGELOG_PREFIX, KEY_PREFIX
from ..connectors.json_decode import decode_option
from ..connectors.kafka_source import CLIENT_OPTION
from ..connectors.late_records import ORIGIN
from ..errors import NotYetSupported
from ..operators.base import DEFAULT_TIME_BUCKETS, LoweringContext
from ..operators.window_aggregate import with_windows
from ..plan import expressions as ex
from ..plan.functions import TABLE_FUNCTIONS
from ..plan.nodes import (
    ROWTIME, SEQ, STREAM_TIME, SUB, TOMBSTONE, TOPIC_TIMES, WINDOW_END, WINDOW_START, Aggregate, Filter, Join, Lateral, PlanNode, Project, Ref,
    Repartition, Scan, WindowTable, naming_style, walk,
)
from ..plan.pushdown import database_read
from ..sql import ast
from .decode import decode_scan, failure_explainer, json_columns, json_key_columns, read_bounded, reader_decoded
from .expressions import compile_expr
from .operator_table import node_operator, operator_for

META = (ROWTIME, SEQ, SUB, STREAM_TIME, TOPIC_TIMES, WINDOW_START, WINDOW_END, ORIGIN)
LATERAL_FANOUT = 1_000_000  # _sub of a lateral row = parent _sub * fan-out + position


@dataclass(frozen=True)
class SourceOptions:
    root: str
    max_records_per_batch: int = 0
    starting_offsets: str = "earliest"
    time_buckets: int = DEFAULT_TIME_BUCKETS  # how many ways time-driven operators split state (one tick row each)
    bootstrap: str | None = None  # read Kafka topics on this broker instead of the embedded store
    ingestion_order: str = "timestamp"  # Kafka: merge partitions by 'timestamp' or 'produced' (header)
    fail_on_data_loss: bool = True  # Kafka: stop when checkpointed records are gone (else re-read the partition)
    client_properties: tuple = ()  # Kafka: the broker's client properties, (name, value) pairs (``connectors.kafka_client``)


def _matching_windows(join: Join) -> Join:
    """A ksqlDB join of windowed sources as its operator runs it: each side's window bounds (``Join.window_keys``)
    are more join keys, so records match when their keys and windows do."""
    if not join.window_keys:
        return join
    sides = [replace(side, keys=side.keys + tuple(Ref(ids[i], "bigint") for ids in join.window_keys),
                     null_safe=side.null_safe + (False,) * len(join.window_keys) if side.null_safe else ())
             for i, side in enumerate((join.left_side, join.right_side))]
    return replace(join, left_side=sides[0], right_side=sides[1])


def _with_key_window(join: Join, joined: DataFrame) -> DataFrame:
    """A ksqlDB join of windowed sources: the window its result's key holds (``WINDOW_START``, ``WINDOW_END``) is
    the one both sides' keys hold, read from whichever side a row has."""
    if not join.window_keys:
        return joined
    bounds = zip(join.left.window_bounds, join.right.window_bounds)
    return joined.withColumns({meta: F.coalesce(F.col(l), F.col(r)) for meta, (l, r) in zip((WINDOW_START, WINDOW_END), bounds)})


def read_inputs(spark: SparkSession, plan: PlanNode, opts: SourceOptions) -> DataFrame:
    scans = [n for n in walk(plan) if isinstance(n, Scan) and not n.source.bounded]
    topics = sorted({n.source.topic for n in scans})
    if opts.bootstrap:
        stateful = any(isinstance(n, (Join, Aggregate)) for n in walk(plan))
        reader = (spark.readStream.format("streamjoin_kafka").option("bootstrap", opts.bootstrap)
                  .option("order", opts.ingestion_order).option("ordered", str(stateful).lower())
                  .option("failOnDataLoss", str(opts.fail_on_data_loss).lower()))
        if opts.client_properties:  # to the source's Python workers, which make clients of their own
            reader = reader.option(CLIENT_OPTION, json.dumps(dict(opts.client_properties)))
    else:
        # a reader task keeps two cores busy (its Python reader, and the JVM taking its rows)
        readers = max(1, spark.sparkContext.defaultParallelism // 2)
        reader = spark.readStream.format("streamjoin_topics").option("root", opts.root).option("readers", str(readers))
    reader = reader.option("topics", ",".join(topics)).option("startingOffsets", opts.starting_offsets)
    decoded, names, key_names = reader_decoded(scans), json_columns(scans), json_key_columns(scans)
    if decoded or names or key_names:  # JSON values the source reader decodes, so Spark need not, and field names
        reader = reader.option("decode", decode_option(decoded, names, key_names))
    if any(n.source.reads_headers for n in scans):
        reader = reader.option("headers", "true")
    if opts.max_records_per_batch:
        reader = reader.option("maxRecordsPerBatch", str(opts.max_records_per_batch))
    joins = [n for n in walk(plan) if isinstance(n, Join)]
    if joins:  # what a join drops unseen: records with a null value
        reader = reader.option("countNullValues", "true")
    clocked = any(map(_reads_stream_time, joins)) or any(isinstance(n, Aggregate) and n.window for n in walk(plan))
    if clocked:  # the query's stream time on every record
        fields = {n.source.topic: _event_time_field(n.source) for n in scans}
        reader = reader.option("eventTime", json.dumps(fields)).option("ticks", str(opts.time_buckets))
        patterns = {n.source.topic: n.source.timestamp_format for n in scans if n.source.timestamp_format}
        if patterns:  # ksqlDB's TIMESTAMP_FORMAT: a time held as text
            reader = reader.option("eventTimeFormats", json.dumps(patterns))
        delays = watermark_delays(plan)
        if delays:  # Flink inputs with WATERMARK FOR: the query's clock is their watermark
            reader = reader.option("watermarks", json.dumps(delays))
    sides = side_topics(plan)
    if sides:  # each input's own clock on every record (DIALECT §3: a KSQL window store's retention)
        reader = reader.option("sideTopics", json.dumps(sides))
    grids = [n.window.slide_ms for n in walk(plan) if isinstance(n, Aggregate) and n.window is not None
             and n.window.ksql and n.window.emit == "FINAL"]
    steps = bool(grids)
    if steps:  # the clock values a batch reached on its ticks, to the windows' advance (``operators.window_aggregate``)
        reader = reader.option("clockSteps", str(math.gcd(*grids)))
    records = reader.load()
    if not sides:
        records = records.drop("topic_times")
    if not steps:
        records = records.drop("clock_steps")
    reads = len(scans) + clocked  # each scan, and the tick rows
    return read_once(records) if reads > 1 else records


def side_topics(plan: PlanNode) -> list[str]:
    """The topics whose own clocks a query's records carry (``_topic_times``, in this order): those of a query
    with a KSQL/Lenses windowed stream-stream join, whose stores keep records by each side's clock."""
    if not any(isinstance(n, Join) and n.operator == "stream_stream" for n in walk(plan)):
        return []
    return sorted({n.source.topic for n in walk(plan) if isinstance(n, Scan) and not n.source.bounded})


def read_once(records: DataFrame) -> DataFrame:
    """The source's rows of a micro-batch, read once however many branches of the plan use them.

    Spark reads a source once per branch that uses it: a join's two inputs and its tick rows were three
    Python reads of the same slice (and, on Kafka, three fetches). Here the slice goes through one shuffle,
    spread by ingestion position over the cores, and every branch reads that shuffle's output: Spark
    plans the identical exchanges of the branches as one (``ReusedExchange``). The observation keeps the
    branches' filters and column pruning above the exchange, where they would otherwise be pushed down and
    make the exchanges differ; it only tests each column for null."""
    spread = records.repartition(records.sparkSession.sparkContext.defaultParallelism, "seq", "partition")
    every_column = F.lit(True)
    for c in spread.columns:  # a decoded column is named after its topic, which may hold dots
        every_column = every_column & F.col("`" + c.replace("`", "``") + "`").isNull()
    return spread.observe("read_once", F.count(F.when(every_column, 1)).alias("empty_rows"))


_TABLE_ROW = "__table_row"  # the struct of the table functions' values on one output row


def _table_functions(df: DataFrame, items) -> tuple[DataFrame, list]:
    """A SELECT list's table functions (ksqlDB's EXPLODE and CUBE_EXPLODE, anywhere in an expression) as ksqlDB's
    ``KudtfFlatMapper`` runs them: one output row per position of the longest of their arrays, every function's
    value at that position (NULL past the end of a shorter one); a NULL or empty array gives no row. Returns the rows
    and the items with each call replaced by its value on the row."""
    calls: list = []

    def replaced(e):
        if isinstance(e, ast.Call) and e.name in TABLE_FUNCTIONS:
            calls.append(e)
            return Ref(f"{_TABLE_ROW}.g{len(calls) - 1}", "")
        return None

    items = [(f, ex.transform(e, replaced)) for f, e in items]
    if not calls:
        return df, items
    arrays = [(_cube(compile_expr(c.args[0])) if c.name == "CUBE_EXPLODE" else compile_expr(c.args[0])).alias(f"g{i}")
              for i, c in enumerate(calls)]
    rows = df.select("*", F.posexplode(F.arrays_zip(*arrays)).alias("__pos", _TABLE_ROW))
    return rows.withColumn(SUB, F.col(SUB) * LATERAL_FANOUT + F.col("__pos")).drop("__pos"), items


def _cube(array):
    """ksqlDB's CUBE_EXPLODE's combinations of an array: every element kept or NULL, in the order of the binary
    numbers whose 1s keep them (all NULL first), each distinct combination once."""
    n = F.size(array)
    masks = F.sequence(F.lit(0), F.call_function("shiftleft", F.lit(1), n) - 1)
    combos = F.transform(masks, lambda m: F.transform(
        array, lambda x, i: F.when(F.call_function("shiftright", m, n - 1 - i).bitwiseAND(1) == 1, x)))
    return F.when(array.isNotNull(), F.array_distinct(combos))


def _with_condition(join: Join, joined: DataFrame) -> DataFrame:
    """Flink's further ON conditions over both inputs, on the join's rows (validation admits them only where
    that is exact): an INNER join keeps the rows that pass; a LEFT temporal join, which gives each stream
    record one row, pads the row whose version fails (DIALECT §4: no match)."""
    passes = F.coalesce(compile_expr(join.condition), F.lit(False))
    if join.join_type == "INNER":
        return joined.where(passes)
    right = [f.id for f in join.right.fields if f.id in joined.columns]
    return joined.select(*[F.when(passes, F.col(c)).alias(c) if c in right else F.col(c) for c in joined.columns])


_WIDTHS = {"int": 32, "smallint": 16, "tinyint": 8}


def _as_planned(df: DataFrame, node: Aggregate) -> DataFrame:
    """An aggregate's results in the types the plan gave them (``plan.functions.aggregate_type``): the operators
    sum integers as BIGINT and average as DOUBLE; SUM of an INT is an INT that wraps around as ksqlDB's and
    Flink's do, Flink's AVG of an INT its mean truncated toward zero. ksqlDB's SUM starts at 0 (Kafka Streams'
    aggregate initializer) and its AVG of no values is 0.0 (``AverageUdaf``): over only NULLs, or a table group
    its rows all left, they are 0, where SQL's (Flink's) are NULL."""
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    from_zero = naming_style(node) != "flink"
    columns = []
    for f, call in node.aggregates:
        if f.id not in types:
            continue
        value, retyped, zero = F.col(f.id), f.type and types[f.id] != f.type, call.name in ("SUM", "AVG") and from_zero
        if retyped and f.type in _WIDTHS and types[f.id] in ("bigint", "double"):
            half = 2 ** (_WIDTHS[f.type] - 1)  # two's complement wrap-around, then a cast that cannot overflow
            value = F.pmod(value.cast("bigint") + F.lit(half), F.lit(2 * half)) - F.lit(half)
        if retyped:
            value = value.cast(f.type)
        if zero:
            value = F.coalesce(value, F.lit(0).cast(f.type or types[f.id]))
        if retyped or zero:
            columns.append((f.id, value))
    return df.withColumns(dict(columns)) if columns else df


def _reads_stream_time(join: Join) -> bool:
    """Every join but a lookup in a bounded table (``operators.stream_table``'s native stream-static join)."""
    return not join.static_table


def _event_time_field(source) -> str | None:
    if source.timestamp_column and source.changelog_format == "debezium-json":
        return CHANGELOG_PREFIX + source.timestamp_column
    column = source.column(source.timestamp_column) if source.timestamp_column else None
    if column is not None and column.origin == "key":  # Lenses EVENTTIME BY _key / _key.f
        return KEY_PREFIX + (column.name if source.key_format == "JSON" else "")
    return source.timestamp_column


def watermark_delays(plan: PlanNode) -> dict:
    """Topic -> watermark delay (ms) of a Flink query's inputs that declare ``WATERMARK FOR``; a topic read
    by two inputs keeps the larger delay (the minimum of their watermarks)."""
    if naming_style(plan) != "flink":
        return {}
    delays: dict = {}
    for n in walk(plan):
        if isinstance(n, Scan) and not n.source.bounded and n.source.watermark_column:
            delays[n.source.topic] = max(delays.get(n.source.topic, 0), n.source.watermark_delay_ms or 0)
    return delays


def lower(node: PlanNode, records: DataFrame, ctx: LoweringContext) -> DataFrame:
    if isinstance(node, Scan):
        if node.source.bounded:
            read = database_read(ctx.plan or node, node) if node.source.database is not None else None
            return read_bounded(records.sparkSession, node, read)
        letters = ctx.dead_letters(node.source.name, failure_explainer(records, node)) if ctx.dead_letters else None
        return decode_scan(records, node, letters, origin=ctx.late_records is not None)
    if isinstance(node, Filter):
        df = lower(node.input, records, ctx)
        if node.operator:
            return node_operator(node).lower(node, df, ctx)
        predicate = compile_expr(node.predicate)
        if node.kind == "TABLE":  # on a changelog, a row that fails the filter deletes its key
            deleted = ~F.coalesce(predicate, F.lit(False))
            if TOMBSTONE in df.columns:
                deleted = deleted | F.col(TOMBSTONE)
            return df.withColumn(TOMBSTONE, deleted)
        return df.where(predicate)
    if isinstance(node, Lateral):
        df = lower(node.input, records, ctx)
        exploded = df.select("*", F.posexplode(compile_expr(node.expr)).alias("__pos", node.element.id))
        return exploded.withColumn(SUB, F.col(SUB) * LATERAL_FANOUT + F.col("__pos")).drop("__pos")
    if isinstance(node, Repartition):
        df = lower(node.input, records, ctx)
        existing = set(df.columns)
        for key_id, expr in zip(node.key, node.by):
            if key_id not in existing:
                df = df.withColumn(key_id, compile_expr(expr))
        return df
    if isinstance(node, Project):
        df, items = _table_functions(lower(node.input, records, ctx), node.items)
        cols = [compile_expr(e).alias(f.id) for f, e in items]
        meta = [c for c in META + (TOMBSTONE,) if c in df.columns]
        return df.select(*cols, *meta)
    if isinstance(node, WindowTable):  # rows not grouped by their windows: each copied into every window it is in
        return with_windows(lower(node.input, records, ctx), node.window, LATERAL_FANOUT)
    if isinstance(node, Aggregate):
        aggregated = node_operator(node).lower(node, lower(node.input, records, ctx), replace(ctx, records=records))
        return _as_planned(aggregated, node)
    if isinstance(node, Join):
        left = lower(node.left, records, ctx)
        right = lower(node.right, records, ctx)
        operator = operator_for(node)
        joined = operator.lower(_matching_windows(node), left, right, replace(ctx, records=records))
        evaluated = getattr(operator, "evaluates_condition", lambda join: False)(node)  # on candidate pairs
        joined = joined if node.condition is None or evaluated else _with_condition(node, joined)
        return _with_key_window(node, joined)
    raise NotYetSupported(f"lowering {type(node).__name__}", issue=2)


