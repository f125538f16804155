"""Decoding topic records into a scan's columns.

Input rows are the source's ``topic, partition, offset, timestamp, seq, key, value``. A scan's decoded
row has one column per field id, plus ``_rowtime`` (event time, ms), ``_seq`` (ingestion order), ``_sub``
(0), ``_stream_time`` (from the source, when the query needs a clock) and, on a TABLE, ``_tombstone`` (the record deletes its key). On a STREAM, records with a null
value are ignored (DIALECT §1).

Formats (``connectors.formats``): values in JSON (default), DELIMITED, AVRO or PROTOBUF (turned into JSON text first)
or Flink's 'debezium-json' changelog envelope (``op`` c/r/u upserts the ``after`` row, ``d`` deletes the
``before`` row's key; the null-value record after a delete is skipped); keys in KAFKA format (a single
primitive written as text), JSON, or AVRO or PROTOBUF (turned into JSON text first: ``connectors.formats.key_writer_schema``). Metadata columns (KSQL ``HEADERS`` and ``HEADER('k')``, Flink
``METADATA``) come from the record itself: its headers, timestamp, partition, offset or topic.

JSON values the source reader can decode itself (``reader_decoded``) come with a struct of the decoded
columns (``connectors.json_decode``); Spark's ``from_json`` parses only the values the reader left.

A ksqlDB source's JSON fields are coerced as ksqlDB's deserializer coerces them (``_ksql_coerced``: numbers from
strings, an integer column a number's whole part, a STRING column any scalar's text).

A record whose value does not parse or does not fit the columns (Spark's PERMISSIVE parsers fill a
corrupt-record column), whose text is not UTF-8, whose single key column cannot be read, or whose own timestamp is
its event time and negative (Kafka's -1: none), gets an error and goes to the query's dead letters
(``connectors.dead_letters``) instead of on. The error is one line that names what is wrong: the field, its value
cut short and the type it should have, where a field is to blame (``_field_reason``); else the value, cut short.
A micro-batch's records get only a short error (which field, for ksqlDB JSON; else "not <format>"): Spark plans a
micro-batch's expressions anew each time, so the wordier ones are computed for a batch's failed records alone,
when their dead letters are written (``failure_explainer``).

A bounded source (a file ``path`` instead of a topic) is read once as a batch DataFrame with the same
columns: JSON lines (every column, key columns included, in each object) or headerless CSV in column
order; ``_seq`` is the line order, so the last line of a key wins when it is loaded as a table.
"""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Callable, NamedTuple, Optional

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from ..connectors.dead_letters import ERROR, KEPT_BYTES, VALUE_BYTES, DeadLetters
from ..connectors.embedded_source import SOURCE_SCHEMA
from ..connectors.formats import (
    BINARY_ERROR, BINARY_FORMATS, REGISTRY_FRAME, binary_as_json, binary_keys_to_json, delimiter_of, key_writer_schema,
    single_value_unwrapped, split_type_args, struct_fields, window_bytes, writer_schema,
)
from ..connectors.json_decode import decodable, decoded_column
from ..connectors.late_records import ORIGIN
from ..connectors.json_format import JSON_READ_OPTIONS
from ..errors import NotYetSupported
from ..plan.nodes import OWN_ROWTIME, RECORD_POSITIONS, ROWTIME, SEQ, STREAM_TIME, SUB, TOMBSTONE, TOPIC_TIMES, WINDOW_END, WINDOW_START, Scan
from ..plan.types import DAY_MS, TIME, ksql_type_name
from .expressions import compile_expr



DEBEZIUM_OPS = ("c", "r", "u", "d")  # create, snapshot read, update, delete
CORRUPT = "__corrupt"


RAW = ("topic", "partition", "offset", "timestamp", "key", "value")  # what a dead letter keeps of its record
PARSED = "__p"
CALLED = "__parse"  # the parser's call's result (``_Parser``)
FAILURE = "__failure"


def decode_scan(records: DataFrame, scan: Scan, dead_letters: Optional[DeadLetters] = None, origin: bool = False) -> DataFrame:
    """The scan's rows; records that cannot be decoded go to ``dead_letters`` (module docstring). The value
    is parsed once; the raw record and its error ride along to the dead-letter step and are dropped after.
    ``origin``: each row also names its record (``ORIGIN``: topic, partition, offset), for the query's late
    records (``connectors.late_records``)."""
    df = _with_errors(records, scan, detailed=False)
    if dead_letters is not None:  # the observation also keeps Spark from pushing the filter below the parse
        # the failure is computed in the generated code before the observation, which interprets its input
        df = df.withColumn(FAILURE, _failure()).observe(dead_letters.metric, F.collect_list(FAILURE).alias("failures"))
    if origin:
        df = df.withColumn(ORIGIN, F.to_json(F.struct("topic", "partition", "offset")))
    return df.where(F.col(ERROR).isNull()).drop(*RAW, ERROR, FAILURE)


def failure_explainer(records: DataFrame, scan: Scan) -> Callable[[list[dict]], list[str]]:
    """How the scan's dead letters get their reasons: its failed records (``connectors.dead_letters``) decoded
    again with ``detailed`` errors, which name the field to blame, its value and the type it should have. The
    records of a micro-batch are decoded without that detail: its expressions would be planned anew in every
    micro-batch, and most batches have no failure. A record kept cut short (``KEPT_BYTES``) keeps its first error."""
    spark, schema = records.sparkSession, records.schema

    def explain(failures: list[dict]) -> list[str]:
        whole = [f for f in failures if f.get(VALUE_BYTES) is None or len(f["value"] or b"") >= f[VALUE_BYTES]]
        if not whole:
            return [f[ERROR] for f in failures]
        rows = [tuple(f.get(name) if name in RAW else None for name in schema.fieldNames()) for f in whole]
        explained = _with_errors(spark.createDataFrame(rows, schema), scan, detailed=True)
        errors = {(r.partition, r.offset): r[ERROR] for r in explained.select("partition", "offset", ERROR).collect()}
        return [errors.get((f["partition"], f["offset"])) or f[ERROR] for f in failures]

    return explain


def _with_errors(records: DataFrame, scan: Scan, detailed: bool) -> DataFrame:
    """The scan's records decoded (``_decoded``), each with its error (``ERROR``: null if it decodes), and
    ``RAW``; ``detailed``: an error names the field to blame where one is (``_Parser.reason``)."""
    source = scan.source
    df = records.where(F.col("topic") == F.lit(source.topic))
    for part in [p for p in ("key", "value") if source.registry_framed(p)]:  # JSON_SR: without its framing
        unframed = F.expr(f"substring({part}, {REGISTRY_FRAME + 1})")
        df = df.withColumn(part, F.when(F.substring(part, 1, 1) == F.lit(b"\x00"), unframed).otherwise(F.col(part)))
    if source.window is not None:
        df = _window_from_key(df, source.window)
    key_writer = key_writer_schema(source.key_format, source.name,
                                   [(c.name, c.type) for c in source.columns if c.origin == "key"])
    if key_writer is not None:  # a binary key as JSON text, then read as a JSON key
        df = df.mapInArrow(binary_keys_to_json(key_writer), df.schema)
        source = replace(source, key_format="JSON")
        scan = replace(scan, source=source)
    if source.value_format in BINARY_FORMATS:
        df = _binary_as_json(df, source)
    parser = _value_parser(source)
    call, parsed = parser.call, parser.shape(F.col(CALLED))
    if decoded_column(source.topic) in df.columns:  # Spark parses only what the reader left
        call = F.when(_by_reader(source).isNull(), call)
        parsed = _decoded_by_reader(source, otherwise=parsed)
    error = _decode_error(source, F.col(PARSED), parser.reason if detailed else None)
    return _decoded(df.withColumn(CALLED, call).withColumn(PARSED, parsed).withColumn(ERROR, error), scan)


def _window_from_key(df: DataFrame, window: tuple[str, int]) -> DataFrame:
    """A windowed source's records (``WINDOW_TYPE``): the key without its window, whose start (and end) become
    ``WINDOW_START`` and ``WINDOW_END``. Kafka Streams writes a time window's key as key + 8-byte start, a
    session's as key + 8-byte end + 8-byte start (big-endian); a time window ends ``WINDOW_SIZE`` after it starts."""
    kind, size = window
    suffix = window_bytes(kind)
    length = F.length(F.col("key"))

    def long_at(offset: int) -> Column:  # the 8 bytes ``offset`` bytes before the key's end, as a signed long
        return F.conv(F.hex(F.expr(f"substring(key, length(key) - {offset - 1}, 8)")), 16, -10).cast("bigint")

    start = long_at(8)
    end = long_at(16) if kind == "SESSION" else start + F.lit(size)
    whole = F.col("key").isNotNull() & (length >= suffix)
    return df.select(
        *[c for c in df.columns if c != "key"],
        F.when(whole, F.expr(f"substring(key, 1, length(key) - {suffix})")).alias("key"),
        F.when(whole, start).alias(WINDOW_START), F.when(whole, end).alias(WINDOW_END))


def _failure() -> Column:
    """A failed record's fields and error as JSON (null where the record passes); a value longer than
    ``KEPT_BYTES`` is kept cut to that, with its whole length (``connectors.dead_letters``)."""
    raw = [F.base64(F.substring(c, 1, KEPT_BYTES)).alias(c) if c in ("key", "value") else F.col(c) for c in RAW]
    return F.when(F.col(ERROR).isNotNull(), F.to_json(F.struct(*raw, F.col(ERROR),
                                                               F.octet_length("value").alias(VALUE_BYTES))))


def reader_decoded(scans: list[Scan]) -> list[tuple[str, list[tuple[str, str]]]]:
    """(topic, value columns) of the topics whose values the source reader decodes (``connectors.json_decode``):
    read only by JSON sources whose columns it can decode, with the same columns."""
    by_topic: dict = {}
    for scan in scans:
        source = scan.source
        columns = tuple((c.name, c.type) for c in source.columns if c.origin == "value")
        fits = (source.value_format == "JSON" and not source.changelog_format and not unwrapped_value(source)
                and not source.registry_framed("value")
                and decodable(list(columns)))
        by_topic.setdefault(source.topic, set()).add(columns if fits else None)
    return [(topic, list(next(iter(kinds)))) for topic, kinds in sorted(by_topic.items())
            if len(kinds) == 1 and None not in kinds]


def json_columns(scans: list[Scan]) -> dict[str, dict]:
    """Topic -> the value columns of the JSON sources that read it, as a tree (column -> its STRUCT's fields, the
    same way down, or None), whose field names the source reader matches case-insensitively at every depth
    (``connectors.json_decode.canonical_names``), as ksqlDB reads JSON."""
    names: dict = {}
    for scan in scans:
        source = scan.source
        if source.value_format == "JSON" and not source.changelog_format:
            columns = names.setdefault(source.topic, {})
            for c in source.columns:
                if c.origin == "value" and c.name not in columns:
                    columns[c.name] = _field_tree(c.type)
    return names


def json_key_columns(scans: list[Scan]) -> dict[str, dict]:
    """Topic -> the field tree of the JSON objects in the keys of the ksqlDB sources that read it (``json_columns``):
    a key of several columns is an object of them; a single STRUCT key column, written unwrapped, is the object of its
    fields. Keys holding neither are left out."""
    names: dict = {}
    for scan in scans:
        source = scan.source
        keys = [c for c in source.columns if c.origin == "key"]
        json_key = source.key_format == "JSON" or len(keys) > 1 and source.key_format != "DELIMITED"
        if not _read_as_ksql(source) or not keys or not json_key:
            continue
        if len(keys) > 1:
            names.setdefault(source.topic, {}).update({c.name: _field_tree(c.type) for c in keys})
        elif _field_tree(keys[0].type):
            names.setdefault(source.topic, {}).update(_field_tree(keys[0].type))
    return names


def _field_tree(spark_type: str) -> Optional[dict]:
    fields = struct_fields(spark_type)
    return {name: _field_tree(type_) for name, type_ in fields} if fields else None


def _by_reader(source) -> Column:
    """The struct of the value's columns the source reader decoded (null where it left the value to Spark)."""
    return F.col("`" + decoded_column(source.topic).replace("`", "``") + "`")


def _decoded_by_reader(source, otherwise: Column) -> Column:
    """The value as the source reader decoded it, shaped as ``_Parser.shape``'s struct; ``otherwise`` where
    the reader left it."""
    by_reader = _by_reader(source)
    reason = [F.lit(None).cast("string").alias(REASON)] if coerces(source) else []
    as_parsed = F.struct(*[by_reader.getField(c.name).alias(c.name) for c in source.columns if c.origin == "value"],
                         F.lit(None).cast("string").alias(CORRUPT), *reason)
    return F.when(by_reader.isNotNull(), as_parsed).otherwise(otherwise)


class _Parser(NamedTuple):
    """How a source's values are parsed into their columns: ``call`` parses the text once, into its own column
    (``CALLED``); ``shape`` makes a reference to that column the value as a struct of its columns and ``CORRUPT``
    (the text, if it does not fit). Written as one expression, every field read of a conversion would repeat the
    parser's call: Spark evaluated ksqlDB's coerced JSON parse once per field and check (16 calls a record for
    four columns, a third of the speed)."""

    call: Column
    shape: Callable[[Column], Column]
    reason: Callable[[Column], Column]  # from a reference to the parsed value: why it does not fit, where a field is to blame

    @classmethod
    def whole(cls, parse: Column, reason: Callable[[Column], Column]) -> "_Parser":
        """A parser whose call gives the parsed value as it is."""
        return cls(parse, lambda called: called, reason)


def _value_parser(source) -> _Parser:
    """The parse of a value into its columns (of ``before``, ``after`` and ``op`` for debezium-json)."""
    value_cols = [c for c in source.columns if c.origin == "value"]
    row = ", ".join(f"`{c.name}` {c.type}" for c in value_cols) or "`__none` string"
    text = F.col("value").cast("string")
    if source.changelog_format == "debezium-json":  # {"before": row, "after": row, "op": ...}
        rows = F.from_json(text, "map<string,string>")
        return _Parser.whole(F.from_json(text, f"before struct<{row}>, after struct<{row}>, op string, {CORRUPT} string",
                                         {**JSON_READ_OPTIONS, "columnNameOfCorruptRecord": CORRUPT}),
                             lambda parsed: F.coalesce(*[_field_reasons(F.from_json(rows.getItem(side), "map<string,string>"),
                                                                        parsed.getField(side), value_cols,
                                                                        f"the value's {side} row's field")
                                                         for side in ("after", "before")]))
    numbers = _read_as_ksql(source) and any(c.type in TIMES for c in value_cols)
    if source.value_format == "KAFKA":  # one primitive column, as its text (connectors.formats)
        fields = [(_ksql_time(text, c.type) if numbers and c.type in TIMES else text.cast(c.type)).alias(c.name)
                  for c in value_cols] or [F.lit(None).cast("string").alias("__none")]
        bad = text.isNotNull() & fields[0].isNull() if value_cols else F.lit(False)
        type_name = ksql_type_name(value_cols[0].type) if value_cols else ""
        return _Parser.whole(F.struct(*fields, F.when(bad, text).alias(CORRUPT)),
                             lambda parsed: F.concat(F.lit("the value holds "), _shown(text), F.lit(f", which is not {type_name}")))
    if source.value_format == "DELIMITED":  # ksqlDB's: times as numbers, BYTES as base64 (read as text first)
        texts = _read_as_ksql(source) and any(c.type in TIMES or c.type == "binary" for c in value_cols)
        options = {"sep": delimiter_of(dict(source.properties)), "mode": "PERMISSIVE"}
        as_read = row
        if texts:
            as_read = ", ".join(f"`{c.name}` {'string' if c.type in TIMES + ('binary',) else c.type}" for c in value_cols)
        parsed = F.from_csv(text, f"{as_read}, {CORRUPT} string", {**options, "columnNameOfCorruptRecord": CORRUPT})
        cells = F.from_csv(text, ", ".join(f"`{c.name}` string" for c in value_cols) or "`__none` string", options)
        return _Parser(parsed, lambda called: _ksql_times_of_text(called, value_cols) if texts else called,
                       lambda parsed: F.coalesce(*[_field_reason(cells.getField(c.name), parsed.getField(c.name), c,
                                                                 "the value's field") for c in value_cols],
                                                 F.lit(None).cast("string")))
    if unwrapped_value(source):  # ksqlDB WRAP_SINGLE_VALUE=false: the value is the one column's JSON value (an
        # AVRO one turned into its JSON text: ``_binary_as_json``)
        text = F.when(text.isNotNull(), F.concat(F.lit(f'{{"{value_cols[0].name}":'), text, F.lit("}")))
    if coerces(source):
        return _Parser(_ksql_texts(text, value_cols), lambda called: _ksql_coerced(called, value_cols),
                       lambda _: _ksql_coerced(F.col(CALLED), value_cols, shown=True).getField(REASON))
    return _Parser.whole(F.from_json(text, f"{row}, {CORRUPT} string", {**JSON_READ_OPTIONS, "columnNameOfCorruptRecord": CORRUPT}),
                         lambda parsed: _field_reasons(F.from_json(text, "map<string,string>"), parsed, value_cols, "the value's field"))


SHOWN = 60  # characters of an offending value a reason shows
TEXT_FORMATS = ("JSON", "JSON_SR", "DELIMITED", "KAFKA", "debezium-json")  # values that are text: a reason shows them


def _shown(text: Column) -> Column:
    """``text`` quoted, cut to ``SHOWN`` characters."""
    return F.concat(F.lit("'"), F.substring(text, 1, SHOWN), F.when(F.length(text) > SHOWN, F.lit("...'")).otherwise(F.lit("'")))


def _field_reason(raw: Column, value: Column, column, where: str) -> Column:
    """Why a field holding the text ``raw`` has no ``value`` as ``column``'s type, or null."""
    return F.when(raw.isNotNull() & value.isNull(), F.concat(
        F.lit(f"{where} {column.name} holds "), _shown(raw), F.lit(f", which is not {ksql_type_name(column.type)}")))


def _field_reasons(raws: Column, parsed: Column, columns, where: str) -> Column:
    """The first field of ``parsed`` (a struct of ``columns``) that Spark's parser could not read as its column's type
    though its JSON (``raws``: the object as ``map<string,string>``, each field's JSON text) holds a value; Spark's
    JSON parser keeps the fields it could read (partial results), so the field left null is the one that failed."""
    return F.coalesce(*[_field_reason(raws.getItem(c.name), parsed.getField(c.name), c, where) for c in columns],
                      F.lit(None).cast("string"))


COERCED = ("tinyint", "smallint", "int", "bigint", "float", "double")
TIMES = ("timestamp", "date", TIME)  # read by ksqlDB from numbers: epoch milliseconds, epoch days, ms of the day
REASON = "__reason"  # in a parsed value: why a field's value could not be read as its column's type


def coerces(source) -> bool:
    """Whether ``source``'s JSON values are read with ksqlDB's coercions (``_ksql_coerced``): a ksqlDB-declared
    source of JSON values (Avro or Protobuf ones turned into JSON too)."""
    return _read_as_ksql(source) and source.value_format not in ("KAFKA", "DELIMITED")


def _ksql_texts(text: Column, columns) -> Column:
    """A JSON value parsed with its numbers and times as text, for ``_ksql_coerced``."""
    as_text = ", ".join(f"`{c.name}` {_text_leaves(c.type)}" for c in columns) or "`__none` string"
    return F.from_json(text, f"{as_text}, {CORRUPT} string", {**JSON_READ_OPTIONS, "columnNameOfCorruptRecord": CORRUPT})


def _ksql_coerced(parsed: Column, columns, shown: bool = False) -> Column:
    """A JSON value (``parsed``: as ``_ksql_texts`` parses it) read as ksqlDB's ``KsqlJsonDeserializer`` reads it: a
    number takes a JSON number (an integer its whole part) or a string holding one (``"22"``), a STRING column any scalar as its text, a TIMESTAMP a
    number of milliseconds since 1970, a DATE one of days and a TIME one of milliseconds since midnight (or, as
    other readers take them, their text), inside a STRUCT, ARRAY or MAP too. Numbers and times are parsed as text
    and then converted (``_ksql_scalar``); a field that does not convert makes the record bad, with ``REASON``
    naming the field (and, for a column's own value, the column's type; ``shown``: and its value)."""
    fields, reasons = [], []
    for c in columns:
        raw = parsed.getField(c.name)
        if c.type not in COERCED + TIMES and _text_leaves(c.type) != c.type:  # inside a STRUCT, ARRAY or MAP
            fields.append(_of_text(raw, c.type).alias(c.name))
            reasons.append(F.when(_bad_leaves(raw, c.type, TIMES), F.lit(
                f"the value's field {c.name} holds a time that is neither a number nor a time's text")))
            reasons.append(F.when(_bad_leaves(raw, c.type, COERCED), F.lit(
                f"the value's field {c.name} holds a number that does not read as its type")))
            continue
        if c.type not in COERCED + TIMES:
            fields.append(raw.alias(c.name))
            continue
        value = _ksql_scalar(raw, c.type)
        fields.append(value.alias(c.name))
        reasons.append(_field_reason(raw, value, c, "the value's field") if shown else F.when(
            raw.isNotNull() & value.isNull(), F.lit(f"the value's field {c.name} is not {ksql_type_name(c.type)}")))
    reason = F.coalesce(*reasons) if reasons else F.lit(None).cast("string")
    return F.struct(*fields, F.coalesce(parsed.getField(CORRUPT), reason).alias(CORRUPT), reason.alias(REASON))


def _ksql_time(text: Column, type_: str) -> Column:
    """A TIMESTAMP, DATE or TIME field as ksqlDB reads one: a number of milliseconds (``JsonSerdeUtils.toTimestamp``)
    or days (``toDate``) since 1970, or of milliseconds since midnight (``toTime``), as its serializers write them
    (``lower.sink``), or, as other readers take them, the time's text; null when it is neither."""
    if type_ == "timestamp":
        return F.coalesce(F.timestamp_millis(_whole_number(text, "bigint")),
                          F.to_timestamp(text, JSON_READ_OPTIONS["timestampFormat"]))
    if type_ == TIME:
        millis = _whole_number(text, "bigint")
        return F.coalesce(F.when((millis >= 0) & (millis < DAY_MS), F.call_function("time_from_millis", millis).cast(TIME)),
                          text.try_cast(TIME))
    return F.coalesce(F.date_from_unix_date(_whole_number(text, "int")), F.to_date(text, "yyyy-MM-dd"))


def _whole_number(text: Column, type_: str) -> Column:
    """``text`` cast to the integral ``type_`` (null where it is not one), without the cast's cost on a time's
    text: Spark's failed cast throws inside, ~6 us a value, most of a record's decode when a time field holds text.
    After its first digit a whole number's text has only digits, a fraction and trailing spaces, so text with a
    digit followed by '-' or ':' is null without the cast."""
    return F.when(~text.rlike("[0-9].*[-:]"), text.try_cast(type_))


def _text_leaves(type_: str, leaves=COERCED + TIMES) -> str:
    """``type_`` with every scalar of a type in ``leaves`` in it, inside a STRUCT, ARRAY or MAP too, read as text."""
    if type_ in leaves:
        return "string"
    fields = struct_fields(type_)
    if fields:
        return "struct<" + ",".join(f"`{n.replace('`', '``')}`:{_text_leaves(t, leaves)}" for n, t in fields) + ">"
    if type_.startswith("array<"):
        return f"array<{_text_leaves(type_[len('array<'):-1], leaves)}>"
    if type_.startswith("map<"):
        key, value = split_type_args(type_[len("map<"):-1])
        return f"map<{key},{_text_leaves(value, leaves)}>"
    return type_


def _ksql_scalar(text: Column, type_: str) -> Column:
    """A number or time field's text as ksqlDB reads it: a time as ``_ksql_time`` does; a number from a JSON number
    or a string holding one, an integer a fraction's whole part (Jackson's ``intValue`` / ``asLong``); null when it
    does not convert."""
    if type_ in TIMES:
        return _ksql_time(text, type_)
    value = text.try_cast(type_)
    if type_ in ("tinyint", "smallint", "int", "bigint"):
        value = F.coalesce(value, text.try_cast("double").try_cast(type_))
    return value


def _of_text(column: Column, type_: str) -> Column:
    """``column``, read as ``_text_leaves(type_)``, as ``type_``: every number and time in it as ksqlDB reads one."""
    if type_ in COERCED + TIMES:
        return _ksql_scalar(column, type_)
    fields = struct_fields(type_)
    if fields:
        return F.when(column.isNotNull(), F.struct(*[_of_text(column.getField(n), t).alias(n) for n, t in fields]))
    if type_.startswith("array<"):
        return F.transform(column, lambda e: _of_text(e, type_[len("array<"):-1]))
    if type_.startswith("map<"):
        return F.transform_values(column, lambda _, e: _of_text(e, split_type_args(type_[len("map<"):-1])[1]))
    return column


def _bad_leaves(column: Column, type_: str, leaves) -> Column:
    """Whether a scalar of a type in ``leaves`` anywhere in ``column`` (read as ``_text_leaves(type_)``) does not
    convert (``_ksql_scalar``)."""
    if type_ in leaves:
        return column.isNotNull() & _ksql_scalar(column, type_).isNull()
    if _text_leaves(type_, leaves) == type_:
        return F.lit(False)
    fields = struct_fields(type_)
    if fields:
        return F.greatest(F.lit(False), *[F.coalesce(_bad_leaves(column.getField(n), t, leaves), F.lit(False))
                                          for n, t in fields])
    if type_.startswith("array<"):
        return F.coalesce(F.exists(column, lambda e: _bad_leaves(e, type_[len("array<"):-1], leaves)), F.lit(False))
    value = split_type_args(type_[len("map<"):-1])[1]
    return F.coalesce(F.exists(F.map_values(column), lambda e: _bad_leaves(e, value, leaves)), F.lit(False))


def _ksql_times_of_text(parsed: Column, columns) -> Column:
    """A DELIMITED value parsed with its TIMESTAMP, DATE and BYTES columns as text (``_value_parser``), those columns
    read as ksqlDB reads them (``_ksql_time``; BYTES from base64); a time that is neither a number nor a time makes
    the value bad."""
    fields, bad = [], []
    for c in columns:
        raw = parsed.getField(c.name)
        value = _ksql_time(raw, c.type) if c.type in TIMES else F.unbase64(raw) if c.type == "binary" else raw
        fields.append(value.alias(c.name))
        if c.type in TIMES:
            bad.append(F.when(raw.isNotNull() & value.isNull(), raw))
    return F.struct(*fields, F.coalesce(parsed.getField(CORRUPT), *bad).alias(CORRUPT))


def _read_as_ksql(source) -> bool:
    """Whether ``source`` is read as ksqlDB reads its topics: a ksqlDB stream or table (declared, or a ksqlDB
    query's sink), not a changelog envelope."""
    return source.dialect == "ksql" and not source.changelog_format


def unwrapped_value(source) -> bool:
    """ksqlDB's ``WRAP_SINGLE_VALUE=false`` on a JSON or AVRO source or sink with one value column: its value is
    that column's value itself (``connectors.formats.single_value_unwrapped``)."""
    value_cols = [c for c in source.columns if c.origin == "value"]
    return single_value_unwrapped(source.value_format, dict(source.properties), value_cols)


def _time_column(source, value: Column) -> Column:
    """The value of the source's ``TIMESTAMP`` column (``value``: the parsed value)."""
    col = source.column(source.timestamp_column)
    key_cols = [c for c in source.columns if c.origin == "key"]
    return _key_column(source, col, len(key_cols) > 1) if col.origin == "key" else value.getField(col.name)


def _millis(source, time: Column) -> Column:
    """The source's ``TIMESTAMP`` column's value ``time`` as epoch milliseconds: a TIMESTAMP's, a BIGINT itself, or
    text read in its ``TIMESTAMP_FORMAT`` (null when it does not match)."""
    if source.timestamp_format is not None:
        return F.unix_millis(F.to_timestamp(time, source.timestamp_format))
    return F.unix_millis(time) if source.column(source.timestamp_column).type.startswith("timestamp") else time.cast("bigint")


def _decode_error(source, parsed: Column, reason: Optional[Callable[[Column], Column]] = None) -> Column:
    """Why a record cannot be decoded, or null. A value that does not fit is "not <format> with the columns of
    <source>"; given ``reason`` (``_Parser.reason``: explaining a dead letter, ``failure_explainer``), the error
    names the field to blame, its value and its type, or shows the value; a ksqlDB JSON value names its field
    (``_ksql_coerced``) either way. A text value that is not UTF-8 does not fit, whatever its parser made of it
    (Spark's text type would carry the bytes on unchecked)."""
    fmt = source.changelog_format or source.value_format
    text = F.col("value").cast("string")
    not_utf8 = text.isNotNull() & ~F.call_function("is_valid_utf8", text) if fmt in TEXT_FORMATS else F.lit(False)
    why = F.concat(parsed.getField(REASON), F.lit(f" ({source.name})")) if coerces(source) else F.lit(None).cast("string")
    generic = F.lit(f"the value is not {fmt} with the columns of {source.name}")
    if reason is not None:
        if fmt in TEXT_FORMATS:
            generic = F.concat(F.lit("the value "), _shown(text), F.lit(f" is not {fmt} with the columns of {source.name}"))
        why = F.when(not_utf8, F.lit(f"the value is not UTF-8 text ({source.name})")).otherwise(
            F.concat(reason(parsed), F.lit(f" ({source.name})")))
    failed = F.col("value").isNotNull() & (parsed.isNull() | parsed.getField(CORRUPT).isNotNull() | not_utf8)
    error = F.when(failed, F.coalesce(why, generic))
    if source.changelog_format == "debezium-json":
        error = F.coalesce(error, F.when(F.col("value").isNotNull() & ~parsed.getField("op").isin(*DEBEZIUM_OPS),
                                         F.lit("the debezium-json 'op' is not c, r, u or d")))
    if source.value_format in BINARY_FORMATS:
        error = F.coalesce(F.col(BINARY_ERROR), error)
    if source.timestamp_column and source.dialect == "ksql":  # ksqlDB skips a record whose time it cannot read
        time = _time_column(source, parsed)
        millis = _millis(source, time)
        wanted = f"a time in the format '{source.timestamp_format}'" if source.timestamp_format else "a time since 1970"
        error = F.coalesce(error, F.when(time.isNotNull() & (millis.isNull() | (millis < 0)), F.concat(
            F.lit(f"the TIMESTAMP column {source.timestamp_column} holds "), _shown(time.cast("string")),
            F.lit(f", not {wanted}"))))
    if not source.timestamp_column and not source.watermark_column and source.style != "flink":
        # the record's own time is its event time: Kafka's -1 says it has none (Kafka Streams skips such a record)
        error = F.coalesce(error, F.when(F.col("timestamp") < 0, F.concat(
            F.lit("the record's timestamp is "), F.col("timestamp").cast("string"), F.lit(", not a time since 1970"))))
    key_cols = [c for c in source.columns if c.origin == "key"]
    if key_cols and source.kind == "TABLE" and _read_as_ksql(source):  # as Kafka Streams' table source skips it
        error = F.coalesce(error, F.when(F.col("key").isNull(), F.lit(f"the record has no key, which a row of {source.name} needs")))
    if len(key_cols) == 1:
        col = key_cols[0]
        key = _key_column(source, col, False)
        shown = [_shown(F.col("key").cast("string")), F.lit(" ")] if reason is not None else []
        error = F.coalesce(error, F.when(F.col("key").isNotNull() & key.isNull(), F.concat(
            F.lit("the key "), *shown, F.lit(f"is not {source.key_format} {ksql_type_name(col.type)} ({col.name})"))))
    return error


def _binary_as_json(df: DataFrame, source) -> DataFrame:
    """Avro or protobuf values as JSON text of the same record (``connectors.formats``), for the JSON decoder."""
    value_cols = [(c.name, c.type) for c in source.columns if c.origin == "value"]
    writer = writer_schema(source.value_format, dict(source.properties), source.name, value_cols)
    out = StructType(df.schema.fields + [StructField(BINARY_ERROR, StringType())])
    return df.mapInArrow(binary_as_json(writer, [n for n, _ in value_cols], source.name, unwrapped_value(source)), out)


def _decoded(df: DataFrame, scan: Scan) -> DataFrame:
    """The scan's columns from the parsed value (``PARSED``), with ``RAW`` and ``ERROR`` kept."""
    source = scan.source
    failed = F.col(ERROR).isNotNull()
    debezium = source.changelog_format == "debezium-json"
    if debezium:
        # a null value is the Kafka tombstone that follows a delete: the delete already said it
        df = df.where(failed | F.col(f"{PARSED}.op").isin(*DEBEZIUM_OPS))
        tombstone = F.col(f"{PARSED}.op") == "d"
        df = df.withColumn("__v", F.when(tombstone, F.col(f"{PARSED}.before")).otherwise(F.col(f"{PARSED}.after")))
    else:
        df = df.withColumn("__v", F.col(PARSED))
        tombstone = F.col("value").isNull()
    if source.kind == "STREAM":
        df = df.where(~tombstone)
    by_name = {f.name: f.id for f in scan.fields if not f.hidden}
    selected: list[Column] = []
    key_cols = [c for c in source.columns if c.origin == "key"]
    for col in source.columns:
        fid = by_name[col.name]
        if col.origin == "value" and source.kind == "TABLE" and col.name in source.key_columns and not debezium:
            # a Flink primary key lives in the value too, but a tombstone has only the record key
            from_key = _key_column(source, col, len(source.key_columns) > 1)
            selected.append(F.when(tombstone, from_key).otherwise(F.col("__v").getField(col.name)).alias(fid))
        elif col.origin == "value":
            selected.append(F.col("__v").getField(col.name).alias(fid))
        elif col.origin == "key":
            selected.append(_key_column(source, col, len(key_cols) > 1).alias(fid))
        elif col.origin == "metadata":
            selected.append(record_field(col.metadata, col.type).alias(fid))
        else:
            expr = F.current_timestamp() if col.name == source.proctime_column else compile_expr(col.computed)
            selected.append(expr.alias(fid))
    rowtime = F.col("timestamp")
    if source.timestamp_column:
        rowtime = _millis(source, _time_column(source, F.col("__v")))
        rowtime = F.when(tombstone, F.col("timestamp")).otherwise(rowtime)  # a tombstone has only its record time
    selected += [rowtime.alias(f.id) for f in _own_rowtimes(scan)]
    selected += [record_field(*RECORD_POSITIONS[f.name]).alias(f.id) for f in scan.fields
                 if f.hidden and f.name in RECORD_POSITIONS]
    selected += [rowtime.alias(ROWTIME), F.col("seq").alias(SEQ), F.lit(0).cast("bigint").alias(SUB),
                 F.col("stream_time").alias(STREAM_TIME)]
    if "topic_times" in df.columns:  # read for a KSQL windowed join (``lower.lowering.side_topics``)
        selected.append(F.col("topic_times").alias(TOPIC_TIMES))
    if source.window is not None:  # the key's window (``_window_from_key``), and a join's copies of it
        selected += [F.col(WINDOW_START), F.col(WINDOW_END)]
        selected += [F.col(bound).alias(fid) for bound, fid in zip((WINDOW_START, WINDOW_END), scan.window_bounds)]
    if source.kind == "TABLE":
        selected.append(tombstone.alias(TOMBSTONE))
    return df.select(*selected, *RAW, ERROR)


def _own_rowtimes(scan: Scan) -> list:
    """The scan's hidden copies of its record time (``plan.nodes.OWN_ROWTIME``): a join reads them."""
    return [f for f in scan.fields if f.hidden and f.name == OWN_ROWTIME]


def record_field(name: str, type_: str) -> Column:
    """A metadata column's value (``ColumnInfo.metadata``) as ``type_``: every header — (key, value)
    structs in record order (KSQL), or a map where the last value of a repeated key wins (Flink) — the last
    value of one header (null if the record lacks it), or the record's timestamp, partition, offset or topic."""
    headers = F.coalesce(F.col("headers"), F.array().cast(SOURCE_SCHEMA["headers"].dataType))
    if name == "headers" and type_.startswith("map"):
        names = F.array_distinct(F.transform(headers, lambda h: h["key"]))
        last = F.transform(names, lambda k: F.element_at(F.filter(headers, lambda h: h["key"] == k), -1)["value"])
        return F.map_from_arrays(names, last)
    if name == "headers":
        return headers.cast(type_)
    if name.startswith("header:"):
        matching = F.filter(headers, lambda h: h["key"] == F.lit(name[len("header:"):]))
        return F.when(F.size(matching) > 0, F.element_at(matching, -1)["value"])
    if name == "timestamp":
        return F.timestamp_millis(F.col("timestamp"))
    return F.col(name).cast(type_)


def _key_column(source, col, multi: bool) -> Column:
    """Key column ``col`` read from the record key in ``source``'s key format; ``multi``: the key holds several
    columns (a JSON object, or DELIMITED values in key-column order). A ksqlDB source's TIMESTAMP or DATE key
    column is read as its values are (``_ksql_time``), and so is a number column of a JSON key (``"10"`` is 10,
    as ksqlDB's JSON deserializer coerces it: ``_ksql_coerced``)."""
    ksql = _read_as_ksql(source)
    key_format = source.key_format
    json_key = key_format == "JSON" or (multi and key_format != "DELIMITED")

    def as_read(c) -> str:
        return "string" if ksql and (c.type in TIMES or (json_key and c.type in COERCED)) else c.type

    text = F.col("key").cast("string")
    if key_format == "DELIMITED":  # CSV, one column too (ksqlDB reads '"22"' as 22)
        row = ", ".join(f"`{c.name}` {as_read(c)}" for c in source.columns if c.origin == "key")
        value = F.from_csv(text, row, {"sep": delimiter_of(dict(source.properties), "key")}).getField(col.name)
    elif json_key:
        parsed = F.from_json(text, f"`{col.name}` {as_read(col)}", JSON_READ_OPTIONS).getField(col.name)
        scalar = F.from_json(F.concat(F.lit('{"v":'), text, F.lit("}")), f"v {as_read(col)}", JSON_READ_OPTIONS).getField("v")
        if not multi and source.style != "flink" and col.type.lower().startswith(("struct", "map")):
            return scalar  # ksqlDB writes a single key unwrapped: an object is the STRUCT (or MAP) itself
        value = F.when(text.startswith("{"), parsed).otherwise(scalar)
    else:
        value = text.cast(as_read(col))
    if as_read(col) == col.type:
        return value
    if col.type in TIMES:
        return _ksql_time(value, col.type)
    number = value.try_cast(col.type)
    if col.type in ("tinyint", "smallint", "int", "bigint"):  # a fraction: its whole part, as in a value
        number = F.coalesce(number, value.try_cast("double").try_cast(col.type))
    return number


def read_database(spark: SparkSession, table, columns: list[tuple[str, str]], read=None) -> DataFrame:
    """A database table's ``columns`` ((name, Spark type)), read once by an executor when the query starts:
    those ``read`` (a ``plan.pushdown.DatabaseRead``) names, the rows its WHERE lets through; the others null."""
    sent = [(n, t) for n, t in columns if read is None or n in read.columns]
    reader = spark.read.format("streamjoin_database").schema(", ".join(f"`{n}` {t}" for n, t in sent))
    reader = reader.option("url", table.url).option("table", table.table).option("columns", json.dumps([n for n, _ in sent]))
    if read is not None and read.where:
        reader = reader.option("where", read.where)
    if table.username is not None:
        reader = reader.option("user", table.username).option("password", table.password or "")
    df = reader.load()
    return df.select(*[F.col(f"`{n}`") if (n, t) in sent else F.lit(None).cast(t).alias(n) for n, t in columns])


def read_bounded(spark: SparkSession, scan: Scan, read=None) -> DataFrame:
    source = scan.source
    stored = [c for c in source.columns if c.computed is None and c.origin != "metadata"]
    fmt = source.value_format.lower()
    if source.database is not None:
        df = read_database(spark, source.database, [(c.name, c.type) for c in stored], read)
    elif fmt == "json":  # field names match columns case-insensitively, as unquoted identifiers do
        df = spark.read.options(**JSON_READ_OPTIONS).json(source.bounded_path)
        present = {c.casefold(): c for c in df.columns}
        df = df.select(*[(F.col(f"`{present[c.name.casefold()]}`") if c.name.casefold() in present else F.lit(None))
                         .cast(c.type).alias(c.name) for c in stored])
    elif fmt in ("csv", "delimited"):
        df = spark.read.schema(", ".join(f"`{c.name}` {c.type}" for c in stored)).csv(source.bounded_path)
    else:
        raise NotYetSupported(f"a file source in format {source.value_format}", issue=7)
    by_name = {f.name: f.id for f in scan.fields if not f.hidden}
    selected = [
        (compile_expr(c.computed) if c.computed is not None
         else F.lit(None).cast(c.type) if c.origin == "metadata"  # a file's lines have no headers or offsets
         else F.col(f"`{c.name}`")).alias(by_name[c.name])
        for c in source.columns
    ]
    rowtime = F.lit(0).cast("bigint")
    if source.timestamp_column:
        ts = F.col(f"`{source.timestamp_column}`")
        rowtime = F.unix_millis(ts) if source.column(source.timestamp_column).type.startswith("timestamp") else ts.cast("bigint")
    return df.select(*selected, *[rowtime.alias(f.id) for f in _own_rowtimes(scan)], rowtime.alias(ROWTIME),
                     F.monotonically_increasing_id().alias(SEQ),
                     F.lit(0).cast("bigint").alias(SUB), F.lit(None).cast("bigint").alias(STREAM_TIME))
