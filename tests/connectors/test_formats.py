"""Avro schemas derived from Spark column types, and the Kafka source's batch shares (no Spark, no broker)."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from streamjoin.connectors.formats import (
    avro_type, avro_values_to_json, derived_avro_schema, encode_value, json_default, ksql_json_default, rows_to_avro, value_as_json,
    writer_schema,
)
from streamjoin.plan.catalog import ColumnInfo, SourceInfo
from streamjoin.connectors.kafka_source import _share


@pytest.mark.parametrize("spark_type, avro", [
    ("int", "int"), ("bigint", "long"), ("string", "string"), ("double", "double"), ("boolean", "boolean"),
    ("timestamp", {"type": "long", "logicalType": "timestamp-millis"}),
    ("decimal(10,2)", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}),
    ("array<int>", {"type": "array", "items": ["null", "int"]}),
    ("map<string,double>", {"type": "map", "values": ["null", "double"]}),
])
def test_avro_types(spark_type, avro):
    assert avro_type(spark_type, "f") == avro


def test_rows_written_as_avro_read_back_as_json():
    schema = json.dumps(derived_avro_schema("R", [("ID", "bigint"), ("TAGS", "array<string>"), ("S", "struct<a:int,b:string>")]))
    rows = pa.record_batch([pa.array([{"ID": 1, "TAGS": ["x"], "S": {"a": 2, "b": "y"}}, None])], names=["__row"])
    [written] = list(rows_to_avro(schema, "__row")([rows]))
    assert written.column(0).to_pylist()[1] is None  # a tombstone stays a tombstone
    [read] = list(avro_values_to_json(schema, ["id", "tags", "s"], "R")([written.rename_columns(["value"])]))
    assert json.loads(read.column(0).to_pylist()[0]) == {"id": 1, "tags": ["x"], "s": {"a": 2, "b": "y"}}
    assert read.column(1).to_pylist() == [None, None]


UNWRAPPED = [  # (the one value column's type, its value as a case gives it, as it reads back)
    ("int", 10, 10), ("array<int>", [12, None], [12, None]), ("struct<`F0`:int>", {"f0": 1}, {"F0": 1}),
    ("map<string,double>", {"a": 1.5, "b": None}, {"a": 1.5, "b": None}),
]


@pytest.mark.parametrize("spark_type, given, read", UNWRAPPED)
def test_an_unwrapped_avro_value_is_its_one_column_value_itself(spark_type, given, read):
    """ksqlDB's AVRO ``WRAP_SINGLE_VALUE=false``: an optional anonymous value of the column's type, no record."""
    source = SourceInfo("U", "STREAM", "u", (ColumnInfo("V", spark_type),), value_format="AVRO",
                        properties=(("wrap_single_value", "false"),))
    fmt, schema = writer_schema("AVRO", dict(source.properties), "U", [("V", spark_type)])
    assert json.loads(schema) == ["null", avro_type(spark_type, "U_V")]
    raw = encode_value(given, source)
    values = pa.record_batch([pa.array([raw, None], pa.binary())], names=["value"])
    [back] = list(avro_values_to_json(schema, ["V"], "U", unwrapped=True)([values]))
    assert json.loads(back.column(0).to_pylist()[0]) == read
    assert back.column(0).to_pylist()[1] is None and back.column(1).to_pylist() == [None, None]
    assert json.loads(value_as_json((fmt, schema), raw)) == read


def test_an_unwrapped_avro_sink_writes_the_column_as_the_case_encodes_it():
    source = SourceInfo("U", "STREAM", "u", (ColumnInfo("V", "int"),), value_format="AVRO",
                        properties=(("wrap_single_value", "false"),))
    _, schema = writer_schema("AVRO", dict(source.properties), "U", [("V", "int")])
    [written] = list(rows_to_avro(schema, "v")([pa.record_batch([pa.array([10, None], pa.int32())], names=["v"])]))
    assert written.column(0).to_pylist() == [encode_value(10, source), None]  # a NULL value: no record value at all


TIMES = SourceInfo("T", "STREAM", "t", (ColumnInfo("AT", "timestamp"), ColumnInfo("ON_DAY", "date")), value_format="AVRO")
AVRO_TIMES = [  # (the value as a test gives it, as ksqlDB's JSON shows it, as streamjoin's shows it elsewhere)
    ({"AT": 10, "ON_DAY": 3}, {"AT": 10, "ON_DAY": 3}, {"AT": "1970-01-01 00:00:00.010", "ON_DAY": "1970-01-04"}),
    ({"AT": "10", "ON_DAY": "-1"}, {"AT": 10, "ON_DAY": -1}, {"AT": "1970-01-01 00:00:00.010", "ON_DAY": "1969-12-31"}),
    ({"AT": "2024-01-02T03:04:05.678", "ON_DAY": "2024-01-02"}, {"AT": 1704164645678, "ON_DAY": 19724},
     {"AT": "2024-01-02 03:04:05.678", "ON_DAY": "2024-01-02"}),
    ({"AT": None, "ON_DAY": None}, {"AT": None, "ON_DAY": None}, {"AT": None, "ON_DAY": None}),
]


@pytest.mark.parametrize("given, as_ksql, as_text", AVRO_TIMES)
def test_avro_times_given_as_numbers_or_text_and_shown_as_ksqldb_shows_them(given, as_ksql, as_text):
    writer = ("AVRO", json.dumps(derived_avro_schema("T", [("AT", "timestamp"), ("ON_DAY", "date")])))
    raw = encode_value(given, TIMES)
    assert json.loads(value_as_json(writer, raw, ksql_json_default)) == as_ksql
    assert json.loads(value_as_json(writer, raw, json_default)) == as_text


def test_avro_times_inside_structs_arrays_and_maps_given_as_numbers_or_text():
    columns = [("S", "struct<`AT`:timestamp>"), ("DAYS", "array<date>"), ("M", "map<string,timestamp>")]
    source = SourceInfo("N", "STREAM", "n", tuple(ColumnInfo(n, t) for n, t in columns), value_format="AVRO")
    writer = ("AVRO", json.dumps(derived_avro_schema("N", columns)))
    raw = encode_value({"S": {"AT": "1"}, "DAYS": [5, "1970-01-03"], "M": {"x": "4", "y": None}}, source)
    assert json.loads(value_as_json(writer, raw, ksql_json_default)) == {"S": {"AT": 1}, "DAYS": [5, 2], "M": {"x": 4, "y": None}}


def test_avro_bytes_given_in_base64_as_ksqldb_gives_them():
    source = SourceInfo("B", "STREAM", "b", (ColumnInfo("B", "binary"),), value_format="AVRO")
    writer = ("AVRO", json.dumps(derived_avro_schema("B", [("B", "binary")])))
    raw = encode_value({"B": "aGk="}, source)
    assert raw == b"\x02\x04hi"  # the union's branch 1 (bytes), length 2, the bytes
    assert json.loads(value_as_json(writer, raw, ksql_json_default)) == {"B": "aGk="}


@pytest.mark.parametrize("cap, available, expected", [
    (None, {"a": 5, "b": 7}, {"a": 5, "b": 7}),
    (10, {"a": 5, "b": 7}, {"a": 5, "b": 5}),
    (10, {"a": 2, "b": 70}, {"a": 2, "b": 8}),
    (3, {"a": 0, "b": 9, "c": 9}, {"a": 0, "b": 2, "c": 1}),
])
def test_a_batch_limit_is_shared_between_partitions(cap, available, expected):
    assert _share(cap, available) == expected


PROTOBUF_CASES = [  # (columns, row, the message's bytes, the row read back)
    ([("NAME", "string"), ("V", "bigint")], {"NAME": "a", "V": 1}, b"\x0a\x01a\x10\x01", {"NAME": "a", "V": 1}),
    # proto3: a null scalar is not written, and reads back as its default
    ([("NAME", "string"), ("V", "bigint"), ("OK", "boolean")], {"NAME": None, "V": None, "OK": None}, b"",
     {"NAME": "", "V": 0, "OK": False}),
    # a STRUCT is a nested message: present even with no field set, null when absent
    ([("S", "struct<A:int>")], {"S": {"A": None}}, b"\x0a\x00", {"S": {"A": 0}}),
    ([("S", "struct<A:int>")], {"S": None}, b"", {"S": None}),
    ([("L", "array<int>"), ("M", "map<string,int>")], {"L": [1, 2], "M": {"k": 3}}, b"\x0a\x02\x01\x02\x12\x05\x0a\x01k\x10\x03",
     {"L": [1, 2], "M": {"k": 3}}),
    # confluent.type.Decimal: unscaled big-endian two's complement, precision, scale
    ([("D", "decimal(10,2)")], {"D": "-12.50"}, b"\x0a\x08\x0a\x02\xfb\x1e\x10\x04\x18\x02", {"D": -12.5}),
    # BYTES given as JSON gives them, in base64, and shown so
    ([("B", "binary")], {"B": "aGk="}, b"\x0a\x02hi", {"B": "aGk="}),
]


@pytest.mark.parametrize("columns, row, wire, read", PROTOBUF_CASES)
def test_protobuf_values_as_ksqldb_derives_their_message(columns, row, wire, read):
    import json

    from streamjoin.connectors.protobuf_format import protobuf_value_as_json, value_of

    assert value_of(columns, row) == wire
    assert json.loads(protobuf_value_as_json(columns, wire)) == read
    framed = b"\x00\x00\x00\x00\x2a\x00" + wire  # the Schema Registry's framing: magic byte, id 42, first message
    assert json.loads(protobuf_value_as_json(columns, framed)) == read


# (key format, key columns, a key as a case gives it, the key's bytes, the key as ksqlDB's tests show it): one
# column is its own Avro type, several a record; a protobuf key is always a message of its columns
BINARY_KEYS = [
    ("AVRO", [("id", "string")], "AB", b"\x04AB", "AB"),
    ("AVRO", [("n", "bigint")], 3, b"\x06", 3),
    ("AVRO", [("plate", "string"), ("zone", "int")], {"PLATE": "AB", "zone": 1}, b"\x02\x04AB\x02\x02",
     {"plate": "AB", "zone": 1}),
    ("PROTOBUF", [("ID", "int")], {"ID": 10}, b"\x08\x0a", {"ID": 10}),
    ("PROTOBUF", [("ID", "int")], 10, b"\x08\x0a", {"ID": 10}),
    ("PROTOBUF", [("PLATE", "string"), ("ZONE", "int")], {"plate": "AB", "ZONE": 1}, b"\x0a\x02AB\x10\x01",
     {"PLATE": "AB", "ZONE": 1}),
]


@pytest.mark.parametrize("fmt, columns, key, wire, shown", BINARY_KEYS, ids=[f"{k[0]}-{k[2]}" for k in BINARY_KEYS])
def test_binary_keys_written_read_back_and_converted_in_batches(fmt, columns, key, wire, shown):
    from streamjoin.connectors.formats import (
        binary_keys_to_json, encode_key, json_keys_to_binary, key_as_json, key_writer_schema,
    )
    from streamjoin.plan.catalog import ColumnInfo, SourceInfo

    source = SourceInfo("cars", "STREAM", "cars", tuple(ColumnInfo(n, t, "key") for n, t in columns),
                        key_columns=tuple(n for n, _ in columns), key_format=fmt)
    writer = key_writer_schema(fmt, "cars", columns)
    assert encode_key(key, source) == wire
    assert json.loads(key_as_json(writer, wire)) == shown
    # what the sink writes and a query reads: one column's value itself, several as an object
    as_read = shown if len(columns) > 1 else next(iter(shown.values())) if isinstance(shown, dict) else shown
    batch = pa.record_batch([pa.array([json.dumps(as_read).encode(), None], pa.binary())], names=["key"])
    [written] = list(json_keys_to_binary(writer)([batch]))
    assert written.column(0).to_pylist() == [wire, None]
    [read] = list(binary_keys_to_json(writer)([written]))
    assert [json.loads(k) if k else k for k in read.column(0).to_pylist()] == [as_read, None]
