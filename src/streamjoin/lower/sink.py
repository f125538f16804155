"""Encoding a query's result into topic records: key, value (in the sink's format), timestamp, ingestion order."""
from __future__ import annotations

from typing import Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType, BinaryType, DataType, DateType, LongType, MapType, StructField, StructType, TimestampType, TimeType,
)

from ..connectors.database import DELETE, ORDER
from ..connectors.formats import (
    delimiter_of, json_keys_to_binary, key_writer_schema, rows_to_binary, window_bytes, writer_schema,
)
from ..plan.nodes import ROWTIME, SEQ, SUB, TOMBSTONE, WINDOW_END, WINDOW_START, Repartition, Sink, walk
from .decode import unwrapped_value

TEXT_FORMATS = ("JSON", "DELIMITED", "KAFKA")
TO_JSON = {"ignoreNullFields": "false", "timestampFormat": "yyyy-MM-dd HH:mm:ss.SSS"}
RECORD_SCHEMA = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                            StructField("timestamp", LongType()), StructField("seq", LongType()), StructField("sub", LongType())])


def encode(sink: Sink, df: DataFrame) -> DataFrame:
    """``key, value, timestamp, seq, sub`` rows for the sink's topic (a tombstone has a null value)."""
    target = sink.target
    node = sink.input
    df = _with_valid_times(sink, _ksql_times(sink, df))
    row = _none_when_deleted(df, F.struct(*[F.col(fid).alias(node.field(fid).name) for fid in sink.value_fields]))
    meta = [_timestamp(sink, df).alias("timestamp"), F.col(SEQ).alias("seq"), F.col(SUB).alias("sub")]
    binary_key = key_writer(sink, df)
    key = (_windowed(sink, df, _json_key(sink)) if binary_key else _key(sink, target.key_format, df)).alias("key")
    records = _records(sink, df, key, row, meta)
    if binary_key is None:
        return records
    return records.mapInArrow(json_keys_to_binary(binary_key, _suffix(sink, df)), RECORD_SCHEMA)


def _ksql_times(sink: Sink, df: DataFrame) -> DataFrame:
    """A ksqlDB sink's times as ksqlDB's serializers write them in its text formats (JSON, DELIMITED, KAFKA): a
    TIMESTAMP as the number of milliseconds since 1970, a DATE as the number of days, inside a STRUCT, ARRAY or
    MAP too (``JsonSerdeUtils``, ``KsqlDelimitedSerializer``); a ksqlDB reader of the topic takes them back
    (``lower.decode``). Its AVRO and PROTOBUF values carry their logical types."""
    target = sink.target
    if target.dialect != "ksql":
        return df
    fids = [*(sink.value_fields if target.value_format in TEXT_FORMATS else ()),
            *(sink.key if target.key_format in TEXT_FORMATS else ())]
    numbers = {fid: as_numbers(F.col(fid), df.schema[fid].dataType) for fid in dict.fromkeys(fids)}
    numbers = {fid: column for fid, column in numbers.items() if column is not None}
    return df.withColumns(numbers) if numbers else df


def as_numbers(column: Column, data_type: DataType) -> Optional[Column]:
    """``column`` with every TIMESTAMP in it as epoch milliseconds, every DATE as epoch days and every TIME as
    milliseconds since midnight; None when its type holds none of them."""
    if isinstance(data_type, TimestampType):
        return F.unix_millis(column)
    if isinstance(data_type, DateType):
        return F.unix_date(column)
    if isinstance(data_type, TimeType):
        return F.call_function("time_to_millis", column)
    if isinstance(data_type, ArrayType) and as_numbers(column, data_type.elementType) is not None:
        return F.transform(column, lambda e: as_numbers(e, data_type.elementType))
    if isinstance(data_type, MapType) and as_numbers(column, data_type.valueType) is not None:
        return F.transform_values(column, lambda _, v: as_numbers(v, data_type.valueType))
    if isinstance(data_type, StructType):
        fields = [(f.name, as_numbers(column.getField(f.name), f.dataType)) for f in data_type.fields]
        if all(number is None for _, number in fields):
            return None
        return F.when(column.isNotNull(), F.struct(*[(column.getField(name) if number is None else number).alias(name)
                                                      for name, number in fields]))
    return None


def database_rows(sink: Sink, df: DataFrame) -> DataFrame:
    """Rows for a database table (``connectors.database.write_part``): the sink's columns by name in their own
    types, whether the row is a retraction (``DELETE``), and its order in the micro-batch."""
    node = sink.input
    deleted = F.coalesce(F.col(TOMBSTONE), F.lit(False)) if TOMBSTONE in df.columns else F.lit(False)
    return df.select(*[F.col(fid).alias(node.field(fid).name) for fid in sink.value_fields], deleted.alias(DELETE),
                     F.col(SEQ).alias(ORDER[0]), F.col(SUB).alias(ORDER[1]))


def _records(sink: Sink, df: DataFrame, key: Column, row: Column, meta: list) -> DataFrame:
    """``RECORD_SCHEMA`` rows: ``key`` as given, the value ``row`` in the sink's value format."""
    target = sink.target
    writer = value_writer(sink, df)
    if writer is not None:
        if unwrapped(sink):  # ksqlDB's AVRO WRAP_SINGLE_VALUE=false: the one column's value is the record's value
            row = _none_when_deleted(df, F.col(sink.value_fields[0]))
        return df.select(key, row.alias("__row"), *meta).mapInArrow(rows_to_binary(writer, "__row"), RECORD_SCHEMA)
    if target.value_format == "KAFKA":  # one primitive column, as its text
        value = F.col(sink.value_fields[0]).cast("string") if sink.value_fields else F.lit(None).cast("string")
        value = _none_when_deleted(df, value)
    elif target.value_format == "DELIMITED" and target.dialect == "ksql":
        value = F.when(row.isNotNull(), ksql_delimited(df, sink.value_fields, delimiter_of(dict(target.properties))))
    elif target.value_format == "DELIMITED":
        value = F.to_csv(row, {"sep": delimiter_of(dict(target.properties)), "timestampFormat": TO_JSON["timestampFormat"]})
    elif unwrapped(sink):  # Lenses `expr AS _value`, ksqlDB's WRAP_SINGLE_VALUE=false: that one JSON value, not an object
        value = _none_when_deleted(df, _json_of(F.col(sink.value_fields[0])))
    else:
        value = F.to_json(row, TO_JSON)
    return df.select(key, value.cast("binary").alias("value"), *meta)


def _none_when_deleted(df: DataFrame, value: Column) -> Column:
    """``value``, or none on a row that deletes its key: the record is a tombstone."""
    return F.when(F.col(TOMBSTONE), F.lit(None)).otherwise(value) if TOMBSTONE in df.columns else value


def ksql_delimited(df: DataFrame, fields, sep: str) -> Column:
    """ksqlDB's DELIMITED text of ``fields``: each one's text, joined by ``sep`` and quoted as Apache Commons CSV 1.4
    (ksqlDB's writer) quotes in its MINIMAL mode: a first field that is empty or starts with neither a letter nor a
    digit; any field that starts with a character up to '#', ends with one up to a space, or holds a line break, a
    quote or the delimiter (a quote doubled inside). A NULL is written as nothing, unquoted; BYTES as base64."""
    cells = []
    for i, fid in enumerate(fields):
        column = F.col(fid)
        text = F.base64(column) if isinstance(df.schema[fid].dataType, BinaryType) else column.cast("string")
        filled = F.length(text) > 0
        quote = (filled & ((F.ascii(text) <= 35) | (F.ascii(F.substring(text, -1, 1)) <= 32)
                           | text.rlike('[\n\r"]') | text.contains(sep)))
        if i == 0:
            quote = quote | ~filled | ~text.rlike("^[0-9A-Za-z]")
        quoted = F.concat(F.lit('"'), F.regexp_replace(text, '"', '""'), F.lit('"'))
        cells.append(F.when(column.isNull(), F.lit("")).when(quote, quoted).otherwise(text))
    return F.concat_ws(sep, *cells) if cells else F.lit("")


def key_writer(sink: Sink, df: DataFrame) -> Optional[tuple[str, str]]:
    """(format, schema) an AVRO- or PROTOBUF-keyed sink writes its keys with (``connectors.formats.key_writer_schema``,
    from the result's key columns); None for any other key format. Readers of the topic decode with it."""
    if not sink.key:
        return None
    return key_writer_schema(sink.target.key_format, sink.target.name,
                             [(sink.input.field(k).name, df.schema[k].dataType.simpleString()) for k in sink.key])


def _json_key(sink: Sink) -> Column:
    """The key as JSON text, to be written in a binary format: one column's value itself, several as an object."""
    keys = list(sink.key)
    if len(keys) == 1:
        return _json_of(F.col(keys[0])).cast("binary")
    return F.to_json(F.struct(*[F.col(k).alias(sink.input.field(k).name) for k in keys]), TO_JSON).cast("binary")


def _json_of(column: Column) -> Column:
    """One column's value as JSON text (``"a"``, ``1``, ``{...}``): the one element of a JSON array of it."""
    return F.regexp_extract(F.to_json(F.array(column), TO_JSON), r"^\[(.*)\]$", 1)


def value_writer(sink: Sink, df: DataFrame) -> Optional[tuple[str, str]]:
    """(format, schema) a binary sink (AVRO, PROTOBUF) writes its values with, from the result's columns (or
    the sink's own ``VALUE_AVRO_SCHEMA``): ``connectors.formats.writer_schema``; None for text formats.
    Readers of the topic decode with it."""
    columns = [(sink.input.field(fid).name, df.schema[fid].dataType.simpleString()) for fid in sink.value_fields]
    return writer_schema(sink.target.value_format, dict(sink.target.properties), sink.target.name, columns)


def _timestamp(sink: Sink, df: DataFrame) -> Column:
    """The record time: the result's time, or the column the sink's ``TIMESTAMP`` property names (ksqlDB),
    in ms; a record whose column is NULL keeps the result's time."""
    rowtime = F.col(ROWTIME).cast("bigint")
    named = _named_time(sink, df)
    return rowtime if named is None else F.coalesce(named[1], rowtime)


def _named_time(sink: Sink, df: DataFrame) -> Optional[tuple[Column, Column]]:
    """The column a ksqlDB sink's ``TIMESTAMP`` property names, and its value in ms: a TIMESTAMP's, a BIGINT itself,
    or text read in the sink's ``TIMESTAMP_FORMAT`` (null when it does not match); None without the property."""
    name = sink.target.timestamp_column if sink.target.created_by_query else None
    fid = next((f.id for f in sink.input.fields if name and not f.hidden and f.name == name), None)
    if fid is None:
        return None
    column = F.col(fid)
    if sink.target.timestamp_format is not None:
        return column, F.unix_millis(F.to_timestamp(column, sink.target.timestamp_format))
    if df.schema[fid].dataType.typeName() == "timestamp":
        return column, F.unix_millis(column)
    return column, column.cast("bigint")


def _with_valid_times(sink: Sink, df: DataFrame) -> DataFrame:
    """Without the records whose ``TIMESTAMP`` column holds no valid time (text not in the format, a time before
    1970): ksqlDB's timestamp extractor fails on them and the record is skipped."""
    named = _named_time(sink, df)
    if named is None:
        return df
    column, millis = named
    return df.where(column.isNull() | (millis >= 0))


def unwrapped(sink: Sink) -> bool:
    """A sink whose one value column is written as the value itself: named ``_value`` (Lenses' ``expr AS
    _value``), or a ksqlDB sink ``WITH (WRAP_SINGLE_VALUE=false)``."""
    fields = sink.value_fields
    return len(fields) == 1 and (sink.input.field(fields[0]).name.casefold() == "_value" or unwrapped_value(sink.target))


def _key(sink: Sink, key_format: str, df: DataFrame) -> Column:
    """The record key; a windowed result's key is followed by its window's start as 8 big-endian bytes (Kafka
    Streams' ``TimeWindowedSerializer``), a session's by its end and then its start (``SessionKeySchema``)."""
    return _windowed(sink, df, _unwindowed_key(sink, key_format, df))


def _windowed(sink: Sink, df: DataFrame, key: Column) -> Column:
    """``key`` followed by its window's bounds, for a windowed result."""
    if not _suffix(sink, df):
        return key
    bounds = (WINDOW_END, WINDOW_START) if sink.target.window[0] == "SESSION" else (WINDOW_START,)
    return F.concat(F.coalesce(key, F.lit(b"")), *[F.unhex(F.lpad(F.hex(F.col(c)), 16, "0")) for c in bounds])


def _suffix(sink: Sink, df: DataFrame) -> int:
    """How many bytes of window follow the result's key (``connectors.formats.window_bytes``); 0 unwindowed."""
    return window_bytes(sink.target.window[0]) if sink.target.window is not None and WINDOW_START in df.columns else 0


def _unwindowed_key(sink: Sink, key_format: str, df: DataFrame) -> Column:
    """The key in ``key_format``; in ksqlDB, a key whose every column is NULL is no key at all (a record read
    without one keeps none), but a JSON key of several columns that PARTITION BY made is written with its NULLs."""
    keys = list(sink.key)
    if not keys:
        return F.lit(None).cast("binary")
    key = _key_of_columns(sink, key_format, df)
    partitioned = len(keys) > 1 and key_format == "JSON" and any(isinstance(n, Repartition) for n in walk(sink.input))
    if sink.target.style == "flink" or partitioned:
        return key
    return F.when(F.greatest(*[F.col(k).isNotNull() for k in keys]) if len(keys) > 1 else F.col(keys[0]).isNotNull(), key)


def _key_of_columns(sink: Sink, key_format: str, df: DataFrame) -> Column:
    node = sink.input
    keys = list(sink.key)
    if len(keys) == 1 and key_format == "KAFKA":
        return F.col(keys[0]).cast("string").cast("binary")
    if key_format == "DELIMITED":  # ksqlDB: the key columns' values in order, comma-separated unless KEY_DELIMITER
        separator = delimiter_of(dict(sink.target.properties), "key")
        if sink.target.dialect == "ksql":  # quoted as its values are
            return ksql_delimited(df, keys, separator).cast("binary")
        return F.to_csv(F.struct(*[F.col(k) for k in keys]), {"sep": separator}).cast("binary")
    if len(keys) == 1 and sink.target.style != "flink":  # ksqlDB's JSON key: the value itself, unwrapped
        return _json_of(F.col(keys[0])).cast("binary")
    return F.to_json(F.struct(*[F.col(k).alias(node.field(k).name) for k in keys]), TO_JSON).cast("binary")
