"""Output column names of SELECT, by each dialect's naming rule (ksqlDB: its AstSanitizer and ColumnNames;
Flink: Calcite's EXPR$n). No Spark needed."""
from __future__ import annotations

import pytest

from streamjoin.conformance.post import effective_key_format, parse_schema, source_schema
from streamjoin.plan.binder import GeneratedNames
from streamjoin.plan.catalog import Catalog
from streamjoin.plan.statements import StatementPlanner
from streamjoin.sql import parse_script

SOURCES = """
CREATE STREAM L (ID INT KEY, NAME STRING, V INT, S STRUCT<F INT, G STRING>) WITH (kafka_topic='l', value_format='JSON');
CREATE STREAM R (ID INT KEY, NAME STRING, W INT, KSQL_COL_0 INT) WITH (kafka_topic='r', value_format='JSON');
CREATE TABLE T (ID INT PRIMARY KEY, LABEL STRING) WITH (kafka_topic='t', value_format='JSON');
CREATE TABLE Orders (id STRING, amount INT) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
"""

# (what, query, output columns; the key column first where the query keys its output)
NAMES = [
    ("qualified columns of both sources", "SELECT L.ID, L.NAME, R.NAME, W FROM L JOIN R WITHIN 1 MINUTE ON L.ID = R.ID",
     ["L_ID", "L_NAME", "R_NAME", "W"]),
    ("unqualified column of one source keeps its name", "SELECT L.ID AS ID, V, W FROM L JOIN R WITHIN 1 MINUTE ON L.ID = R.ID",
     ["ID", "V", "W"]),
    ("alias.* in a join", "SELECT A.*, B.LABEL FROM L A JOIN T B ON A.ID = B.ID",
     ["A_ID", "A_NAME", "A_V", "A_S", "LABEL"]),
    ("* over a join", "SELECT * FROM L JOIN T ON L.ID = T.ID",
     ["L_ID", "L_NAME", "L_V", "L_S", "T_ID", "T_LABEL"]),
    ("qualified ROWTIME in a join", "SELECT L.ID AS ID, L.ROWTIME, T.LABEL FROM L JOIN T ON L.ID = T.ID",
     ["ID", "L_ROWTIME", "LABEL"]),
    ("alias.* without a join", "SELECT A.* FROM L A", ["ID", "NAME", "V", "S"]),
    ("SELECT STREAM keeps bare names", "SELECT STREAM L.ID, L.NAME, T.LABEL FROM L JOIN T ON L.ID = T.ID",
     ["ID", "NAME", "LABEL"]),
    ("generated names count generated columns only", "SELECT ID, V + 1, NAME, UCASE(NAME) FROM L",
     ["ID", "KSQL_COL_0", "NAME", "KSQL_COL_1"]),
    ("a generated name an input column uses is skipped",
     "SELECT L.ID AS ID, V + 1, W * 2 FROM L JOIN R WITHIN 1 MINUTE ON L.ID = R.ID", ["ID", "KSQL_COL_1", "KSQL_COL_2"]),
    ("a struct field is named after the field", "SELECT ID, S->F, S->G, S->F + 1 FROM L", ["ID", "F", "G", "KSQL_COL_0"]),
    ("Flink names unaliased expressions by position", "SELECT id, amount * 2, UPPER(id) FROM Orders",
     ["id", "EXPR$1", "EXPR$2"]),
]


@pytest.mark.parametrize("what,query,expected", NAMES, ids=[n[0] for n in NAMES])
def test_output_names(what, query, expected):
    planner = StatementPlanner(Catalog())
    planned = [planner.plan(item) for item in parse_script(SOURCES + f"CREATE STREAM OUT AS {query};")]
    fields = planned[-1].query.plan.fields
    assert [f.name for f in fields if not f.hidden] == expected


def test_generated_names_skip_numbers_in_use():
    names = GeneratedNames(["KSQL_COL_0", "KSQL_COL_2", "F", "F_1"])
    assert [names.next("KSQL_COL") for _ in range(3)] == ["KSQL_COL_1", "KSQL_COL_3", "KSQL_COL_4"]
    assert [names.next("F"), names.next("G"), names.next("G")] == ["F_2", "G", "G_1"]


# (what, query, the record key's column, the value's columns): which projected column stands for the join
# key (ksqlDB's viable key columns, LogicalPlanner.buildJoinKey) and which stay in the value
KEYS = [
    ("the left-most input's ON column is the key, though another is projected first",
     "SELECT R.*, L.NAME, L.ID FROM L JOIN R WITHIN 1 MINUTE ON R.ID = L.ID",
     "L_ID", ["R_ID", "R_NAME", "R_W", "R_KSQL_COL_0", "L_NAME"]),
    ("a column an earlier join made equal to the key stands for it",
     "SELECT T.ID, L.V, R.W FROM L JOIN T ON L.ID = T.ID JOIN R WITHIN 1 MINUTE ON L.ID = R.ID",
     "T_ID", ["V", "W"]),
    ("a column an earlier join made equal to the same ON expression stands for the key",
     "SELECT L.ID, L.V, R.W FROM L JOIN R WITHIN 1 MINUTE ON L.ID = ABS(R.W) JOIN T ON ABS(R.W) = T.ID",
     "L_ID", ["V", "W"]),
    ("* over a FULL join: its key is a column of its own, every ON column stays in the value",
     "SELECT * FROM L FULL OUTER JOIN R WITHIN 1 MINUTE ON L.ID = R.ID",
     "ROWKEY", ["L_ID", "L_NAME", "L_V", "L_S", "R_ID", "R_NAME", "R_W", "R_KSQL_COL_0"]),
    ("a FULL join's projected ON column is its key (the seeds' KSQL)",
     "SELECT L.ID AS ID, L.V AS LV, R.W AS RW FROM L FULL OUTER JOIN R WITHIN 1 MINUTE ON L.ID = R.ID",
     "ID", ["LV", "RW"]),
]


@pytest.mark.parametrize("what,query,key,value", KEYS, ids=[k[0] for k in KEYS])
def test_which_column_is_the_key(what, query, key, value):
    planner = StatementPlanner(Catalog())
    sink = [planner.plan(item) for item in parse_script(SOURCES + f"CREATE STREAM OUT AS {query};")][-1].query.plan
    assert [sink.input.field(k).name for k in sink.key] == [key]
    assert [sink.input.field(f).name for f in sink.value_fields] == value


KEYLESS = "CREATE STREAM N (ID INT, V INT) WITH (kafka_topic='n', key_format='NONE', value_format='JSON');\n"

# (what, statements after SOURCES, the sink OUT's schema as ksqlDB's metastore would list it, its key format):
# key columns first in the key's order, then values; unaliased expressions and aggregates by the dialect's rule;
# types from the expressions (an aggregate's from its function and argument)
SINKS = [
    ("GROUP BY orders the key; an unaliased COUNT is a generated name",
     "CREATE TABLE OUT WITH (KEY_FORMAT='JSON') AS SELECT NAME, V, COUNT(*) FROM L GROUP BY V, NAME;",
     "V INT KEY, NAME STRING KEY, KSQL_COL_0 BIGINT", "JSON"),
    ("a grouped expression and an aggregate are numbered together, typed by their functions",
     "CREATE TABLE OUT AS SELECT LEN(NAME), SUM(V) FROM L GROUP BY LEN(NAME);",
     "KSQL_COL_0 INT KEY, KSQL_COL_1 INT", "KAFKA"),
    ("aggregate types", "CREATE TABLE OUT AS SELECT ID, SUM(V) AS S, AVG(V) AS A, COLLECT_LIST(V) AS C, COUNT(V) AS N, "
     "MAX(V) AS M FROM L GROUP BY ID;", "ID INT KEY, S INT, A DOUBLE, C ARRAY<INT>, N BIGINT, M INT", "KAFKA"),
    ("Flink names an unaliased aggregate by position; its AVG of an INT is an INT",
     "CREATE TABLE OUT AS SELECT id, COUNT(*), AVG(amount) FROM Orders GROUP BY id;",
     "`id` STRING, `EXPR$1` BIGINT, `EXPR$2` INT", None),
    ("a PARTITION BY expression projected under an alias is the key",
     "CREATE STREAM OUT AS SELECT S->G AS K, ID, V FROM L PARTITION BY S->G;", "K STRING KEY, ID INT, V INT", "KAFKA"),
    ("* under PARTITION BY: the new key, the input's values, then its old key", "CREATE STREAM OUT AS SELECT * FROM L "
     "PARTITION BY NAME;", "NAME STRING KEY, V INT, S STRUCT<F INT, G STRING>, ID INT", "KAFKA"),
    ("* under PARTITION BY an expression: a generated key name", "CREATE STREAM OUT AS SELECT * FROM L PARTITION BY "
     "ABS(V);", "KSQL_COL_0 INT KEY, NAME STRING, V INT, S STRUCT<F INT, G STRING>, ID INT", "KAFKA"),
    ("a join on expressions keys by their type", "CREATE STREAM OUT AS SELECT ROWKEY AS A, L.V FROM L JOIN R "
     "WITHIN 1 MINUTE ON ABS(L.ID) = ABS(R.ID);", "A INT KEY, V INT", "KAFKA"),
    ("* over a join on expressions only: ksqlDB's synthetic ROWKEY, typed by them, is the key",
     "CREATE STREAM OUT AS SELECT * FROM L JOIN R WITHIN 1 MINUTE ON L.S->F = ABS(R.W);",
     "ROWKEY INT KEY, L_ID INT, L_NAME STRING, L_V INT, L_S STRUCT<F INT, G STRING>, R_ID INT, R_NAME STRING, R_W INT, "
     "R_KSQL_COL_0 INT", "KAFKA"),
    ("a keyed result over a NONE key gets the default key format",
     KEYLESS + "CREATE STREAM OUT AS SELECT N.ID, T.LABEL FROM N JOIN T ON N.ID = T.ID;", "N_ID INT KEY, LABEL STRING", "KAFKA"),
    ("ksql.persistence.default.format.key names that default", KEYLESS + "SET 'ksql.persistence.default.format.key' = "
     "'DELIMITED';\nCREATE STREAM OUT AS SELECT N.ID, T.LABEL FROM N JOIN T ON N.ID = T.ID;", "N_ID INT KEY, LABEL STRING",
     "DELIMITED"),
    ("a keyless result keeps NONE", KEYLESS + "CREATE STREAM OUT AS SELECT ID, V FROM N;", "ID INT, V INT", "NONE"),
]


@pytest.mark.parametrize("what,statements,schema,key_format", SINKS, ids=[s[0] for s in SINKS])
def test_sink_schemas(what, statements, schema, key_format):
    planner = StatementPlanner(Catalog())
    for item in parse_script(SOURCES + statements):
        planner.plan(item)
    sink = planner.catalog.source("OUT")
    assert source_schema(sink) == parse_schema(schema)
    if key_format is not None:
        assert effective_key_format(sink) == key_format
