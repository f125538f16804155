"""The source reader's JSON decoding (``connectors.json_decode``) against Spark's ``from_json``: every value
the reader decodes must come out exactly as Spark decodes it; the rest it leaves to Spark."""
from __future__ import annotations

import datetime
import math

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from streamjoin.connectors.json_decode import CHUNK, canonical_names, decode_columns, decode_plan, decode_option, decodable
from streamjoin.connectors.json_format import JSON_READ_OPTIONS

COLUMNS = [("I", "INT"), ("B", "BIGINT"), ("D", "DOUBLE"), ("S", "STRING"), ("F", "BOOLEAN"), ("T", "TIMESTAMP")]

# (value, whether the reader decodes it): tricky values either decode as Spark does or are left to Spark
VALUES = [
    (b'{"I":1,"B":2,"D":3.5,"S":"x","F":true}', True),
    (b'{}', True),
    (b'{"I":null,"S":null}', True),
    (b'{"D":5}', True),  # an integer into a DOUBLE
    (b'{"D":123456789012345678901234567890}', True),
    (b'{"D":-0.0,"I":-0}', True),
    (b'{"D":NaN}', True),
    (b'{"I":-2147483648,"B":9223372036854775807}', True),
    (b'{"S":"\\u00e9\\ud83d\\ude00 \\"q\\" a\\u0000b"}', True),
    (b'{"X":{"Y":[1,2]},"I":3}', True),  # another field, nested: ignored
    (b'{"i":1,"s":"lower"}', True),  # names differ in case: not these columns
    (b'{ "I" : 1 , "S" : "spaced" }', True),
    (b'{"I":5.0}', False), (b'{"I":1e2}', False), (b'{"I":"5"}', False), (b'{"I":2147483648}', False),
    (b'{"S":5}', False), (b'{"S":{"a":1}}', False), (b'{"F":1}', False), (b'{"I":01}', False),
    (b'{"I":1,"I":2}', False), (b"{'I':1}", False), (b'{"I":1,}', False), (b'{"D":1e400}', False),
    (b'{"S":"\xff"}', False), (b'{"S":"tab\there"}', False), (b'{"I":1}{"I":2}', False),
    (b'{"I":1} x', False), (b'{"I":1,\n"S":"two lines"}', False), (b' {"I":1}', False), (b'[1,2]', False),
    (b'"text"', False), (b'', False), (b'{"__corrupt":"x"}', False), (b'not json', False),
    # a TIMESTAMP: Spark's pattern yyyy-MM-dd[[ ]['T']HH:mm[:ss][.SSS][XXX]] in UTC; the reader takes the plain forms
    (b'{"T":"2020-01-01 00:00:00.000"}', True), (b'{"T":"2020-02-29T12:34:56.789"}', True),
    (b'{"T":"2020-01-01 12:34"}', True), (b'{"T":"2020-01-01 12:34:56"}', True), (b'{"T":"1969-12-31 23:59:59.999"}', True),
    (b'{"T":"0001-01-01 00:00:00.000"}', True), (b'{"T":"9999-12-31 23:59:59.999"}', True), (b'{"T":null,"I":1}', True),
    (b'{"T":"2020-01-01"}', False), (b'{"T":"2020-01-01 00:00:00.1"}', False), (b'{"T":"2020-01-01 00:00:00Z"}', False),
    (b'{"T":"2020-01-01 00:00:00.000+01:00"}', False), (b'{"T":1577836800}', False), (b'{"T":"2021-02-29 00:00:00"}', False),
    (b'{"T":"1970-01-01 24:00:00.000"}', False), (b'{"T":" 2020-01-01 00:00"}', False), (b'{"T":"2020-1-01 00:00"}', False),
    (b'{"T":""}', False), (b'{"T":true}', False),
]


def _spark_rows(spark, values):
    schema = ", ".join(f"`{n}` {t}" for n, t in COLUMNS) + ", `__corrupt` string"
    df = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "i int, value binary")
    parsed = F.from_json(F.col("value").cast("string"), schema, {**JSON_READ_OPTIONS, "columnNameOfCorruptRecord": "__corrupt"})
    fields = [F.unix_micros(F.col(f"p.{n}")).alias(n) if t == "TIMESTAMP" else F.col(f"p.{n}") for n, t in COLUMNS]
    rows = df.select("i", parsed.alias("p")).select("i", F.when(F.col("p").isNotNull(), F.struct(*fields, "p.__corrupt")).alias("p"))
    return [r.p.asDict() if r.p is not None else None for r in rows.orderBy("i").collect()]


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _decode(values, topic="t"):
    plan = decode_plan(decode_option([(topic, COLUMNS)], {}))
    [column] = decode_columns(pa.array(["t"] * len(values)), pa.array(values, pa.binary()), plan.structs)
    return [row and {n: _micros(v) for n, v in row.items()} for row in column.to_pylist()]


def _micros(value):
    """A timestamp as microseconds since the epoch (as ``_spark_rows`` gives Spark's), anything else as it is."""
    if isinstance(value, datetime.datetime):
        return (value - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)) // datetime.timedelta(microseconds=1)
    return value


@pytest.mark.parametrize("value, decoded", VALUES, ids=[v.decode("utf-8", "replace")[:40] for v, _ in VALUES])
def test_the_reader_decodes_as_spark_does_or_leaves_it(spark, value, decoded):
    [ours] = _decode([value])
    [theirs] = _spark_rows(spark, [value])
    assert (ours is not None) is decoded
    if ours is not None:
        assert theirs["__corrupt"] is None
        assert all(_same(ours[n], theirs[n]) for n, _ in COLUMNS), (ours, theirs)


def test_a_rejected_value_leaves_only_its_chunk_to_spark():
    good = [b'{"I":%d,"S":"ok"}' % i for i in range(2 * CHUNK + 10)]
    values = good[:2 * CHUNK] + [None, b'{"I":"bad"}'] + good[2 * CHUNK:]
    decoded = _decode(values)
    assert decoded[:2 * CHUNK] == [{"I": i, "B": None, "D": None, "S": "ok", "F": None, "T": None} for i in range(2 * CHUNK)]
    assert decoded[2 * CHUNK:] == [None] * 12


def test_other_topics_and_null_values_are_not_decoded():
    plan = decode_plan(decode_option([("t", COLUMNS)], {}))
    [column] = decode_columns(pa.array(["t", "u", "t", None]), pa.array([b'{"I":1}', b'{"I":2}', None, b'{"I":3}']), plan.structs)
    assert [r and r["I"] for r in column.to_pylist()] == [1, None, None, None]


@pytest.mark.parametrize("columns, ok", [
    (COLUMNS, True), ([("T", "TIMESTAMP")], True), ([("T", "TIMESTAMP_NTZ")], False), ([("A", "ARRAY<INT>")], False), ([("M", "DECIMAL(10,2)")], False), ([], False),
])
def test_which_sources_the_reader_decodes(columns, ok):
    assert decodable(columns) is ok


CASES_OF_NAMES = [  # (value, what the reader hands on) for a topic "t" with columns B and cc
    (b'{"B": 1, "cc": 2}', b'{"B": 1, "cc": 2}'),  # exact names: untouched (not even parsed)
    (b'{"b": 1, "CC": 2}', b'{"B": 1, "cc": 2}'),  # other case: renamed
    (b'{"b": 1, "B": 3}', b'{"b": 1, "B": 3}'),  # the exact name is there: it wins, nothing to rename
    (b'{"b": 1, "B": 3, "CC": 4}', b'{"B": 3, "cc": 4}'),  # renamed, and the exact name wins
    (b'{"b": 1, "other": {"b": 2}}', b'{"B": 1, "other": {"b": 2}}'),  # a nested field is not a column
    (b'{"s": {"town": "x", "Deep": {"z": 1}}}', b'{"S": {"TOWN": "x", "DEEP": {"Z": 1}}}'),  # a STRUCT's fields too
    (b'["b"]', b'["b"]'),  # no object: left to the decoders' errors
    (b'{"b": oops', b'{"b": oops'),
    (None, None),
]


def test_field_names_match_columns_in_any_case():
    values = pa.array([v for v, _ in CASES_OF_NAMES] + [b'{"b": 1}'], pa.binary())
    topics = pa.array(["t"] * len(CASES_OF_NAMES) + ["u"])  # topic u has no JSON columns declared
    out = canonical_names(topics, values, {"t": {"B": None, "cc": None, "S": {"TOWN": None, "DEEP": {"Z": None}}}}).to_pylist()
    assert out == [w for _, w in CASES_OF_NAMES] + [b'{"b": 1}']
