"""ksqlDB's ``post`` checks (``conformance.post``) against catalogs built by hand: each row is a catalog source,
a ``post`` section, and the difference the check must report (None: it passes)."""
from __future__ import annotations

import pytest

from streamjoin.conformance.post import check_post, ksql_type, parse_schema
from streamjoin.plan.catalog import Catalog, ColumnInfo, SourceInfo

OUTPUT = SourceInfo(
    name="OUTPUT", kind="TABLE", topic="OUTPUT", key_format="JSON", value_format="JSON", created_by_query=True,
    columns=(ColumnInfo("ID", "bigint", "key"), ColumnInfo("L_V", "struct<`F1`:int,`f2`:array<decimal(4,2)>>"),
             ColumnInfo("r_v", "string")),
)
WINDOWED = SourceInfo(name="COUNTS", kind="TABLE", topic="COUNTS", columns=(ColumnInfo("K", "string", "key"), ColumnInfo("N", "bigint")),
                      window=("TUMBLING", 1000))
KEYLESS = SourceInfo(name="S", kind="STREAM", topic="S", columns=(ColumnInfo("V", "int"),))

SCHEMA = "ID BIGINT KEY, L_V STRUCT<F1 INT, `f2` ARRAY<DECIMAL(4, 2)>>, `r_v` VARCHAR"

CASES = [
    ({"sources": [{"name": "OUTPUT", "type": "table", "schema": SCHEMA}]}, None),
    ({"sources": [{"name": "OUTPUT", "type": "stream"}]}, "OUTPUT is a TABLE, expected a STREAM"),
    ({"sources": [{"name": "MISSING", "type": "table"}]}, "no source named MISSING"),
    ({"sources": [{"name": "OUTPUT", "type": "table", "schema": "ID BIGINT KEY, L_V STRING, `r_v` STRING"}]}, "OUTPUT's schema is"),
    ({"sources": [{"name": "OUTPUT", "type": "table", "schema": SCHEMA.replace("`r_v`", "r_v")}]}, "OUTPUT's schema is"),
    ({"sources": [{"name": "OUTPUT", "type": "table", "schema": "ID BIGINT, " + SCHEMA.split(", ", 1)[1]}]}, "OUTPUT's schema is"),
    ({"sources": [{"name": "OUTPUT", "type": "table", "keyFormat": {"format": "JSON"}, "valueFormat": "JSON"}]}, None),
    ({"sources": [{"name": "OUTPUT", "type": "table", "keyFormat": {"format": "KAFKA"}}]}, "key format is JSON, expected KAFKA"),
    ({"sources": [{"name": "OUTPUT", "type": "table", "valueFormat": "AVRO"}]}, "value format is JSON, expected AVRO"),
    ({"sources": [{"name": "OUTPUT", "type": "table", "keyFormat": {"format": "JSON", "windowType": "TUMBLING"}}]},
     "key window is none, expected TUMBLING"),
    ({"sources": [{"name": "COUNTS", "type": "table", "keyFormat": {"format": "KAFKA", "windowType": "TUMBLING", "windowSize": 1000}}]}, None),
    ({"sources": [{"name": "COUNTS", "type": "table", "keyFormat": {"format": "KAFKA"}}]}, "key window is TUMBLING, expected none"),
    ({"sources": [{"name": "COUNTS", "type": "table", "keyFormat": {"windowType": "TUMBLING", "windowSize": 2000}}]},
     "key window size is 1000, expected 2000"),
    ({"sources": [{"name": "S", "type": "stream", "keyFormat": {"format": "NONE"}, "schema": "V INT"}]}, None),
    ({"topics": {"blacklist": ".*-repartition"}}, None),
    ({"topics": {"blacklist": ".*PUT"}}, "topic OUTPUT exists, but matches the blacklist"),
]


@pytest.mark.parametrize("post,problem", CASES)
def test_post_checks(post, problem):
    catalog = Catalog()
    for source in (OUTPUT, WINDOWED, KEYLESS):
        catalog.add_source(source)
    found, _ = check_post(post, catalog, ["left", "OUTPUT"])
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found, found


def test_parts_that_cannot_be_checked_are_counted():
    catalog = Catalog()
    catalog.add_source(OUTPUT)
    post = {"sources": [{"name": "OUTPUT", "type": "table", "keyFeatures": ["UNWRAP_SINGLES"]}],
            "topics": {"topics": [{"name": "_confluent-ksql-x-Join-left-repartition"}]}}
    assert check_post(post, catalog, []) == (None, ("sources.keyFeatures", "topics.topics"))


@pytest.mark.parametrize("text,expected", [
    ("K INT KEY, V STRING", (("K", "INTEGER", "KEY"), ("V", "STRING", ""))),
    ("V STRING, K INT KEY", (("K", "INTEGER", "KEY"), ("V", "STRING", ""))),
    ("H ARRAY<STRUCT<KEY STRING, VALUE BYTES>> HEADERS, B BYTES HEADER('abc')",
     (("H", "ARRAY<STRUCT<`KEY` STRING, `VALUE` BYTES>>", "HEADERS"), ("B", "BYTES", "HEADER('abc')"))),
    ("`quoted Name` MAP<STRING, BIGINT>", (("quoted Name", "MAP<STRING, BIGINT>", ""),)),
    ("1r DECIMAL(33,16), T TIME", (("1R", "DECIMAL(33, 16)", ""), ("T", "TIME", ""))),  # a digit-led name
])
def test_schema_text(text, expected):
    assert parse_schema(text) == expected


@pytest.mark.parametrize("spark,ksql", [
    ("int", "INTEGER"), ("bigint", "BIGINT"), ("double", "DOUBLE"), ("binary", "BYTES"), ("decimal(10,2)", "DECIMAL(10, 2)"),
    ("map<string,array<int>>", "MAP<STRING, ARRAY<INTEGER>>"), ("struct<`a b`:timestamp>", "STRUCT<`a b` TIMESTAMP>"), ("time(3)", "TIME"),
])
def test_spark_types_in_ksql_names(spark, ksql):
    assert ksql_type(spark) == ksql
