"""Avro schemas derived from Spark column types, and the Kafka source's batch shares (no Spark, no broker)."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from streamjoin.connectors.formats import avro_type, avro_values_to_json, derived_avro_schema, rows_to_avro
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


@pytest.mark.parametrize("cap, available, expected", [
    (None, {"a": 5, "b": 7}, {"a": 5, "b": 7}),
    (10, {"a": 5, "b": 7}, {"a": 5, "b": 5}),
    (10, {"a": 2, "b": 70}, {"a": 2, "b": 8}),
    (3, {"a": 0, "b": 9, "c": 9}, {"a": 0, "b": 2, "c": 1}),
])
def test_a_batch_limit_is_shared_between_partitions(cap, available, expected):
    assert _share(cap, available) == expected
