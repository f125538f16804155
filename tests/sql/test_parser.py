"""Parser tests, as data: statements and expressions with the tree (or a property of the tree) they parse
to, scripts with a property of their statements, bad inputs with where they fail, and every statement of
the conformance seed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamjoin.errors import StreamjoinError
from streamjoin.sql import SqlSyntaxError, parse_expression, parse_script, parse_statement, read_script
from streamjoin.sql.ast import (
    ArrayLiteral, Between, MapLiteral, StructLiteral, BinaryOp, Call, Case, Cast, Column, ColumnDef, CreateAsSelect, CreateSource,
    CreateTemporalTableFunction, CreateView, Describe, Drop, Explain, FrameBound, Ident, InList, InsertInto,
    Interval, IsNull, Join, Lambda, Lateral, LateralTable, Like, Literal, Pos, Property, QueryStatement, Relation,
    Select, SelectItem, SetProperty, Star, Subscript, TimeUnit, TypeName, UnaryOp, Watermark, Within,
    WindowSpec,
)

SEED = Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / "seed"


def I(text: str, quoted: bool = False) -> Ident:
    return Ident(text, quoted)


def col(name: str) -> Column:
    """``col('a')`` or ``col('q.a')``."""
    *qualifier, last = name.split(".")
    return Column(I(last), I(qualifier[0]) if qualifier else None)


def lit(value) -> Literal:
    kind = {bool: "boolean", int: "integer", str: "string", type(None): "null"}[type(value)]
    return Literal(value, kind)


def rel(name: str, alias: str | None = None, **kw) -> Relation:
    return Relation(I(name), I(alias) if alias else None, **kw)


def select(*items, from_, **kw) -> Select:
    return Select(tuple(i if isinstance(i, SelectItem) else SelectItem(i) for i in items), from_, **kw)


def query(*items, from_, **kw) -> QueryStatement:
    return QueryStatement(select(*items, from_=from_, **kw))


def T(name: str, *params: int, **kw) -> TypeName:
    return TypeName(name, params, **kw)


def joined(sql_from: str) -> Join:
    """The FROM item of ``SELECT * FROM <sql_from>``."""
    return parse_statement(f"SELECT * FROM {sql_from}").query.from_


STAR = SelectItem(Star())
CURRENT = FrameBound("CURRENT ROW")
MINUTE = 60_000
HOUR = 3_600_000

# (statement text, expected tree or predicate on the tree)
STATEMENTS = [
    # ---- KSQL DDL
    ("CREATE STREAM L (ID INT KEY, V STRING) WITH (kafka_topic='left', value_format='JSON')",
     CreateSource("STREAM", I("L"), (ColumnDef(I("ID"), T("INT"), key=True), ColumnDef(I("V"), T("STRING"))),
                  (Property("kafka_topic", "left"), Property("value_format", "JSON")))),
    ("create or replace table if not exists R (ID INT PRIMARY KEY) with (KAFKA_TOPIC='r', partitions=6, "
     "wrap_single_value=false, key='ID')",
     CreateSource("TABLE", I("R"), (ColumnDef(I("ID"), T("INT"), primary_key=True),),
                  (Property("KAFKA_TOPIC", "r"), Property("partitions", 6), Property("wrap_single_value", False),
                   Property("key", "ID")),
                  or_replace=True, if_not_exists=True)),
    ("CREATE STREAM s WITH (kafka_topic='s', value_format='AVRO')",
     lambda s: s.columns == () and s.style == "ksql"),
    ("CREATE STREAM s (key STRING KEY, timestamp BIGINT, time TIME, date DATE, zone INT, hour INT, value STRING) "
     "WITH (kafka_topic='s', timestamp='timestamp', timestamp_format='yyyy-MM-dd')",
     lambda s: [c.name.text for c in s.columns] == ["key", "timestamp", "time", "date", "zone", "hour", "value"]
     and s.columns[0].key and s.properties[1] == Property("timestamp", "timestamp")),
    ("CREATE TABLE t (a VARCHAR(8), b VARCHAR, c CHAR(2), d DECIMAL(10, 4), e TIMESTAMP(3), f TIMESTAMP_LTZ(3), "
     "g TIMESTAMP(3) WITH LOCAL TIME ZONE, h ARRAY<ARRAY<INT>>, i MAP<STRING, BIGINT>, j STRUCT<x INT, key STRING>, "
     "k integer, l Double, m BYTES) WITH (kafka_topic='t')",
     lambda s: [c.type for c in s.columns] == [
         T("VARCHAR", 8), T("VARCHAR"), T("CHAR", 2), T("DECIMAL", 10, 4), T("TIMESTAMP", 3), T("TIMESTAMP_LTZ", 3),
         T("TIMESTAMP_LTZ", 3), T("ARRAY", args=(T("ARRAY", args=(T("INT"),)),)),
         T("MAP", args=(T("STRING"), T("BIGINT"))), T("STRUCT", fields=(("x", T("INT")), ("key", T("STRING")))),
         T("INTEGER"), T("DOUBLE"), T("BYTES")]),
    ("CREATE STREAM s (k VARCHAR(STRING) KEY, v VARCHAR(string)) WITH (kafka_topic='s')",  # ksqlDB's typeParameter
     lambda s: [c.type for c in s.columns] == [T("VARCHAR"), T("VARCHAR")]),
    # ---- Flink DDL
    ("CREATE TABLE orders (order_id STRING, order_time TIMESTAMP(3), WATERMARK FOR order_time AS order_time) "
     "WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json')",
     CreateSource("TABLE", I("orders"), (ColumnDef(I("order_id"), T("STRING")),
                                         ColumnDef(I("order_time"), T("TIMESTAMP", 3))),
                  (Property("connector", "kafka"), Property("topic", "orders"), Property("format", "json")),
                  watermark=Watermark(I("order_time"), col("order_time")), style="flink", dialect="flink")),
    ("CREATE TABLE p (id STRING, ts TIMESTAMP(3), pt AS PROCTIME(), PRIMARY KEY (id, ts) NOT ENFORCED, "
     "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('key.format' = 'json')",
     lambda s: s.style == "flink" and s.primary_key == (I("id"), I("ts"))
     and s.columns[2] == ColumnDef(I("pt"), None, computed=Call("PROCTIME"))
     and s.watermark.expr == BinaryOp("-", col("ts"), Interval(5000))),
    ("CREATE TABLE q (id STRING) WITH (connector='kafka')", lambda s: s.style == "flink"),
    ("CREATE TABLE q (id STRING PRIMARY KEY NOT ENFORCED) WITH ('connector'='upsert-kafka')",
     lambda s: s.columns[0].primary_key and s.primary_key == ()),
    ("CREATE TEMPORAL TABLE FUNCTION Rates ON RatesHistory (rowtime) KEY (currency)",
     CreateTemporalTableFunction(I("Rates"), I("RatesHistory"), I("rowtime"), I("currency"))),
    # ---- CREATE ... AS SELECT, INSERT, views
    ("CREATE STREAM products_rekeyed WITH (PARTITIONS=6) AS SELECT * FROM products PARTITION BY product_id",
     CreateAsSelect("STREAM", I("products_rekeyed"),
                    select(STAR, from_=rel("products"), partition_by=(col("product_id"),)),
                    (Property("PARTITIONS", 6),))),
    ("CREATE OR REPLACE TABLE t AS SELECT a, COUNT(*) AS n FROM s GROUP BY a EMIT CHANGES",
     CreateAsSelect("TABLE", I("t"),
                    select(col("a"), SelectItem(Call("COUNT", star=True), I("n")), from_=rel("s"),
                           group_by=(col("a"),), emit="CHANGES"),
                    or_replace=True)),
    ("INSERT INTO result SELECT STREAM c.name, o.item FROM orders o LEFT JOIN customers c ON c.id = o.cid",
     InsertInto(I("result"), select(col("c.name"), col("o.item"), result_kind="STREAM", from_=Join(
         rel("orders", "o"), rel("customers", "c"), "LEFT", on=BinaryOp("=", col("c.id"), col("o.cid")))))),
    ("WITH customersTable AS (SELECT TABLE * FROM customers)",
     CreateView(I("customersTable"), select(STAR, from_=rel("customers"), result_kind="TABLE"))),
    # ---- other statements
    ("SET 'auto.offset.reset' = 'earliest'", SetProperty("auto.offset.reset", "earliest")),
    ("SET table.exec.state.ttl = '1 h'", SetProperty("table.exec.state.ttl", "1 h")),
    ("SET parallelism = 4", SetProperty("parallelism", "4")),
    ("EXPLAIN SELECT a FROM t", Explain(query(col("a"), from_=rel("t")))),
    ("DESCRIBE orders", Describe(I("orders"))),
    ("describe extended orders", Describe(I("orders"), extended=True)),
    ("DROP TABLE IF EXISTS t DELETE TOPIC", Drop("TABLE", I("t"), if_exists=True, delete_topic=True)),
    ("DROP STREAM s", Drop("STREAM", I("s"))),
    # ---- SELECT clauses
    ("SELECT * FROM t", query(STAR, from_=rel("t"))),
    ("select q.*, a x, b AS y, rowtime, `Zone`, \"Mixed\" FROM t AS q EMIT FINAL",
     query(SelectItem(Star(I("q"))), SelectItem(col("a"), I("x")), SelectItem(col("b"), I("y")), col("rowtime"),
           Column(I("Zone", quoted=True)), Column(I("Mixed", quoted=True)), from_=rel("t", "q"), emit="FINAL")),
    ("SELECT a FROM t WHERE b > 1 GROUP BY a, c HAVING COUNT(*) > 2 PARTITION BY a",
     query(col("a"), from_=rel("t"), where=BinaryOp(">", col("b"), lit(1)), group_by=(col("a"), col("c")),
           having=BinaryOp(">", Call("COUNT", star=True), lit(2)), partition_by=(col("a"),))),
    # ksqlDB's parenthesised lists: GROUP BY (a, b) groups by a and b; (a + 1) alone stays an expression
    ("SELECT a, COUNT(*) FROM t GROUP BY (c, a) PARTITION BY (a, c)",
     query(col("a"), Call("COUNT", star=True), from_=rel("t"), group_by=(col("c"), col("a")),
           partition_by=(col("a"), col("c")))),
    ("SELECT a FROM t GROUP BY (a + 1)", query(col("a"), from_=rel("t"), group_by=(BinaryOp("+", col("a"), lit(1)),))),
    ("SELECT key, value, timestamp, time, date, zone, name, hour, minute, _key FROM t WHERE hour = 1",
     lambda s: [i.expr.name.text for i in s.query.items] ==
     ["key", "value", "timestamp", "time", "date", "zone", "name", "hour", "minute", "_key"]),
    # ---- FROM: joins
    ("SELECT * FROM L INNER JOIN R WITHIN 1 HOUR ON L.ID = R.ID",
     query(STAR, from_=Join(rel("L"), rel("R"), "INNER", on=BinaryOp("=", col("L.ID"), col("R.ID")),
                            within=Within(HOUR, HOUR)))),
    ("SELECT * FROM o FULL OUTER JOIN s WITHIN 2 HOURS GRACE PERIOD 0 SECONDS ON s.id = o.id",
     lambda s: s.query.from_.kind == "FULL" and s.query.from_.within == Within(2 * HOUR, 2 * HOUR, 0)),
    ("SELECT * FROM o LEFT JOIN c WITHIN 5s ON c.id = o.id",
     lambda s: s.query.from_.within == Within(5000, 5000)),
    ("SELECT * FROM o JOIN c WITHIN (100ms, 10m) GRACE PERIOD 1h ON c.id = o.id",
     lambda s: s.query.from_.within == Within(100, 10 * MINUTE, HOUR)),
    ("SELECT * FROM o JOIN c WITHIN (1 DAY, 2d) ON c.id = o.id",
     lambda s: s.query.from_.within == Within(86_400_000, 172_800_000)),
    ("SELECT * FROM customers JOIN accounts", query(STAR, from_=Join(rel("customers"), rel("accounts"), "INNER"))),
    ("SELECT * FROM e JOIN a USING (animal_id, zone)",
     query(STAR, from_=Join(rel("e"), rel("a"), "INNER", using=(I("animal_id"), I("zone"))))),
    ("SELECT * FROM a RIGHT OUTER JOIN b ON x", lambda s: s.query.from_.kind == "RIGHT"),
    ("SELECT * FROM a OUTER JOIN b ON x", lambda s: s.query.from_.kind == "FULL"),
    ("SELECT * FROM a FULL JOIN b ON x", lambda s: s.query.from_.kind == "FULL"),
    ("SELECT * FROM a CROSS JOIN b", query(STAR, from_=Join(rel("a"), rel("b"), "CROSS"))),
    ("SELECT * FROM a NATURAL JOIN b", query(STAR, from_=Join(rel("a"), rel("b"), "INNER", natural=True))),
    ("SELECT * FROM a NATURAL LEFT OUTER JOIN b",
     query(STAR, from_=Join(rel("a"), rel("b"), "LEFT", natural=True))),
    ("SELECT * FROM a, b WHERE a.x = b.x",
     query(STAR, from_=Join(rel("a"), rel("b"), "COMMA"), where=BinaryOp("=", col("a.x"), col("b.x")))),
    ("SELECT * FROM a JOIN b ON a.k = b.k LEFT JOIN c ON c.k = b.k",
     lambda s: s.query.from_.left == joined("a JOIN b ON a.k = b.k") and s.query.from_.right == rel("c")),
    ("SELECT * FROM Orders AS o JOIN LatestRates FOR SYSTEM_TIME AS OF o.proctime AS r ON r.c = o.c",
     lambda s: s.query.from_.right == rel("LatestRates", "r", system_time=col("o.proctime"))),
    ("SELECT * FROM Orders AS o, LATERAL TABLE (Rates(o.rowtime)) AS r",
     query(STAR, from_=Join(rel("Orders", "o"), LateralTable(Call("RATES", (col("o.rowtime"),)), I("r")),
                            "COMMA"))),
    ("SELECT * FROM t, LATERAL TABLE(split(t.s)) AS x (word, len)",
     lambda s: s.query.from_.right.column_aliases == (I("word"), I("len"))),
    # ---- FROM: Lenses LATERAL
    ("SELECT STREAM meter_id, reading FROM batched_readings LATERAL readings AS reading WHERE reading > 90",
     lambda s: s.query.from_ == Lateral(rel("batched_readings"), col("readings"), I("reading"))),
    ("SELECT * FROM b LATERAL nested AS readings LATERAL readings AS reading",
     lambda s: s.query.from_ == Lateral(Lateral(rel("b"), col("nested"), I("readings")), col("readings"),
                                        I("reading"))),
    ("SELECT * FROM d LATERAL flatten([readings_day, readings_night]) AS reading",
     lambda s: s.query.from_.expr == Call("FLATTEN", (ArrayLiteral((col("readings_day"), col("readings_night"))),))),
    # ---- FROM: OVER windows
    ("SELECT STREAM ROWTIME FROM oq OVER (RANGE INTERVAL '1' MINUTE PRECEDING) AS q",
     lambda s: s.query.from_ == rel("oq", "q", window=WindowSpec("RANGE", FrameBound("PRECEDING", MINUTE), CURRENT))),
    ("SELECT * FROM s AS q OVER (RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND INTERVAL '2' MINUTES FOLLOWING)",
     lambda s: s.query.from_.window == WindowSpec("RANGE", FrameBound("PRECEDING", HOUR),
                                                  FrameBound("FOLLOWING", 2 * MINUTE))),
    ("SELECT * FROM s OVER (RANGE UNBOUNDED PRECEDING)",
     lambda s: s.query.from_.window == WindowSpec("RANGE", FrameBound("UNBOUNDED PRECEDING"), CURRENT)),
    ("SELECT * FROM s OVER (ROWS 5 PRECEDING)",
     lambda s: s.query.from_.window == WindowSpec("ROWS", FrameBound("PRECEDING", 5), CURRENT)),
    ("SELECT * FROM s OVER (ROWS BETWEEN 5 PRECEDING AND CURRENT ROW) AS x",
     lambda s: s.query.from_.window == WindowSpec("ROWS", FrameBound("PRECEDING", 5), CURRENT)),
    ("SELECT * FROM cs OVER (ORDER BY FLOOR(ROWTIME TO HOUR) RANGE CURRENT ROW) AS c RIGHT OUTER JOIN ci USING (city)",
     lambda s: s.query.from_.left.window == WindowSpec(
         "RANGE", CURRENT, CURRENT, order_by=Call("FLOOR", (col("ROWTIME"), TimeUnit("HOUR"))))),
    ("SELECT * FROM s OVER (PARTITION BY a, b ORDER BY ts RANGE 10 SECONDS PRECEDING)",
     lambda s: s.query.from_.window == WindowSpec("RANGE", FrameBound("PRECEDING", 10_000), CURRENT,
                                                  order_by=col("ts"), partition_by=(col("a"), col("b")))),
    ("SELECT * FROM s OVER w AS x WINDOW w AS (RANGE INTERVAL '1' MINUTE PRECEDING)",
     lambda s: s.query.from_.window_name == I("w") and s.query.windows == (
         (I("w"), WindowSpec("RANGE", FrameBound("PRECEDING", MINUTE), CURRENT)),)),
    ("SELECT * FROM s AS x OVER (w RANGE CURRENT ROW) WHERE a = 1 GROUP BY a WINDOW w AS (ROWS 2 PRECEDING)",
     lambda s: s.query.from_.window.base == I("w") and s.query.windows[0][0] == I("w")),
    # ---- SQLstream's own statements
    ("CREATE OR REPLACE STREAM beast_events (row_id integer not null, zone integer) DESCRIPTION 'events'",
     lambda s: s.dialect == "sqlstream" and s.properties == () and s.description == "events"
     and s.columns[0].not_null and not s.columns[1].not_null),
    ("CREATE TABLE animal_data (animal_id int not null primary key, name varchar(32) not null)",
     lambda s: s.dialect == "sqlstream" and s.kind == "TABLE" and s.columns[0].primary_key and s.columns[0].not_null),
    ("CREATE STREAM stocks.order_quantity (ticker VARCHAR(8))",
     lambda s: s.name == Ident("order_quantity", schema=I("stocks"))),
    ("SELECT STREAM * FROM stocks.prices AS p", lambda s: s.query.from_.name == Ident("prices", schema=I("stocks"))),
    ("CREATE OR REPLACE PUMP stocks.p STOPPED AS INSERT INTO out (a, b) SELECT STREAM x, y FROM s",
     lambda s: s.stopped and s.name.schema == I("stocks") and s.insert.columns == ((I("a"),), (I("b"),))),
    ("ALTER PUMP stocks.p, q, zoo.* START",
     lambda s: s.action == "START" and [n.text for n in s.names] == ["p", "q"] and s.schemas == (I("zoo"),)),
    ("CREATE VIEW v (a, b) DESCRIPTION 'd' AS SELECT STREAM x, y FROM s", lambda s: s.columns == (I("a"), I("b"))),
    ("SET SCHEMA 'stocks'", lambda s: s.name == I("stocks")),
    ("CREATE FOREIGN STREAM f (a INT) SERVER KAFKA10_SERVER OPTIONS (\"TOPIC\" 't', \"PARSER\" 'CSV')",
     lambda s: s.dialect == "sqlstream" and ("topic", "t") in [(p.name, p.value) for p in s.properties]
     and ("value_format", "DELIMITED") in [(p.name, p.value) for p in s.properties]),
    ("INSERT INTO t (ROWTIME, a) VALUES (CAST('2019-03-30 05:03:30.000' AS TIMESTAMP), -1), (0, NULL)",
     lambda s: len(s.rows) == 2 and s.rows[1] == (lit(0), lit(None)) and s.columns[0] == (I("ROWTIME"),)),
    # ---- Lenses' own statements
    ("CREATE TABLE car_speed_events(_key.plate string, speedMph int, sensor.id string) FORMAT(json, avro) "
     "PROPERTIES(partitions=3, compacted=true)",
     lambda s: s.dialect == "lenses" and s.formats == ("json", "avro") and s.columns[0].path == ("_key", "plate")
     and Property("partitions", 3) in s.properties),
    ("INSERT INTO target STORE KEY AS STRING VALUE AS AVRO SELECT STREAM a AS _key FROM source",
     lambda s: (s.key_format, s.value_format) == ("STRING", "AVRO")),
    ("INSERT INTO daily-item-stats SELECT STREAM itemId FROM purchases-2",
     lambda s: s.target == I("daily-item-stats", True) and s.query.from_.name == I("purchases-2", True)),
    ("SELECT STREAM c.name FROM customers c LEFT JOIN orders o ON c.id = o.cid WITHIN 5s",
     lambda s: s.query.from_.within.before_ms == 5000 and s.query.from_.on is not None),
    ("SELECT STREAM customers.name FROM customers LEFT JOIN orders WITHIN 5s ON customers.id = orders.cid WITHIN 5s",
     lambda s: (s.query.from_.within.before_ms, s.query.from_.within.after_ms) == (5000, 5000)),
    ("SELECT STREAM itemId, COUNT(*) AS n FROM purchases WINDOW BY TUMBLE 1d GROUP BY itemId",
     lambda s: s.query.time_window.kind == "TUMBLING" and s.query.time_window.size_ms == 86_400_000),
    ("SELECT STREAM itemId, COUNT(*) AS n FROM purchases WHERE n > 1 WINDOW BY HOP 5m,1m GRACE BY 10s GROUP BY itemId",
     lambda s: (s.query.time_window.kind, s.query.time_window.size_ms, s.query.time_window.advance_ms,
                s.query.time_window.grace_ms) == ("HOPPING", 300_000, 60_000, 10_000) and s.query.where is not None),
    ("SELECT STREAM u, COUNT(*) AS n FROM visits WINDOW BY SESSION 30s GROUP BY u",
     lambda s: (s.query.time_window.kind, s.query.time_window.size_ms) == ("SESSION", 30_000)),
    ("SELECT STREAM * FROM games AS g EVENTTIME BY g.startedAt JOIN p EVENTTIME BY at ON g.id = p.id WITHIN 1m",
     lambda s: s.query.from_.left.event_time == col("g.startedAt") and s.query.from_.right.event_time == col("at")),
]

# (expression text, expected tree or predicate on it)
EXPRESSIONS = [
    ("TRANSFORM(a, (x) => x + 1)", Call("TRANSFORM", (col("a"), Lambda(("X",), BinaryOp("+", col("x"), lit(1)))))),
    ("CONCAT((a), (b))", Call("CONCAT", (col("a"), col("b")))),
    ("a + b * c", BinaryOp("+", col("a"), BinaryOp("*", col("b"), col("c")))),
    ("(a + b) * c % 2", BinaryOp("%", BinaryOp("*", BinaryOp("+", col("a"), col("b")), col("c")), lit(2))),
    ("a - b - c", BinaryOp("-", BinaryOp("-", col("a"), col("b")), col("c"))),
    ("a || b + 1", BinaryOp("||", col("a"), BinaryOp("+", col("b"), lit(1)))),
    ("NOT a = 1 OR b AND c", BinaryOp("OR", UnaryOp("NOT", BinaryOp("=", col("a"), lit(1))),
                                      BinaryOp("AND", col("b"), col("c")))),
    ("a != b", BinaryOp("<>", col("a"), col("b"))),
    ("a <= b", BinaryOp("<=", col("a"), col("b"))),
    ("-a * 2", BinaryOp("*", UnaryOp("-", col("a")), lit(2))),
    ("x IS NULL", IsNull(col("x"))),
    ("x IS NOT NULL", IsNull(col("x"), negated=True)),
    ("t BETWEEN s - INTERVAL '4' HOUR AND s AND b",
     BinaryOp("AND", Between(col("t"), BinaryOp("-", col("s"), Interval(4 * HOUR)), col("s")), col("b"))),
    ("x NOT BETWEEN 1 AND 2", Between(col("x"), lit(1), lit(2), negated=True)),
    ("x IN (1, 2)", InList(col("x"), (lit(1), lit(2)))),
    ("x NOT IN ('a')", InList(col("x"), (lit("a"),), negated=True)),
    ("x LIKE 'a%'", Like(col("x"), lit("a%"))),
    ("x NOT LIKE 'a%'", Like(col("x"), lit("a%"), negated=True)),
    ("x LIKE p ESCAPE '!'", Like(col("x"), col("p"), escape="!")),
    ("'it''s'", lit("it's")),
    ("1.5", Literal("1.5", "decimal")),
    ("2e3", Literal("2e3", "decimal")),
    ("2E3x + 1R", BinaryOp("+", col("2E3x"), col("1R"))),  # ksqlDB's digit-led identifiers
    ("TRUE AND false OR NULL", BinaryOp("OR", BinaryOp("AND", lit(True), lit(False)), lit(None))),
    ("INTERVAL '100' MILLISECONDS", Interval(100)),
    ("INTERVAL '1.5' SECOND", Interval(1500)),
    ("INTERVAL 2 DAYS", Interval(172_800_000)),
    ("q.a.b.c", Subscript(Subscript(col("q.a"), field=I("b")), field=I("c"))),
    ("a[1]->f", Subscript(Subscript(col("a"), index=lit(1)), field=I("f"))),
    ("COUNT(*)", Call("COUNT", star=True)),
    ("count(DISTINCT x)", Call("COUNT", (col("x"),), distinct=True)),
    ("concat(a, 'b')", Call("CONCAT", (col("a"), lit("b")))),
    ("PROCTIME()", Call("PROCTIME")),
    ("CAST(x AS DECIMAL(10, 2))", Cast(col("x"), T("DECIMAL", 10, 2))),
    ("CEIL(ts TO MINUTE)", Call("CEIL", (col("ts"), TimeUnit("MINUTE")))),
    ("FLOOR(x)", Call("FLOOR", (col("x"),))),
    ("CASE WHEN a > 1 THEN 'big' ELSE 'small' END",
     Case(((BinaryOp(">", col("a"), lit(1)), lit("big")),), lit("small"))),
    ("CASE a WHEN 1 THEN 'one' WHEN 2 THEN 'two' END",
     Case(((lit(1), lit("one")), (lit(2), lit("two"))), operand=col("a"))),
    ("ARRAY[1, 2]", ArrayLiteral((lit(1), lit(2)))),
    ("[]", ArrayLiteral(())),
    ("STRUCT(a := x, `b` := 1)", StructLiteral(((I("a"), col("x")), (I("b", quoted=True), lit(1))))),
    ("MAP('k' := v, 'j' := 2)", MapLiteral(((lit("k"), col("v")), (lit("j"), lit(2))))),
    ("STRUCT(a, b)", Call("STRUCT", (col("a"), col("b")))),
    ("STRUCT()", StructLiteral(())),  # ksqlDB's empty STRUCT<>
    ("a +\n  f(x)", lambda e: e.pos == Pos(1, 1) and e.right.pos == Pos(2, 3) and e.right.args[0].pos == Pos(2, 5)),
]

# (script, predicate on the list of ScriptStatements)
SCRIPTS = [
    ("", lambda ss: ss == []),
    ("SELECT a FROM t;;  ; -- nothing\n;", lambda ss: len(ss) == 1),
    ("SELECT ';' AS semi FROM t; SELECT \"a;b\" FROM u /* ; */",
     lambda ss: [s.text for s in ss] == ["SELECT ';' AS semi FROM t", 'SELECT "a;b" FROM u']),
    ("-- leading comment\nSELECT a\n  FROM t;\n\n  DROP STREAM s;",
     lambda ss: [(s.index, s.pos, s.text) for s in ss] == [
         (0, Pos(2, 1), "SELECT a\n  FROM t"), (1, Pos(5, 3), "DROP STREAM s")]),
    ("SELECT a FROM t; SELECT b\n  FROM u WHERE c = 1",
     lambda ss: ss[1].statement.query.pos == Pos(1, 18) and ss[1].statement.query.from_.pos == Pos(2, 8)
     and ss[1].statement.query.where.right.pos == Pos(2, 20)),
]

# (script, statement_index, line, column, found, one expected token)
ERRORS = [
    ("SELECT a WHERE b = 1", 0, 1, 10, "WHERE", "FROM"),
    ("SELECT a FROM t;\nSELECT a FROM L JOIN R r\n  WITHN 1 HOUR ON L.id = R.id", 1, 3, 3, "WITHN", "WITHIN"),
    ("SELECT a FROM L JOIN R r WITHN 1 HOUR ON L.id = R.id", 0, 1, 26, "WITHN", "ON"),
    ("SELECT a FROM L INNER JOINX R", 0, 1, 23, "JOINX", "JOIN"),
    ("SELECT (a FROM t", 0, 1, 11, "FROM", ")"),
    ("SELECT f(a FROM t", 0, 1, 12, "FROM", ")"),
    ("CREATE STREAM s (a INT WITH (kafka_topic='s')", 0, 1, 24, "WITH", ")"),
    ("SELECT a FROM t WHERE b = 'oops", 0, 1, 27, "'", "string literal"),
    ("SELECT a FROM t;; SELECT b FROM", 1, 1, 32, "end of input", "identifier"),
    ("SELECT a FROM t WHERE a = #", 0, 1, 27, "#", "number"),
    ("SELECT a FROM t WHERE a = b = c", 0, 1, 29, "=", "AND"),
    ("SELECT * FROM s OVER (ROWS INTERVAL '1' SECOND PRECEDING)", 0, 1, 28, "INTERVAL '1' SECOND PRECEDING",
     "number"),
    ("SELECT * FROM s OVER (RANGE 5 PRECEDING)", 0, 1, 29, "5 PRECEDING", "INTERVAL"),
    ("SELECT INTERVAL 'soon' SECOND FROM t", 0, 1, 8, "INTERVAL 'soon' SECOND", "number"),
    ("", 0, 1, 1, "end of input", "SELECT"),
    ("DROP STREAM s t", 0, 1, 15, "t", "end of input"),
    ("SELECT STREAM a FROM t WINDOW BY HOP 5m GROUP BY a", 0, 1, 41, "GROUP", ","),
    ("SELECT f(a := 1) FROM t", 0, 1, 8, "f(a := 1)", "STRUCT(name := value, ...)"),
    ("SELECT STRUCT(a := 1, 2) FROM t", 0, 1, 8, "STRUCT(a := 1, 2)", "MAP(key := value, ...)"),
    ("SELECT STRUCT(q.a := 1) FROM t", 0, 1, 8, "STRUCT(q.a := 1)", "identifier"),
    ("SELECT a FROM t PARTITION BY ()", 0, 1, 17, "()", "expression"),
    ("SELECT a FROM t GROUP BY c, (b, a)", 0, 1, 31, ",", ")"),  # ksqlDB: missing ')' at ','
    ("SELECT TRANSFORM(a, (t.x) => 1) FROM t", 0, 1, 22, "=>", "identifier"),
    ("SELECT a FROM t WHERE a LIKE 'x' ESCAPE '!!'", 0, 1, 23, "a LIKE 'x' ESCAPE '!!'", "one character"),
]


def _check(tree, expected):
    if callable(expected):
        assert expected(tree), tree
    else:
        assert tree == expected


@pytest.mark.parametrize("sql, expected", STATEMENTS, ids=[s[:60] for s, _ in STATEMENTS])
def test_statement(sql, expected):
    _check(parse_statement(sql), expected)


@pytest.mark.parametrize("sql, expected", EXPRESSIONS, ids=[s for s, _ in EXPRESSIONS])
def test_expression(sql, expected):
    _check(parse_expression(sql), expected)


@pytest.mark.parametrize("script, check", SCRIPTS, ids=[s[:40] for s, _ in SCRIPTS])
def test_script(script, check):
    _check(parse_script(script), check)


@pytest.mark.parametrize("script, index, line, column, found, expected", ERRORS, ids=[e[0][:40] for e in ERRORS])
def test_syntax_error(script, index, line, column, found, expected):
    with pytest.raises(SqlSyntaxError) as caught:
        parse_script(script) if script else parse_statement(script)
    error = caught.value
    assert (error.statement_index, error.line, error.column, error.found) == (index, line, column, found)
    assert expected in error.expected
    assert str(error).startswith(f"Line: {line}, Col: {column}: ") and str(error).endswith(f" (statement {index + 1})")


def test_error_message():
    with pytest.raises(SqlSyntaxError) as caught:
        parse_script("SELECT a FROM t;\nSELECT a FROM L JOIN R r\n  WITHN 1 HOUR ON L.id = R.id")
    message = str(caught.value)
    assert message.startswith("Line: 3, Col: 3: syntax error at 'WITHN': expected one of ") and message.endswith(" (statement 2)")
    assert "', ', " not in message and "ON, OUTER, OVER" in message


def test_a_lenses_join_takes_one_window_written_before_or_after_on():
    with pytest.raises(SqlSyntaxError) as caught:
        parse_script("SELECT STREAM a FROM l JOIN r WITHIN 5s ON l.id = r.id WITHIN 6s")
    assert "two different WITHIN windows" in str(caught.value) and str(caught.value).startswith("Line: 1, Col: ")


def test_parse_statement_refuses_two_statements():
    with pytest.raises(SqlSyntaxError) as caught:
        parse_statement("SELECT a FROM t; SELECT b FROM u")
    assert (caught.value.line, caught.value.column, caught.value.expected) == (1, 16, ["end of input"])
    assert parse_statement("SELECT a FROM t; -- done\n") == query(col("a"), from_=rel("t"))


BARE_CONDITIONS = [  # (a query, where its GROUP BY / PARTITION BY items are conditions not in parentheses)
    ("SELECT COUNT(*) FROM t GROUP BY a AND b;", [(1, 33)]),
    ("SELECT COUNT(*) FROM t GROUP BY (a AND b);", []),
    ("SELECT COUNT(*) FROM t GROUP BY (a) AND (b), c;", [(1, 33)]),
    ("SELECT * FROM t PARTITION BY n = ')';", [(1, 30)]),
    ("SELECT COUNT(*) FROM t GROUP BY (a = 1, b);", [(1, 34)]),
    ("SELECT COUNT(*) FROM t GROUP BY a IS NULL, NOT b, c + 1, d BETWEEN 1 AND 2;", [(1, 33), (1, 44), (1, 58)]),
]


@pytest.mark.parametrize("sql, where", BARE_CONDITIONS)
def test_conditions_as_grouping_items_are_marked(sql, where):
    select = parse_statement(sql).query
    assert [(p.line, p.column) for p in select.bare_conditions] == where


SCRIPT_FILES = [  # (bytes of a script file, its text as read, or the error's words)
    ("\ufeffSELECT 'é' FROM s;\r\n".encode(), "SELECT 'é' FROM s;\r\n"),  # a Windows editor's mark, CRLF lines
    ("SELECT a FROM t;\nSELECT 'ü' FROM u;".encode("latin-1"), "Line: 2, Col: 9: byte 0xfc is not UTF-8 text"),
]


@pytest.mark.parametrize("data, expected", SCRIPT_FILES)
def test_a_script_file_is_read_as_utf8(tmp_path, data, expected):
    path = tmp_path / "script.sql"
    path.write_bytes(data)
    try:
        text = read_script(path)
    except StreamjoinError as err:
        text = str(err)
    assert expected in text
    if not text.startswith(str(path)):
        assert len(parse_script(text)) == 1


def test_every_seed_statement_parses():
    statements = [(path.name, statement)
                  for path in sorted(SEED.glob("*.json"))
                  for test in json.loads(path.read_text())["tests"]
                  for statement in test["statements"]]
    assert statements, f"no seed statements found in {SEED}"
    failures = []
    for name, sql in statements:
        try:
            parsed = parse_script(sql)
        except SqlSyntaxError as e:
            failures.append(f"{name}: {sql}\n    {e}")
            continue
        if [s.text for s in parsed] != [sql.strip().rstrip(";").rstrip()]:
            failures.append(f"{name}: {sql}\n    parsed as {[s.text for s in parsed]}")
    assert not failures, "\n".join(failures)
