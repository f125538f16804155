"""Decoding a ksqlDB JSON value in Spark (``lower.decode``): the value is parsed once per record, and a time's text
is not thrown through a failing integral cast. Both shapes once cost a ksqlDB stream with a TIMESTAMP column most
of its throughput (a SELECT * moved 11k records/s), with the same results."""
from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from streamjoin.connectors.embedded_source import SOURCE_SCHEMA
from streamjoin.lower import operator_table
from streamjoin.lower.decode import CALLED, PARSED, _whole_number, decode_scan
from streamjoin.plan.catalog import Catalog
from streamjoin.plan.nodes import Scan, walk
from streamjoin.plan.statements import StatementPlanner
from streamjoin.sql import parse_script

SCRIPT = """CREATE STREAM s (ID BIGINT KEY, N INT, AMOUNT DOUBLE, T TIMESTAMP, D DATE) WITH (kafka_topic='s', value_format='JSON');
CREATE STREAM o AS SELECT * FROM s;"""

VALUES = [  # (value, (N, AMOUNT, T as epoch ms, D as days)), or (value, None): dead-lettered
    (b'{"N": 1, "AMOUNT": 2.5, "T": "1970-01-01 00:00:01.000", "D": "1970-01-03"}', (1, 2.5, 1000, 2)),
    (b'{"N": "2", "AMOUNT": "3", "T": 2000, "D": 4}', (2, 3.0, 2000, 4)),
    (b'{"N": 3.9, "T": "3000", "D": "5"}', (3, None, 3000, 5)),
    (b'{"T": "1970-01-01 24:00:00.000"}', None),
    (b'{"D": "1970-13-01"}', None),
]

TEXTS = [" 12 ", "+12", "-12", "1.5", "12-", "1:2", "1e3", "2024-01-01", "2024-01-01 10:00", "\t7\n", "-", "0x10",
         "9223372036854775808", "12.5-", "", None]


def _scan():
    planner = StatementPlanner(Catalog(), operators=operator_table)
    query = [planner.plan(item) for item in parse_script(SCRIPT)][-1].query
    return next(n for n in walk(query.plan) if isinstance(n, Scan))


def _records(spark):
    rows = [("s", 0, i, 1, i, b"%d" % i, value, None, None, None, None) for i, (value, _) in enumerate(VALUES)]
    return spark.createDataFrame(rows, SOURCE_SCHEMA)


def test_a_ksql_json_value_is_parsed_once_per_record(spark):
    decoded = decode_scan(_records(spark), _scan())
    plan = decoded._jdf.queryExecution().executedPlan().toString()
    assert plan.count("from_json(") == 1, plan
    assert CALLED in plan and PARSED in plan


def test_its_columns_are_read_as_ksqldb_reads_them(spark):
    scan = _scan()
    ids = [f.id for f in scan.fields if not f.hidden][1:5]
    rows = decode_scan(_records(spark), scan).select(
        "_seq", *[F.col(i) for i in ids[:2]], F.unix_millis(F.col(ids[2])), F.unix_date(F.col(ids[3]))).collect()
    got = {r[0]: tuple(r[1:]) for r in rows}
    assert got == {i: want for i, (_, want) in enumerate(VALUES) if want is not None}


@pytest.mark.parametrize("type_", ["bigint", "int"])
def test_a_whole_number_guard_passes_every_text_the_cast_reads(spark, type_):
    df = spark.createDataFrame([(t,) for t in TEXTS], "t string")
    rows = df.select("t", F.col("t").try_cast(type_).alias("cast"), _whole_number(F.col("t"), type_).alias("guarded")).collect()
    assert [(r.t, r.guarded) for r in rows] == [(r.t, r.cast) for r in rows]
