"""Every refusal rule has a case that must fail, with its rule name and position. No Spark needed."""
from __future__ import annotations

import pytest

from streamjoin.errors import StatementError
from streamjoin.plan.catalog import Catalog
from streamjoin.plan.statements import StatementPlanner
from streamjoin.sql import parse_script

KSQL_STREAMS = """
CREATE STREAM L (ID INT KEY, V STRING, X INT) WITH (kafka_topic='left', value_format='JSON');
CREATE STREAM R (ID INT KEY, V STRING, X INT) WITH (kafka_topic='right', value_format='JSON');
CREATE TABLE T (ID INT PRIMARY KEY, V STRING, X INT) WITH (kafka_topic='table', value_format='JSON');
CREATE TABLE U (ID INT PRIMARY KEY, W STRING) WITH (kafka_topic='table2', value_format='JSON');
CREATE TABLE F (ID INT PRIMARY KEY, N STRING) WITH (path='/data/f.json', value_format='JSON');
CREATE TABLE Orders (id STRING, x INT, t TIMESTAMP(3), t2 TIMESTAMP(3), p AS PROCTIME(), WATERMARK FOR t AS t)
  WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json', 'properties.sasl.username' = 'alice', 'properties.group.id' = 'orders-group');
CREATE TABLE Ships (oid STRING, x INT, t TIMESTAMP(3), WATERMARK FOR t AS t - INTERVAL '1' MINUTE)
  WITH ('connector' = 'kafka', 'topic' = 'ships', 'format' = 'json');
CREATE TABLE NoWm (oid STRING, t TIMESTAMP(3)) WITH ('connector' = 'kafka', 'topic' = 'nowm', 'format' = 'json');
CREATE TABLE Rates (cur STRING, rate INT, t TIMESTAMP(3), PRIMARY KEY (cur) NOT ENFORCED, WATERMARK FOR t AS t)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'rates', 'key.format' = 'json', 'value.format' = 'json');
CREATE TEMPORAL TABLE FUNCTION RatesAt ON Ships (t) KEY (oid);
CREATE TABLE games (_key string, player string, startedAt long, at string, score int) FORMAT (string, json);
"""

DIM = ("CREATE TABLE Dim (id STRING, name STRING, n INT, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc', "
       "'url' = 'jdbc:sqlite:dims.db', 'table-name' = 'dim');\n")

# (name, query, rule, text the message must contain)
REFUSED = [
    ("EARLIEST_BY_OFFSET's count a column", "CREATE TABLE E AS SELECT ID, EARLIEST_BY_OFFSET(V, X) AS E FROM L GROUP BY ID;",
     "aggregate-arguments", "Parameter 2 passed to function EARLIEST_BY_OFFSET must be a literal constant, but was "
     "expression: 'X'"),
    ("LATEST_BY_OFFSET's parameters in the wrong order",
     "CREATE TABLE E AS SELECT ID, LATEST_BY_OFFSET(V, false, 2) AS E FROM L GROUP BY ID;", "expression-type",
     "Function 'LATEST_BY_OFFSET' does not accept parameters (STRING, BOOLEAN, INTEGER)."),
    ("a TIME compared with a number", "CREATE STREAM C AS SELECT ID FROM L WHERE CAST(V AS TIME) > 5;",
     "expression-type", "Cannot compare"),
    ("TIMEADD without a unit", "CREATE STREAM C AS SELECT ID, TIMEADD(X, 5, CAST(V AS TIME)) AS T FROM L;",
     "expression-type", "Function 'TIMEADD' does not accept parameters (INTEGER, INTEGER, TIME)."),
    ("join keys of different types", "CREATE STREAM J AS SELECT L.V FROM L JOIN R WITHIN 1 MINUTE ON L.ID = R.V;",
     "join-key-types", "types don't match. Got L.ID{INTEGER} = R.V{STRING}"),
    ("stream-stream without WITHIN", "CREATE STREAM J AS SELECT * FROM L JOIN R ON L.ID = R.ID;",
     "stream-stream-needs-within", "WITHIN"),
    ("FULL stream-table", "CREATE STREAM J AS SELECT L.V FROM L FULL OUTER JOIN T ON L.ID = T.ID;",
     "stream-table-full-outer", "FULL OUTER"),
    ("stream RIGHT JOIN table", "CREATE STREAM J AS SELECT L.V FROM L RIGHT JOIN T ON L.ID = T.ID;",
     "stream-table-preserved-side", "preserved"),
    ("theta stream-table", "CREATE STREAM J AS SELECT L.V FROM L JOIN T ON L.ID > T.ID;",
     "stream-table-equi-join", "equi"),
    ("stream-table on a non-key table column", "CREATE STREAM J AS SELECT L.V FROM L JOIN T ON L.V = T.V;",
     "stream-table-on-table-key", "key"),
    ("ON with both inputs on one side", "CREATE STREAM J AS SELECT L.V FROM L JOIN T ON L.ID - T.ID = 0;",
     "ksql-join-criteria", "Each side of the join comparision must contain references from exactly one source"),
    ("ON with OR across inputs", "CREATE STREAM J AS SELECT L.V FROM L JOIN T ON L.ID = 1 OR L.ID = T.ID;",
     "join-on-condition", "ON"),
    ("CROSS JOIN of streams", "CREATE STREAM J AS SELECT L.V FROM L CROSS JOIN R;",
     "cross-join-needs-windows", "OVER"),
    ("unknown column", "CREATE STREAM J AS SELECT L.NOPE FROM L;", "unknown-column", "NOPE"),
    ("unknown source", "CREATE STREAM J AS SELECT * FROM NOWHERE;", "unknown-source", "NOWHERE"),
    ("ambiguous column", "CREATE STREAM J AS SELECT V FROM L JOIN R WITHIN 1 HOUR ON L.ID = R.ID;",  # ksqlDB's text
     "ambiguous-column", "Exception while preparing statement: Line: 16, Col: 27: Column 'V' is ambiguous. Could be L.V or R.V."),
    ("duplicate output column", "CREATE STREAM J AS SELECT V, V FROM L;", "duplicate-column",
     "Duplicate value columns found in schema: `V` STRING"),
    ("a group's alias taken by an aggregate's", "CREATE TABLE J AS SELECT V AS N, COUNT(*) AS N FROM L GROUP BY V;",
     "duplicate-column", "Duplicate value columns found in schema: `N` BIGINT"),
    ("table without key", "CREATE TABLE NK (A INT) WITH (kafka_topic='nk', value_format='JSON');",
     "table-needs-key", "PRIMARY KEY"),
    ("aggregate in WHERE", "CREATE TABLE C AS SELECT V, COUNT(*) FROM L WHERE COUNT(*) > 1 GROUP BY V;",
     "aggregate-in-where", "WHERE"),
    ("non-grouped column", "CREATE TABLE C AS SELECT X, COUNT(*) FROM L GROUP BY V;", "non-grouped-column", "GROUP BY"),
    ("duplicate name", "CREATE STREAM L (A INT) WITH (kafka_topic='x', value_format='JSON');", "duplicate-name", "exists"),
    ("table-table on no primary key", "CREATE TABLE J AS SELECT T.V FROM T JOIN U ON T.V = U.W;",
     "ksql-table-table-join", "primary key of the right input table. Got T.V = U.W."),
    ("foreign-key join from the right table", "CREATE TABLE J AS SELECT U.ID AS ID, T.V FROM U RIGHT JOIN T ON T.X = U.ID;",
     "ksql-table-table-join", "primary key of the right input table. Got T.X = U.ID."),
    ("FULL table-table with a one-input ON predicate",
     "CREATE TABLE J AS SELECT T.ID AS ID, U.W FROM T FULL OUTER JOIN U ON T.ID = U.ID AND U.W <> 'x';",
     "table-table-full-outer-filter", "WHERE"),
    ("a table from a file joined to a table", "CREATE TABLE J AS SELECT T.V, F.N FROM T JOIN F ON T.ID = F.ID;",
     "static-table-use", "file"),
    ("interval join with only a lower bound",
     "INSERT INTO J SELECT o.id FROM Orders o JOIN Ships s ON o.id = s.oid AND o.t >= s.t;", "interval-bound", "upper"),
    ("event-time temporal join of a table without a watermark",
     "CREATE TABLE RatesNoWm (cur STRING, rate INT, PRIMARY KEY (cur) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', "
     "'topic' = 'rnw', 'key.format' = 'json', 'value.format' = 'json');"
     "INSERT INTO J SELECT o.id FROM Orders o JOIN RatesNoWm FOR SYSTEM_TIME AS OF o.t AS r ON o.id = r.cur;",
     "interval-join-watermarks", "WATERMARK"),
    ("RIGHT temporal join",
     "INSERT INTO J SELECT o.id FROM Orders o RIGHT JOIN Rates FOR SYSTEM_TIME AS OF o.t AS r ON o.id = r.cur;",
     "temporal-join-type", "INNER or LEFT"),
    ("temporal join AS OF a plain column",
     "INSERT INTO J SELECT o.id FROM Orders o JOIN Rates FOR SYSTEM_TIME AS OF o.t2 AS r ON o.id = r.cur;",
     "temporal-join-type", "time attribute"),
    ("an outer regular join's condition with an expression not evaluated on candidate pairs",
     "INSERT INTO J SELECT o.id FROM Orders o LEFT JOIN Ships s ON o.id = s.oid AND SUBSTRING(o.id, 1, 1) < s.oid;",
     "join-condition", "not evaluated on candidate pairs"),
    ("an outer interval join's condition with an expression not evaluated on candidate pairs",
     "INSERT INTO J SELECT o.id FROM Orders o LEFT JOIN Ships s ON o.id = s.oid AND s.t BETWEEN o.t AND o.t + "
     "INTERVAL '1' MINUTE AND SUBSTRING(o.id, 1, 1) < s.oid;", "join-condition", "not evaluated on candidate pairs"),
    ("NOT IN over a column that may be NULL",
     "INSERT INTO J SELECT o.id FROM Orders o WHERE o.id NOT IN (SELECT s.oid FROM Ships s);", "not-in-nullable", "NOT EXISTS"),
    ("a subquery under OR",
     "INSERT INTO J SELECT o.id FROM Orders o WHERE o.x > 1 OR EXISTS (SELECT * FROM Ships s WHERE s.oid = o.id);",
     "subquery-position", "AND"),
    ("a subquery with GROUP BY",
     "INSERT INTO J SELECT o.id FROM Orders o WHERE o.id IN (SELECT s.oid FROM Ships s GROUP BY s.oid);", "subquery", "GROUP BY"),
    ("IN selecting two columns",
     "INSERT INTO J SELECT o.id FROM Orders o WHERE o.id IN (SELECT s.oid, s.x FROM Ships s);", "subquery", "one column"),
    ("EXISTS over ksqlDB streams", "CREATE STREAM J AS SELECT L.V FROM L WHERE EXISTS (SELECT * FROM R WHERE R.ID = L.ID);",
     "subquery-join", "Flink"),
    ("a SESSION group window", "INSERT INTO J SELECT COUNT(*) AS n FROM Orders GROUP BY SESSION(t, INTERVAL '1' MINUTE);",
     "group-window", "SESSION"),
    ("a group window over a column without a watermark",
     "INSERT INTO J SELECT COUNT(*) AS n FROM Orders GROUP BY TUMBLE(t2, INTERVAL '1' MINUTE);", "group-window",
     "not an event-time attribute"),
    ("an auxiliary function of another window",
     "INSERT INTO J SELECT TUMBLE_END(t, INTERVAL '2' MINUTE) AS e, COUNT(*) AS n FROM Orders GROUP BY TUMBLE(t, INTERVAL '1' MINUTE);",
     "group-window", "does not name"),
    ("a CUMULATE window table",
     "INSERT INTO J SELECT window_start, COUNT(*) AS n FROM TABLE(CUMULATE(TABLE Orders, DESCRIPTOR(t), INTERVAL '1' MINUTE, "
     "INTERVAL '5' MINUTE)) GROUP BY window_start, window_end;", "group-window", "CUMULATE"),
    ("a window table over a column without a watermark",
     "INSERT INTO J SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE Orders, DESCRIPTOR(t2), INTERVAL '1' MINUTE)) "
     "GROUP BY window_start, window_end;", "group-window", "not an event-time attribute"),
    ("regular join without an equality",
     "INSERT INTO J SELECT o.id FROM Orders o JOIN Rates r ON o.x > r.rate;", "regular-join-equi", "equality"),
    ("debezium-json changelog without a primary key",
     "CREATE TABLE Cdc (id STRING, v INT) WITH ('connector' = 'kafka', 'topic' = 'cdc', 'format' = 'debezium-json');",
     "changelog-needs-key", "PRIMARY KEY"),
    ("temporal join on a non-key column",
     "INSERT INTO J SELECT o.id FROM Orders o JOIN Rates FOR SYSTEM_TIME AS OF o.t AS r ON o.x = r.rate;",
     "stream-table-on-table-key", "primary key"),
    ("ROWS window ending before the current row",
     "CREATE STREAM J AS SELECT STREAM L.V FROM L OVER (ROWS BETWEEN 5 PRECEDING AND 1 PRECEDING) JOIN R ON L.ID = R.ID;",
     "window-frame", "CURRENT ROW"),
    ("window reaching into the future",
     "CREATE STREAM J AS SELECT STREAM L.V FROM L OVER (RANGE BETWEEN INTERVAL '1' MINUTE PRECEDING AND INTERVAL '1' MINUTE FOLLOWING) JOIN R ON L.ID = R.ID;",
     "window-frame", "FOLLOWING"),
    ("unbounded window",
     "CREATE STREAM J AS SELECT STREAM L.V FROM L OVER (RANGE UNBOUNDED PRECEDING) JOIN R ON L.ID = R.ID;",
     "window-frame", "bounded"),
    ("ordered window that is not a tumbling frame",
     "CREATE STREAM J AS SELECT STREAM L.V FROM L OVER (ORDER BY X RANGE CURRENT ROW) JOIN R ON L.ID = R.ID;",
     "window-frame", "FLOOR(ROWTIME"),
    ("OVER window on a table",
     "CREATE STREAM J AS SELECT STREAM L.V FROM L JOIN T OVER (RANGE INTERVAL '1' MINUTE PRECEDING) ON L.ID = T.ID;",
     "window-frame", "table"),
    ("outer windowed join feeding a windowed join",
     "CREATE STREAM J AS SELECT STREAM L.V FROM L OVER (RANGE INTERVAL '1' MINUTE PRECEDING) LEFT JOIN R ON L.ID = R.ID "
     "JOIN L OVER (RANGE INTERVAL '1' MINUTE PRECEDING) AS L2 ON L2.ID = L.ID;",
     "windowed-join-input", "outer windowed join"),
    ("sliding window preserving a table",
     "CREATE STREAM J AS SELECT STREAM T.V FROM L OVER (RANGE INTERVAL '1' HOUR PRECEDING) RIGHT JOIN T ON L.ID = T.ID;",
     "stream-table-preserved-side", "preserved"),
    ("trigger interval that is no interval", "SET 'streamjoin.trigger.interval' = 'soon';", "invalid-setting", "2 seconds"),
    ("trigger interval in an unknown unit", "SET 'streamjoin.trigger.interval' = '2 fortnights';", "invalid-setting",
     "interval"),
    ("an offset reset that is no offset", "SET 'auto.offset.reset' = 'newest';", "invalid-setting", "'earliest' or 'latest'"),
    ("Lenses: partitions that are no count", "SET defaults.topic.partitions = 0;", "invalid-setting", "positive whole number"),
    ("ksqlDB: a GROUP BY of two columns keyed in the KAFKA format", "CREATE TABLE G AS SELECT ID, V, COUNT(*) AS N "
     "FROM L GROUP BY ID, V;", "key-format", "The 'KAFKA' format only supports a single field"),
    ("ksqlDB: a string compared with ROWTIME that is no time", "CREATE STREAM J AS SELECT ID, V FROM L "
     "WHERE ROWTIME > 'yesterday';", "timestamp-literal", "Failed to parse timestamp 'yesterday'"),
    ("ksqlDB: value columns it would take from a Schema Registry", "CREATE STREAM R2 (ID INT KEY) WITH "
     "(kafka_topic='r2', value_format='AVRO');", "schema-registry",
     "R2 declares no value columns. ksqlDB takes them from a Schema Registry"),
    ("ksqlDB: an integer literal beyond BIGINT", "CREATE STREAM J AS SELECT ID, 9223372036854775808 AS X FROM L;",
     "numeric-literal", "Invalid numeric literal: 9223372036854775808"),
    ("ksqlDB: a negative integer literal beyond BIGINT", "CREATE STREAM J AS SELECT ID, -9223372036854775809 AS X FROM L;",
     "numeric-literal", "Invalid numeric literal: -9223372036854775809"),
    ("ksqlDB: a number beyond DOUBLE", "CREATE STREAM J AS SELECT ID, 1.8E308 AS X FROM L;",
     "numeric-literal", "Number overflows DOUBLE: 1.8E308"),
    ("ksqlDB: a table function over a table", "CREATE TABLE E AS SELECT ID, EXPLODE(ARRAY[X, 1]) AS Y FROM T;",
     "table-function", "Table source is not supported with table functions"),
    ("ksqlDB: a table function beside an aggregation", "CREATE TABLE E AS SELECT V, EXPLODE(ARRAY[X]), COUNT(*) FROM L "
     "GROUP BY V;", "table-function", "Table functions cannot be used with aggregations."),
    ("ksqlDB: a CASE whose every branch is NULL", "CREATE STREAM E AS SELECT ID, CASE WHEN X < 2 THEN NULL ELSE NULL "
     "END AS C FROM L;", "expression-type", "All case branches have NULL type"),
    ("ksqlDB: INSERT VALUES into a quoted name written unquoted", "CREATE STREAM \"lower\" (ID INT KEY, V INT) WITH "
     "(kafka_topic='lower', value_format='JSON'); INSERT INTO lower (ID, V) VALUES (1, 2);", "unknown-source",
     'Did you mean "lower"? Hint: wrap the source name in double quotes'),
    ("a late-records topic without a name", "SET 'streamjoin.late.topic' = ' ';", "invalid-setting", "cannot be empty"),
    # ---- INSERT ... VALUES, pumps, Lenses DDL
    ("VALUES of another type than its column", "INSERT INTO L (ID, V) VALUES ('one', 'x');", "values-type",
     "does not fit column ID of type INT"),
    ("VALUES with too few values", "INSERT INTO L (ID, V) VALUES (1);", "values-count", "1 values for 2 columns"),
    ("VALUES that are not literals", "INSERT INTO L (ID, V) VALUES (1, UCASE('x'));", "values-literal", "literals"),
    ("VALUES into a column the target lacks", "INSERT INTO L (ID, NOPE) VALUES (1, 2);", "unknown-column", "NOPE"),
    ("VALUES into a table read from a file", "INSERT INTO F VALUES (1, 'a');", "insert-into-file", "file"),
    ("INSERT naming fewer columns than its query gives", "INSERT INTO L (ID, V) SELECT ID FROM R;", "column-count",
     "fills 2 columns, its query gives 1"),
    ("ALTER PUMP of a pump never created", "ALTER PUMP nope START;", "unknown-pump", "nope"),
    ("Lenses key format that is not one", "CREATE TABLE lk (_key int, a int) FORMAT (xml, json);", "key-format", "xml"),
    ("Lenses join on keys stored in two formats",
     "CREATE TABLE ks (_key string, a int) FORMAT (string, json); CREATE TABLE ki (_key string, b int) FORMAT (json, json);"
     "WITH kt AS (SELECT TABLE * FROM ki); INSERT INTO j SELECT STREAM ks.a, kt.b FROM ks JOIN kt;",
     "key-formats-differ", "STORE KEY AS"),
    # ksqlDB's own refusals and words, for scripts declared with its DDL
    ("ksqlDB: join keys of one kind but different types",
     "CREATE STREAM B (ID BIGINT KEY, V STRING) WITH (kafka_topic='b', value_format='JSON');"
     "CREATE STREAM J AS SELECT L.V FROM L JOIN B WITHIN 1 MINUTE ON L.ID = B.ID;",
     "join-key-types", "Invalid join condition: types don't match. Got L.ID{INTEGER} = B.ID{BIGINT}."),
    ("ksqlDB: a join key holding a MAP",
     "CREATE STREAM M (ID INT KEY, m MAP<STRING, INT>) WITH (kafka_topic='m', value_format='JSON');"
     "CREATE STREAM N (ID INT KEY, n MAP<STRING, INT>) WITH (kafka_topic='n', value_format='JSON');"
     "CREATE STREAM J AS SELECT M.ID FROM M JOIN N WITHIN 1 MINUTE ON M.m = N.n;",
     "join-key-map", "Key column name: `M_M`. Column type: MAP<STRING, INTEGER>."),
    ("ksqlDB: the table on the left of a stream", "CREATE STREAM J AS SELECT L.V FROM T JOIN L ON L.ID = T.ID;",
     "table-stream-order", "table-stream joins are not supported; only stream-table joins. Got T [INNER] JOIN L."),
    ("ksqlDB: table LEFT JOIN stream", "CREATE STREAM J AS SELECT L.V FROM T LEFT JOIN L ON L.ID = T.ID;",
     "table-stream-order", "Got T LEFT [OUTER] JOIN L."),
    ("ksqlDB: an unknown column in ON", "CREATE STREAM J AS SELECT L.V FROM L JOIN R WITHIN 1 MINUTE ON L.IID = R.ID;",
     "unknown-column", "JOIN ON column 'L.IID' cannot be resolved."),
    ("ksqlDB: an unknown input in ON", "CREATE STREAM J AS SELECT L.V FROM L JOIN R WITHIN 1 MINUTE ON Q.ID = R.ID;",
     "unknown-column", "Failed to prepare statement: 'Q' is not a valid stream/table name or alias."),
    ("ksqlDB: a VALUE_DELIMITER of several characters",
     "CREATE STREAM D (ID INT KEY, A INT) WITH (kafka_topic='d', value_format='DELIMITED', value_delimiter='<~>');",
     "value-delimiter", "Configuration VALUE_DELIMITER is invalid: Invalid delimiter value: '<~>'. Delimiter must be a "
     "single character or TAB,SPACE\nExample valid value: ';'"),
    ("ksqlDB: a blank VALUE_DELIMITER",
     "CREATE STREAM D (ID INT KEY, A INT) WITH (kafka_topic='d', value_format='DELIMITED', value_delimiter=' ');",
     "value-delimiter", "Configuration VALUE_DELIMITER is invalid: Delimiter cannot be empty"),
    ("ksqlDB: a sink's VALUE_DELIMITER of several characters",
     "CREATE STREAM J WITH (value_format='DELIMITED', value_delimiter='ab') AS SELECT L.V FROM L;",
     "value-delimiter", "Invalid delimiter value: 'ab'."),
    ("ksqlDB: the join key projected twice",
     "CREATE STREAM J AS SELECT L.ID, L.ID AS K2, R.V FROM L JOIN R WITHIN 1 MINUTE ON L.ID = R.ID;",
     "key-projected-twice", "The projection contains a key column (`L_ID`) more than once, aliased as: K2 and L_ID."),
    ("ksqlDB: stream-table on a non-key column, in its words", "CREATE STREAM J AS SELECT L.V FROM L JOIN T ON L.V = T.V;",
     "stream-table-on-table-key", "stream-table joins require to join on the table's primary key. Got L.V = T.V."),
    # ksqlDB windowed aggregation (WINDOW TUMBLING / HOPPING), its words where it has them
    ("ksqlDB: WINDOW without GROUP BY", "CREATE TABLE W AS SELECT COUNT(*) AS N FROM L WINDOW TUMBLING (SIZE 1 MINUTE);",
     "time-window", "WINDOW clause requires a GROUP BY clause."),
    ("ksqlDB: WINDOWSTART in GROUP BY",
     "CREATE TABLE W AS SELECT V, COUNT(*) AS N FROM L WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY V, WINDOWSTART;",
     "window-bounds", "Window bounds column WINDOWSTART can only be used in the SELECT clause of windowed aggregations"),
    ("ksqlDB: WINDOWEND inside an aggregate",
     "CREATE TABLE W AS SELECT V, MAX(WINDOWEND) AS M FROM L WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY V;",
     "window-bounds", "Window bounds column WINDOWEND"),
    ("ksqlDB: WINDOWSTART in HAVING",
     "CREATE TABLE W AS SELECT V, COUNT(*) AS N FROM L WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY V HAVING WINDOWSTART > 0;",
     "window-bounds", "WINDOWSTART can only be used in the SELECT clause"),
    ("ksqlDB: a windowed aggregation over a table",
     "CREATE TABLE W AS SELECT V, COUNT(*) AS N FROM T WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY V;",
     "table-window", "Windowing not supported for table aggregations."),
    ("ksqlDB: HOPPING without ADVANCE BY",
     "CREATE TABLE W AS SELECT V, COUNT(*) AS N FROM L WINDOW HOPPING (SIZE 1 MINUTE) GROUP BY V;",
     "time-window", "ADVANCE BY"),
    ("ksqlDB: ADVANCE BY longer than the window",
     "CREATE TABLE W AS SELECT V, COUNT(*) AS N FROM L WINDOW HOPPING (SIZE 1 MINUTE, ADVANCE BY 2 MINUTES) GROUP BY V;",
     "time-window", "ADVANCE BY"),
    ("ksqlDB: RETENTION shorter than size and grace",
     "CREATE TABLE W AS SELECT V, COUNT(*) AS N FROM L WINDOW TUMBLING (SIZE 1 MINUTE, RETENTION 1 MINUTE, "
     "GRACE PERIOD 1 SECOND) GROUP BY V;", "time-window", "61000 ms"),
    ("ksqlDB: a persistent query over a windowed table",
     "CREATE TABLE WT (ID INT PRIMARY KEY, X INT) WITH (kafka_topic='wt', value_format='JSON', WINDOW_TYPE='SESSION');"
     "CREATE TABLE W AS SELECT * FROM WT;", "windowed-table", "KSQL does not support persistent queries on windowed tables."),
    ("ksqlDB: a windowed stream joined to an unwindowed one",
     "CREATE STREAM WS (ID INT KEY, X INT) WITH (kafka_topic='ws', value_format='JSON', WINDOW_TYPE='SESSION');"
     "CREATE STREAM J AS SELECT * FROM WS JOIN L WITHIN 1 MINUTE ON WS.ID = L.ID;", "windowed-join",
     "Can not join windowed source to non-windowed source."),
    ("ksqlDB: a session-windowed stream joined to a time-windowed one",
     "CREATE STREAM WS (ID INT KEY, X INT) WITH (kafka_topic='ws', value_format='JSON', WINDOW_TYPE='SESSION');"
     "CREATE STREAM WT (ID INT KEY, Y INT) WITH (kafka_topic='wt', value_format='JSON', WINDOW_TYPE='HOPPING', "
     "WINDOW_SIZE='10 SECONDS');"
     "CREATE STREAM J AS SELECT * FROM WS JOIN WT WITHIN 1 MINUTE ON WS.ID = WT.ID;", "windowed-join",
     "Incompatible windowed sources.\nLeft source: SESSION\nRight source: HOPPING"),
    ("ksqlDB: time-windowed streams whose windows differ (one side's key would be rewritten)",
     "CREATE STREAM WH (ID INT KEY, X INT) WITH (kafka_topic='wh', value_format='JSON', WINDOW_TYPE='HOPPING', "
     "WINDOW_SIZE='10 SECONDS');"
     "CREATE STREAM WT (ID INT KEY, Y INT) WITH (kafka_topic='wt', value_format='JSON', WINDOW_TYPE='TUMBLING', "
     "WINDOW_SIZE='10 SECONDS');"
     "CREATE STREAM J AS SELECT * FROM WH JOIN WT WITHIN 1 MINUTE ON WH.ID = WT.ID;", "windowed-join",
     "Implicit repartitioning of windowed sources is not supported."),
    ("ksqlDB: session-windowed streams joined on a value column",
     "CREATE STREAM WS (K INT KEY, ID INT) WITH (kafka_topic='ws', value_format='JSON', WINDOW_TYPE='SESSION');"
     "CREATE STREAM WR (K INT KEY, ID INT) WITH (kafka_topic='wr', value_format='JSON', WINDOW_TYPE='SESSION');"
     "CREATE STREAM J AS SELECT * FROM WS JOIN WR WITHIN 1 MINUTE ON WS.K = WR.ID;", "windowed-join",
     "Implicit repartitioning of windowed sources is not supported. See https://github.com/confluentinc/ksql/issues/4385."),
    ("ksqlDB: WINDOW_SIZE on a session-windowed source",
     "CREATE STREAM WS (ID INT KEY, X INT) WITH (kafka_topic='ws', value_format='JSON', WINDOW_TYPE='SESSION', "
     "WINDOW_SIZE='1 MINUTE');", "window-type", "'WINDOW_SIZE' should not be set for SESSION windows."),
    ("ksqlDB: a tumbling-windowed source without WINDOW_SIZE",
     "CREATE STREAM WS (ID INT KEY, X INT) WITH (kafka_topic='ws', value_format='JSON', WINDOW_TYPE='TUMBLING');",
     "window-type", "TUMBLING windows require 'WINDOW_SIZE'"),
    ("ksqlDB: EMIT FINAL without a window", "CREATE TABLE W AS SELECT V, COUNT(*) AS N FROM L GROUP BY V EMIT FINAL;",
     "emit-final", "EMIT FINAL is only supported for windowed aggregations."),
    ("ksqlDB's WINDOW over Flink tables",
     "INSERT INTO J SELECT id, COUNT(*) AS n FROM Orders WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY id;",
     "time-window", "GROUP BY TUMBLE"),
    # ---- ksqlDB's own refusals of a GROUP BY query, in its words and order (its AggregateAnalyzer, QueryValidator)
    ("ksqlDB: an aggregate in GROUP BY", "CREATE TABLE G AS SELECT V, COUNT(*) AS N FROM L GROUP BY V, 1 + SUM(X);",
     "group-by-aggregate", "GROUP BY does not support aggregate functions: SUM is an aggregate function."),
    ("ksqlDB: an aggregate inside an aggregate", "CREATE TABLE G AS SELECT V, SUM(COUNT(*)) AS N FROM L GROUP BY V;",
     "nested-aggregate", "Aggregate functions can not be nested: SUM(COUNT(*))"),
    ("ksqlDB: TOPK's k not an integer literal", "CREATE TABLE G AS SELECT V, TOPK(X, X) AS TOP FROM L GROUP BY V;",
     "aggregate-arguments", "TOPK takes a column and an integer literal of at least 1"),
    ("ksqlDB: TOPKDISTINCT without k", "CREATE TABLE G AS SELECT V, TOPKDISTINCT(X) AS TOP FROM L GROUP BY V;",
     "expression-type", "Function 'TOPKDISTINCT' does not accept parameters (INTEGER)."),
    ("ksqlDB: TOPK over a table", "CREATE TABLE G AS SELECT V, TOPK(X, 2) AS TOP FROM T GROUP BY V;",
     "table-aggregate", "The aggregation function TOPK cannot be applied to a table source, only to a stream source."),
    ("ksqlDB: a GROUP BY expression twice", "CREATE TABLE G AS SELECT V, COUNT(*) AS N FROM L GROUP BY V, L.V;",
     "duplicate-group-by", "Duplicate GROUP BY expression: L.V"),
    ("ksqlDB: GROUP BY without an aggregate, before a column it does not group",
     "CREATE TABLE G AS SELECT V, X FROM L GROUP BY V;", "group-by-without-aggregate",
     "GROUP BY requires aggregate functions in either the SELECT or HAVING clause."),
    ("ksqlDB: SELECT expressions that are no GROUP BY expression, each listed whole",
     "CREATE TABLE G AS SELECT X + 1, SUBSTRING(V, 1, 2), COUNT(*) AS N FROM L GROUP BY SUBSTRING(V, 1, 3);",
     "non-grouped-column", "Non-aggregate SELECT expression(s) not part of GROUP BY: (X + 1), SUBSTRING(V, 1, 2)\n"
     "Either add the column(s) to the GROUP BY"),
    ("ksqlDB: a column beside an aggregate without GROUP BY, even windowed",
     "CREATE TABLE G AS SELECT V, COUNT(*) AS N FROM L WINDOW TUMBLING (SIZE 1 MINUTE);", "non-grouped-column",
     "Non-aggregate SELECT expression(s) not part of GROUP BY: V"),
    ("ksqlDB: a HAVING column outside an aggregate", "CREATE TABLE G AS SELECT V, COUNT(*) AS N FROM L GROUP BY V "
     "HAVING X > 1;", "non-grouped-column", "Non-aggregate HAVING expression not part of GROUP BY: X"),
    ("ksqlDB: an aggregate without GROUP BY", "CREATE TABLE G AS SELECT COUNT(*) AS N FROM L;",
     "aggregate-without-group-by", "CREATE TABLE AS SELECT statement does not support aggregate function "
     "[COUNT(ROWTIME)] without a GROUP BY clause."),
    ("ksqlDB: the grouping expressions left out of the projection", "CREATE TABLE G AS SELECT COUNT(*) AS N FROM L "
     "GROUP BY V, X;", "key-not-projected", "The query used to build `G` must include the grouping expressions V and "
     "X in its projection (eg, SELECT V, X...)."),
    ("ksqlDB: a join's key not selected", "CREATE STREAM J AS SELECT L.V AS LV, R.V AS RV FROM L JOIN R WITHIN 1 HOUR "
     "ON L.ID = R.ID;", "key-not-projected", "The query used to build `J` must include the join expressions L.ID or "
     "R.ID in its projection (eg, SELECT L.ID...)."),
    ("ksqlDB: an n-way join's key not selected (the columns an input join knows equal too)",
     "CREATE STREAM J AS SELECT L.V AS LV FROM L JOIN T ON L.ID = T.ID LEFT JOIN U ON L.ID = U.ID;", "key-not-projected",
     "must include the join expressions L.ID, T.ID or U.ID in its projection"),
    ("ksqlDB: an n-way join's key not selected (an input join keyed otherwise)",
     "CREATE STREAM J AS SELECT L.V AS LV FROM L JOIN T ON L.X = T.ID JOIN U ON L.ID = U.ID;", "key-not-projected",
     "must include the join expressions L.ID or U.ID in its projection"),
    ("ksqlDB: a synthetic join key not selected", "CREATE STREAM J AS SELECT L.V AS LV FROM L JOIN R WITHIN 1 HOUR "
     "ON ABS(L.ID) = ABS(R.ID);", "key-not-projected", "must include the join expression ROWKEY in its projection (eg, "
     "SELECT ROWKEY...).\nROWKEY was added as a synthetic key column because the join criteria did not match any "
     "source column."),
    ("ksqlDB: a foreign-key join without the left table's key", "CREATE TABLE J AS SELECT T.V, U.W FROM T JOIN U "
     "ON T.X = U.ID;", "key-not-projected", "Primary key column missing in projection. For foreign-key table-table "
     "joins, the projection must include all primary key columns from the left input table (`T`). Missing column: `ID`."),
    ("ksqlDB: a source's key column not selected", "CREATE STREAM J AS SELECT V, X FROM L WHERE X > 1;",
     "key-not-projected", "The query used to build `J` must include the key column ID in its projection (eg, SELECT ID...)."),
    ("ksqlDB: a partitioning expression not selected", "CREATE STREAM J AS SELECT ID, V FROM L PARTITION BY ABS(X), V;",
     "key-not-projected", "must include the partitioning expressions ABS(L.X) and L.V in its projection (eg, SELECT "
     "ABS(L.X), L.V...)."),
    ("ksqlDB: a system column's name as an alias", "CREATE STREAM J AS SELECT ID, X AS rowtime FROM L;", "reserved-name",
     "`ROWTIME` is a reserved column name. You cannot use it as an alias for a column."),
    ("ksqlDB: a system column selected unaliased by a persistent query", "CREATE STREAM J AS SELECT ID, ROWTIME FROM L;",
     "reserved-name", "Reserved column name in select: `ROWTIME`. Please remove or alias the column."),
    ("ksqlDB: a source column named as a system column", "CREATE STREAM Z (ID INT KEY, WINDOWSTART BIGINT) WITH "
     "(kafka_topic='z', value_format='JSON');", "reserved-name",
     "'WINDOWSTART' is a reserved column name. You cannot use it as a name for a column."),
    ("ksqlDB: a DELIMITED value column of a nested type", "CREATE STREAM D (ID INT KEY, A ARRAY<INT>) WITH "
     "(kafka_topic='d', value_format='DELIMITED');", "value-format", "The 'DELIMITED' format does not support type 'ARRAY'"),
    ("ksqlDB: a DELIMITED key column of a nested type", "CREATE STREAM D (K STRUCT<F DOUBLE> KEY, V INT) WITH "
     "(kafka_topic='d', key_format='DELIMITED', value_format='JSON');", "key-format", "format: DELIMITED\nschema: "
     "Persistence{columns=[`K` STRUCT<`F` DOUBLE> KEY], features=[]}\nreason: The 'DELIMITED' format does not support "
     "type 'STRUCT', column: `K`"),
    ("ksqlDB: an unknown key format", "CREATE STREAM U (ID INT KEY, V INT) WITH (kafka_topic='u', key_format='FOO', "
     "value_format='JSON');", "key-format", "Unknown format: FOO"),
    ("ksqlDB: a JSON MAP whose keys are no strings", "CREATE STREAM M (ID INT KEY, S STRUCT<M MAP<INT, DOUBLE>>) WITH "
     "(kafka_topic='m', value_format='JSON');", "value-format", "JSON only supports MAP types with STRING keys"),
    ("ksqlDB: an AVRO sink MAP whose keys are no strings", "CREATE STREAM A WITH (value_format='AVRO') AS SELECT ID, "
     "MAP(X := V) AS M FROM L;", "value-format", "Avro only supports MAPs with STRING keys"),
    ("ksqlDB: a declaration without a value format", "CREATE STREAM N (ID INT KEY, V INT) WITH (kafka_topic='n');",
     "value-format", "Statement is missing the 'VALUE_FORMAT' property from the WITH clause."),
    ("ksqlDB: FORMAT beside VALUE_FORMAT", "CREATE STREAM N (ID INT KEY, V INT) WITH (kafka_topic='n', format='JSON', "
     "value_format='JSON');", "value-format", "Cannot supply both 'VALUE_FORMAT' and 'FORMAT' properties"),
    ("ksqlDB: a comparison with the NULL literal", "CREATE STREAM C AS SELECT ID, V <> NULL AS B FROM L;",
     "expression-type", "Comparison with NULL not supported: V <> NULL"),
    ("ksqlDB: a bare NULL selected", "CREATE STREAM C AS SELECT ID, NULL AS N FROM L;", "expression-type",
     "Can't infer a type of null. Please explicitly cast it to a required type, e.g. CAST(null AS VARCHAR)."),
    ("ksqlDB: a join on the NULL literal", "CREATE STREAM J AS SELECT * FROM L JOIN R WITHIN 10 SECONDS ON L.ID = null;",
     "ksql-join-criteria", "Invalid comparison expression 'null' in join '(L.ID = null)'."),
    ("ksqlDB: INSERT INTO a stream of another schema", "CREATE STREAM O AS SELECT ID, V FROM L; INSERT INTO O "
     "SELECT ID, X AS V FROM L;", "insert-into", "Incompatible schema between results and sink.\nResult schema is `ID` "
     "INTEGER KEY, `V` INTEGER\nSink schema is `ID` INTEGER KEY, `V` STRING"),
    ("ksqlDB: INSERT INTO a table", "INSERT INTO T SELECT ID, V, X FROM L;", "insert-into",
     "INSERT INTO can only be used to insert into a stream. T is a table."),
    ("ksqlDB: an IN list value of another type", "CREATE STREAM C AS SELECT ID, V FROM L WHERE X IN (10, V);",
     "expression-type", "Invalid Predicate: operator does not exist: INTEGER = STRING (V)"),
    ("ksqlDB: an IN list string that is no number", "CREATE STREAM C AS SELECT ID, V FROM L WHERE X IN (10, '1x');",
     "expression-type", 'Invalid Predicate: invalid input syntax for type INTEGER: "1x".'),
    ("ksqlDB: a grouping expression selected twice", "CREATE TABLE G AS SELECT V, V AS V2, COUNT(*) AS N FROM L GROUP BY V;",
     "key-projected-twice", "The projection contains a key column more than once: `V` and `V2`."),
    ("ksqlDB: only the grouping expression selected", "CREATE TABLE G AS SELECT V FROM L GROUP BY V HAVING COUNT(*) > 1;",
     "no-value-columns", "The projection contains no value columns."),
    ("ksqlDB: MIN and MAX of a table", "CREATE TABLE G AS SELECT V, MIN(X) AS A, MAX(X) AS B, COUNT(*) AS N FROM T "
     "GROUP BY V;", "table-aggregate", "The aggregation functions MIN and MAX cannot be applied to a table source, "
     "only to a stream source."),
    ("ksqlDB: an unknown column, by clause", "CREATE STREAM W AS SELECT V FROM L WHERE BOB > 1;", "unknown-column",
     "WHERE column 'BOB' cannot be resolved."),
    ("ksqlDB: an unknown GROUP BY column", "CREATE TABLE W AS SELECT V, COUNT(*) FROM L GROUP BY BOB;", "unknown-column",
     "GROUP BY column 'BOB' cannot be resolved."),
    ("ksqlDB: a PARTITION BY column of the result, not the input", "CREATE STREAM W AS SELECT V AS V2 FROM L PARTITION BY V2;",
     "unknown-column", "PARTITION BY column 'V2' cannot be resolved. 'V2' must be a column in the source schema since "
     "PARTITION BY is applied on the input."),
    ("ksqlDB: a function no system has", "CREATE TABLE G AS SELECT V, WONT_FIND_ME(X) FROM L GROUP BY V;",
     "unknown-function", "Can't find any functions with the name 'WONT_FIND_ME'"),
    ("Flink: a function no system has", "INSERT INTO J SELECT id, NO_SUCH_FN(x) FROM Orders;", "unknown-function",
     "unknown function NO_SUCH_FN"),
    ("ksqlDB: a variant's own name is not callable", "CREATE STREAM J AS SELECT KSQL_ROUND(X) FROM L;",
     "unknown-function", "Can't find any functions with the name 'KSQL_ROUND'"),
    ("ksqlDB: a translated function with too few arguments", "CREATE STREAM J AS SELECT TIMESTAMPTOSTRING(ROWTIME) FROM L;",
     "expression-type", "Function 'TIMESTAMPTOSTRING' does not accept parameters (BIGINT)."),
    ("ksqlDB: a variant with too many arguments, under its own name", "CREATE STREAM J AS SELECT ROUND(X, 1, 2) FROM L;",
     "expression-type", "Function 'ROUND' does not accept parameters (INTEGER, INTEGER, INTEGER)."),
    ("ksqlDB: MASK takes its text alone or with all four mask characters",
     "CREATE STREAM J AS SELECT MASK(V, 'U', 'l') FROM L;",
     "expression-type", "Function 'MASK' does not accept parameters (STRING, STRING, STRING)."),
    ("ksqlDB: MASK_LEFT takes a count of characters", "CREATE STREAM J AS SELECT MASK_LEFT(V) FROM L;",
     "expression-type", "Function 'MASK_LEFT' does not accept parameters (STRING)."),
    ("Flink: a translated function with too many arguments", "INSERT INTO J SELECT id, SPLIT(id, ',', 2) FROM Orders;",
     "expression-type", "SPLIT does not take 3 argument(s)"),
    ("ksqlDB: an INT compared with a STRING in WHERE", "CREATE STREAM J AS SELECT V FROM L WHERE ID >= 'not an int';",
     "expression-type", "Error in WHERE expression: Cannot compare ID (INTEGER) to 'not an int' (STRING) with "
     "GREATER_THAN_OR_EQUAL."),
    ("ksqlDB: join columns compared across types, by their join names", "CREATE STREAM J AS SELECT L.V FROM L JOIN R "
     "WITHIN 1 MINUTE ON L.ID = R.ID WHERE L.X > R.V;", "expression-type",
     "Error in WHERE expression: Cannot compare L_X (INTEGER) to R_V (STRING) with GREATER_THAN."),
    ("ksqlDB: a BOOLEAN ordered", "CREATE STREAM J AS SELECT V, (X > 1) < TRUE AS B FROM L;", "expression-type",
     "Cannot compare (X > 1) (BOOLEAN) to TRUE (BOOLEAN) with LESS_THAN."),
    ("ksqlDB: a lambda where no function takes one", "CREATE STREAM J AS SELECT ID, UCASE(x => x) AS U FROM L;",
     "lambda-argument", "UCASE takes no lambda: only TRANSFORM, FILTER, REDUCE do"),
    ("ksqlDB: a map's lambda over an array", "CREATE STREAM J AS SELECT ID, FILTER(ARRAY[X], (k, v) => v > 1) AS U FROM L;",
     "lambda-argument", "FILTER over an ARRAY takes FILTER(collection, x => ...)"),
    ("ksqlDB: TRANSFORM without a lambda", "CREATE STREAM J AS SELECT ID, TRANSFORM(ARRAY[X], X) AS U FROM L;",
     "lambda-argument", "TRANSFORM over an ARRAY takes TRANSFORM(collection, x => ...)"),
    ("ksqlDB: a map TRANSFORM without its value lambda",
     "CREATE STREAM J AS SELECT ID, TRANSFORM(MAP('a' := X), (k, v) => k) AS U FROM L;",
     "lambda-argument", "TRANSFORM(collection, (k, v) => new key, (k, v) => new value)"),
    ("ksqlDB: INSERT VALUES into a SOURCE stream", "CREATE SOURCE STREAM RO (ID INT KEY, V STRING) WITH (kafka_topic='ro', value_format='JSON'); INSERT INTO RO VALUES (1, 'a');", "read-only-source",
     "Cannot insert values into read-only stream: RO"),
    ("ksqlDB: INSERT INTO a SOURCE stream", "CREATE SOURCE STREAM RO (ID INT KEY, V STRING) WITH (kafka_topic='ro', value_format='JSON'); INSERT INTO RO SELECT ID, V FROM L;", "read-only-source",
     "Cannot insert into read-only stream: RO"),
    ("ksqlDB: a SOURCE stream's topic deleted", "CREATE SOURCE STREAM RO (ID INT KEY, V STRING) WITH (kafka_topic='ro', value_format='JSON'); DROP STREAM RO DELETE TOPIC;", "read-only-source",
     "Cannot delete topic for read-only source: RO"),
    ("ksqlDB: a SOURCE stream replaced", "CREATE SOURCE STREAM RO (ID INT KEY, V STRING) WITH (kafka_topic='ro', value_format='JSON'); CREATE OR REPLACE STREAM RO (ID INT KEY) WITH (kafka_topic='ro', "
     "value_format='JSON');", "read-only-source", "Cannot add stream 'RO': CREATE OR REPLACE is not supported on source streams."),
    ("ksqlDB: a SOURCE stream altered", "CREATE SOURCE STREAM RO (ID INT KEY, V STRING) WITH (kafka_topic='ro', value_format='JSON'); ALTER STREAM RO ADD COLUMN N INT;", "read-only-source",
     "Cannot alter stream 'RO': ALTER operations are not supported on source streams."),
    ("ksqlDB: a column added twice", "ALTER STREAM L ADD COLUMN v STRING;", "alter-source",
     "Cannot add column `V` to schema. A column with the same name already exists."),
    ("ksqlDB: a query's stream altered", "CREATE STREAM C AS SELECT ID, V FROM L; ALTER STREAM C ADD COLUMN N INT;",
     "alter-source", "ALTER command is not supported for CREATE ... AS SELECT sources."),
    ("ksqlDB: no columns in a format that cannot infer them", "CREATE STREAM NC WITH (kafka_topic='nc', "
     "value_format='DELIMITED');", "no-columns", "No columns supplied."),
    ("ksqlDB: a table's KEY column", "CREATE TABLE TK (ID INT KEY, V STRING) WITH (kafka_topic='tk', "
     "value_format='JSON');", "key-kind", "Column `ID` is a 'KEY' column: please use 'PRIMARY KEY' for tables."),
    ("ksqlDB: a stream's PRIMARY KEY column", "CREATE STREAM SK (ID INT PRIMARY KEY, V STRING) WITH (kafka_topic='sk', "
     "value_format='JSON');", "key-kind", "Column `ID` is a 'PRIMARY KEY' column: please use 'KEY' for streams."),
    ("ksqlDB: a table without a key", "CREATE TABLE NK2 (V STRING) WITH (kafka_topic='nk2', value_format='JSON');",
     "table-needs-key", "Tables require a PRIMARY KEY. Please define the PRIMARY KEY."),
    ("ksqlDB: a windowed source without a key", "CREATE STREAM WK (V STRING) WITH (kafka_topic='wk', value_format='JSON', "
     "window_type='SESSION');", "windowed-source-key", "Windowed sources require a key column."),
    ("ksqlDB: key columns in the NONE key format", "CREATE STREAM NK3 (ID INT KEY, V STRING) WITH (kafka_topic='nk3', "
     "key_format='NONE', value_format='JSON');", "key-format",
     "The 'NONE' format can only be used when no columns are defined. Got: [`ID` INTEGER KEY]"),
    ("ksqlDB: value columns in the NONE value format", "CREATE STREAM NV (ID INT KEY, foo INT) WITH (kafka_topic='nv', "
     "value_format='NONE');", "value-format",
     "The 'NONE' format can only be used when no columns are defined. Got: [`FOO` INTEGER]"),
    ("ksqlDB: WRAP_SINGLE_VALUE of several columns", "CREATE STREAM WS (ID INT KEY, A INT, B INT) WITH "
     "(kafka_topic='ws', value_format='JSON', wrap_single_value=false);", "value-format",
     "'WRAP_SINGLE_VALUE' is only valid for single-field value schemas"),
    ("ksqlDB: INSERT INTO a stream never declared", "INSERT INTO NOWHERE SELECT ID, V FROM L;", "unknown-source",
     "Source `NOWHERE` does not exist."),
    ("ksqlDB: DROP of a stream never declared", "DROP STREAM NOWHERE;", "unknown-source", "Stream NOWHERE does not exist"),
    ("ksqlDB: a STRUCT constructed with a field twice", "CREATE STREAM J AS SELECT ID, STRUCT(a := V, A := V) AS S "
     "FROM L;", "expression-type", "Duplicate field names found in STRUCT"),
    ("ksqlDB: a schema full name of a JSON value", "CREATE STREAM FJ (ID INT KEY, A INT) WITH (kafka_topic='fj', "
     "value_format='JSON', value_avro_schema_full_name='io.x.Rec');", "value-format",
     "JSON does not support the following configs: [fullSchemaName]"),
    ("ksqlDB: EXPLODE of a MAP", "CREATE STREAM MX (ID INT KEY, M MAP<STRING, INT>) WITH (kafka_topic='mx', "
     "value_format='JSON'); CREATE STREAM J AS SELECT ID, EXPLODE(M) AS E FROM MX;", "expression-type",
     "Function 'explode' does not accept parameters (MAP<STRING, INTEGER>).\nValid alternatives are:\n"
     "explode(ARRAY<DECIMAL> input)\nexplode(ARRAY<T> list)"),
    ("ksqlDB: COALESCE of nothing", "CREATE STREAM J AS SELECT ID, COALESCE() AS C FROM L;", "expression-type",
     "Function 'COALESCE' does not accept parameters ()."),
    ("ksqlDB: a type named twice", "CREATE TYPE ADDRESS AS STRUCT<street STRING>; CREATE TYPE ADDRESS AS STRING;",
     "duplicate-name", "Cannot register custom type 'ADDRESS' since it is already registered with type: "
     "STRUCT<`STREET` STRING>"),
    ("ksqlDB: a type dropped that was never named", "DROP TYPE ADDRESS;", "unknown-type", "Type ADDRESS does not exist."),
    ("ksqlDB: a type dropped, then used", "CREATE TYPE ZIP AS INT; DROP TYPE ZIP; CREATE STREAM Z (ID INT KEY, C ZIP) "
     "WITH (kafka_topic='z', value_format='JSON');", "unknown-type", "Cannot resolve unknown type: ZIP"),
    ("ksqlDB: a named type that names no type", "CREATE TYPE PAIR AS STRUCT<a INT, b NOPE>;", "unknown-type",
     "Cannot resolve unknown type: NOPE"),
    ("ksqlDB: a wrapped single DELIMITED value", "CREATE STREAM WD (ID INT KEY, A INT) WITH (kafka_topic='wd', "
     "value_format='DELIMITED', wrap_single_value=true);", "value-format",
     "Format 'DELIMITED' does not support 'WRAP_SINGLE_VALUE' set to 'true'."),
    ("ksqlDB: an unwrapped single PROTOBUF value of a sink", "CREATE STREAM WP WITH (value_format='PROTOBUF', "
     "wrap_single_value=false) AS SELECT L.V FROM L;", "value-format",
     "Format 'PROTOBUF' does not support 'WRAP_SINGLE_VALUE' set to 'false'."),
    ("ksqlDB: a VALUE_DELIMITER of a JSON value", "CREATE STREAM DJ (ID INT KEY, A INT) WITH (kafka_topic='dj', "
     "value_format='JSON', value_delimiter=';');", "value-delimiter", "JSON does not support the following configs: [delimiter]"),
    ("ksqlDB: INSERT VALUES into a header column", "CREATE STREAM HS (ID INT KEY, H BYTES HEADER('h'), V INT) WITH "
     "(kafka_topic='hs', value_format='JSON'); INSERT INTO HS (ID, H) VALUES (1, NULL);", "insert-into-headers",
     "Cannot insert into HEADER columns: H"),
    ("ksqlDB: PARTITION BY NULL and a column", "CREATE STREAM P2 AS SELECT ID, V FROM L PARTITION BY NULL, X;",
     "partition-by", "Cannot PARTITION BY multiple columns including NULL"),
    ("ksqlDB: a key format for records without a key", "CREATE STREAM P3 WITH (key_format='JSON') AS SELECT ID, V "
     "FROM L PARTITION BY NULL;", "key-format", "Key format specified for stream without key columns."),
    ("ksqlDB: a key selected twice", "CREATE STREAM K2 AS SELECT ID, ID AS ID2, V FROM L;", "key-projected-twice",
     "The projection contains a key column (`ID`) more than once, aliased as: ID and ID2."),
    ("ksqlDB: only the key selected", "CREATE STREAM K3 AS SELECT ID FROM L;", "no-value-columns",
     "The projection contains no value columns."),
    ("ksqlDB: GREATEST of INTEGER and BIGINT", "CREATE STREAM G AS SELECT ID, GREATEST(X, CAST(X AS BIGINT)) AS G "
     "FROM L;", "expression-type", "Function 'greatest' cannot be resolved due to ambiguous method parameters "
     "(INTEGER, BIGINT)."),
    ("ksqlDB: LEAST of a string and a number", "CREATE STREAM G AS SELECT ID, LEAST(V, X) AS G FROM L;",
     "expression-type", "Function 'least' does not accept parameters (STRING, INTEGER)."),
    ("ksqlDB: an empty ARRAY", "CREATE STREAM A0 AS SELECT ID, ARRAY[] AS A FROM L;", "expression-type",
     "Array constructor cannot be empty"),
    ("ksqlDB: a MAP of NULL values", "CREATE STREAM M0 AS SELECT ID, MAP(V := NULL) AS M FROM L;", "expression-type",
     "Cannot construct a map with all NULL values"),
    ("ksqlDB: an ARRAY element not of the others' type", "CREATE STREAM A1 AS SELECT ID, ARRAY[X, 'ten'] AS A FROM L;",
     "expression-type", 'invalid input syntax for type INTEGER: "ten"'),
    ("ksqlDB: a string cast to an ARRAY", "CREATE STREAM C1 AS SELECT ID, CAST(V AS ARRAY<INT>) AS C FROM L;",
     "expression-type", "Cast of STRING to ARRAY<INTEGER> is not supported"),
    ("ksqlDB: STDDEV over a DELIMITED input", "CREATE STREAM D (ID INT KEY, N INT) WITH (kafka_topic='d', "
     "value_format='DELIMITED'); CREATE TABLE DS AS SELECT ID, STDDEV_SAMPLE(N) AS S FROM D GROUP BY ID;", "value-format",
     "One of the functions used in the statement has an intermediate type that the value format can not handle."),
    ("ksqlDB: CORRELATION of one column", "CREATE TABLE CR AS SELECT ID, CORRELATION(X) AS C FROM L GROUP BY ID;",
     "expression-type", "Function 'correlation' does not accept parameters (INTEGER)."),
    ("ksqlDB: s->* of no STRUCT", "CREATE STREAM SS AS SELECT ID, V->* FROM L;", "expression-type", "V->* needs a STRUCT"),
    ("ksqlDB: arrays ordered", "CREATE STREAM J AS SELECT V FROM L WHERE ARRAY[X] < ARRAY[X];", "expression-type",
     "Cannot compare ARRAY[X] (ARRAY<INTEGER>) to ARRAY[X] (ARRAY<INTEGER>) with LESS_THAN."),
    ("ksqlDB: an aggregate compared with a STRING in HAVING", "CREATE TABLE G AS SELECT V, COUNT(*) AS N FROM L GROUP BY V "
     "HAVING SUM(X) > '100';", "expression-type",
     "Error in HAVING expression: Cannot compare SUM(X) (INTEGER) to '100' (STRING) with GREATER_THAN."),
    ("ksqlDB: a BOOLEAN key in the KAFKA key format", "CREATE STREAM B (K BOOLEAN KEY, V INT) WITH (kafka_topic='b', "
     "value_format='JSON');", "key-format", "Key format does not support schema.\nformat: KAFKA\nschema: "
     "Persistence{columns=[`K` BOOLEAN KEY], features=[]}\nreason: The 'KAFKA' format does not support type 'BOOLEAN'"),
    ("ksqlDB: a DECIMAL primary key in the KAFKA key format", "CREATE TABLE D (K DECIMAL(21, 19) PRIMARY KEY, V INT) "
     "WITH (kafka_topic='d', value_format='JSON');", "key-format",
     "columns=[`K` DECIMAL(21, 19) KEY], features=[]}\nreason: The 'KAFKA' format does not support type 'DECIMAL'"),
    ("ksqlDB: two key columns in the KAFKA key format", "CREATE TABLE D (A INT PRIMARY KEY, B INT PRIMARY KEY, V INT) "
     "WITH (kafka_topic='d', value_format='JSON');", "key-format",
     "reason: The 'KAFKA' format only supports a single field. Got: [`A` INTEGER KEY, `B` INTEGER KEY]"),
    ("ksqlDB: an ARRAY re-key in the KAFKA key format", "CREATE STREAM J AS SELECT * FROM L PARTITION BY ARRAY[X];",
     "key-format", "The 'KAFKA' format does not support type 'ARRAY'"),
    ("ksqlDB: a MAP grouping key, whatever the key format", "CREATE TABLE G WITH (key_format='JSON') AS SELECT "
     "MAP('a' := X) AS M, COUNT(*) AS N FROM L GROUP BY MAP('a' := X);", "key-format",
     "Map keys, including types that contain maps, are not supported"),
    ("ksqlDB: one source twice under one name in an n-way join", "CREATE TABLE J AS SELECT T.ID, T.V, U.W FROM T JOIN U "
     "ON T.ID = U.ID JOIN U ON T.ID = U.ID;", "duplicate-alias",
     "N-way joins do not support multiple occurrences of the same source. Source: 'U'."),
    ("a source joined to itself without aliases", "CREATE TABLE J AS SELECT T.V FROM T JOIN T ON T.ID = T.ID;",
     "duplicate-alias", "T is joined twice under one name"),
    ("ksqlDB: a sink's TIMESTAMP property naming no column", "CREATE STREAM J WITH (timestamp='nope') AS SELECT ID, X "
     "FROM L;", "unknown-column", "The TIMESTAMP column set in the WITH clause does not exist in the schema: 'NOPE'"),
    ("ksqlDB: a sink's TIMESTAMP column of type INT", "CREATE STREAM J WITH (timestamp='x') AS SELECT ID, X FROM L;",
     "timestamp-column", "Timestamp column, `X`, should be LONG(INT64), TIMESTAMP, or a String with a timestamp_format "
     "specified"),
    ("ksqlDB: a source's TIMESTAMP column of type STRING without a format", "CREATE STREAM S2 (ID INT KEY, T STRING) "
     "WITH (kafka_topic='s2', value_format='JSON', timestamp='t');", "timestamp-column",
     "Timestamp column, `T`, should be LONG(INT64)"),
    ("ksqlDB: a TIMESTAMP_FORMAT with a pattern letter not read here", "CREATE STREAM S2 (ID INT KEY, T STRING) WITH "
     "(kafka_topic='s2', value_format='JSON', timestamp='t', timestamp_format='yyyy-ww');", "timestamp-format",
     "the pattern letter 'w' is not supported"),
    ("ksqlDB: a WHERE that is not a condition", "CREATE STREAM J AS SELECT V FROM L WHERE RANDOM() + 1.5;",
     "expression-type", "Type error in WHERE expression: Should evaluate to boolean but is (RANDOM() + 1.5) (DOUBLE) "
     "instead."),
    ("ksqlDB: TRUE added to a decimal", "CREATE STREAM J AS SELECT V FROM L WHERE TRUE + 1.5;", "expression-type",
     "Error in WHERE expression: Error processing expression: (true + 1.5). Unsupported arithmetic types. BOOLEAN "
     "DECIMAL"),
    ("ksqlDB: an INT added to a STRING", "CREATE STREAM J AS SELECT V, X + V AS S FROM L;", "expression-type",
     "Error processing expression: (X + V). Unsupported arithmetic types. INTEGER STRING"),
    ("ksqlDB: a BOOLEAN subtracted", "CREATE STREAM J AS SELECT V, (X > 1) - X AS S FROM L;", "expression-type",
     "Unsupported arithmetic types. BOOLEAN INTEGER"),
    ("Lenses: STORE KEY AS a format keys are not written in", "INSERT INTO o STORE KEY AS PROTOBUF SELECT STREAM player "
     "FROM games;", "key-format", "key format PROTOBUF is not supported"),
    ("ksqlDB: GROUP BY a condition not in parentheses", "CREATE TABLE G AS SELECT V, COUNT(*) AS N FROM L GROUP BY V, "
     "X > 1;", "syntax", "Syntax Error"),
    ("ksqlDB: PARTITION BY a condition not in parentheses", "CREATE STREAM P AS SELECT * FROM L PARTITION BY (V) = 'a' "
     "AND X > 1;", "syntax", "take values, not conditions"),
    ("lookup: a RIGHT join", DIM + "INSERT INTO J SELECT o.id FROM Orders o RIGHT JOIN Dim FOR SYSTEM_TIME AS OF o.p AS d "
     "ON o.id = d.id;", "lookup-join", "only support INNER JOIN and LEFT JOIN, but was RIGHT JOIN"),
    ("lookup: as of event time", DIM + "INSERT INTO J SELECT o.id FROM Orders o JOIN Dim FOR SYSTEM_TIME AS OF o.t AS d "
     "ON o.id = d.id;", "lookup-join", "as of the stream's processing time"),
    ("lookup: an expression of the table as key", DIM + "INSERT INTO J SELECT o.id FROM Orders o JOIN Dim FOR SYSTEM_TIME "
     "AS OF o.p AS d ON o.id = UPPER(d.id);", "lookup-join", "requires an equality condition on fields of table [Dim]"),
    ("lookup: keys of different types", DIM + "INSERT INTO J SELECT o.id FROM Orders o JOIN Dim FOR SYSTEM_TIME AS OF o.p "
     "AS d ON o.x = d.name;", "lookup-join", "equivalent condition of the same type"),
    ("lookup: IS NOT DISTINCT FROM", DIM + "INSERT INTO J SELECT o.id FROM Orders o JOIN Dim FOR SYSTEM_TIME AS OF o.p AS d "
     "ON o.id IS NOT DISTINCT FROM d.id;", "lookup-join", "IS NOT DISTINCT FROM"),
    ("updates into a database table without a key", DIM + "CREATE TABLE Counts (x INT, n BIGINT) WITH ('connector' = "
     "'jdbc', 'url' = 'jdbc:sqlite:out.db', 'table-name' = 'counts');\nINSERT INTO Counts SELECT x, COUNT(*) AS n "
     "FROM Orders GROUP BY x;", "database-sink-changelog", "doesn't support consuming update and delete changes"),
    # found by tests/sql/test_fuzzed_sql.py: both raised a Python error instead of a refusal
    ("PARTITIONS that is not a number", "CREATE STREAM P WITH (PARTITIONS = 'two') AS SELECT * FROM L;", "partitions",
     "PARTITIONS = 'two' is not a number of partitions"),
    ("a column declared twice", "CREATE STREAM D (Q INT, q STRING) WITH (kafka_topic='d', value_format='PROTOBUF');",
     "duplicate-column", "D declares column Q twice"),
    ("a database table read as a stream", DIM + "INSERT INTO J SELECT name, COUNT(*) AS c FROM Dim GROUP BY name;",
     "static-table-use", "Dim is a table in a database (dim)"),
    ("Lenses: a SLIDING window", "INSERT INTO o SELECT STREAM player, COUNT(*) AS n FROM games WINDOW BY SLIDING 1m "
     "GROUP BY player;", "time-window", "SLIDING windows are not supported yet"),
    ("Lenses: an older GROUP BY window without its unit pairs", "INSERT INTO o SELECT STREAM player, COUNT(*) AS n "
     "FROM games GROUP BY HOP(5,m), player;", "time-window", "HOP(size, unit, advance, unit)"),
    ("Lenses: a GROUP BY of a window alone", "INSERT INTO o SELECT STREAM COUNT(*) AS n FROM games GROUP BY tumble(1,m);",
     "time-window", "a column beside its window"),
    ("Lenses: EVENTTIME BY a text field", "INSERT INTO o SELECT STREAM player FROM games EVENTTIME BY at;",
     "event-time", "epoch milliseconds (INT or LONG) or a TIMESTAMP, not STRING"),
    ("Lenses: EVENTTIME BY an expression", "INSERT INTO o SELECT STREAM player FROM games EVENTTIME BY startedAt + 1;",
     "event-time", "a field of the record's key or value, not an expression"),
    ("Lenses: EVENTTIME BY a text key", "INSERT INTO o SELECT STREAM player FROM games EVENTTIME BY _key;",
     "event-time", "not STRING"),
    ("a math function given text", "CREATE STREAM C AS SELECT ID, GEO_DISTANCE(X, X, V, 0) AS D FROM L;",
     "expression-type", "Function 'geo_distance' does not accept parameters (INTEGER, INTEGER, STRING, INTEGER)."),
    ("ksqlDB: ROUND of an INT to places fits two signatures by casts", "CREATE STREAM C AS SELECT ID, ROUND(X, 2) AS R "
     "FROM L;", "expression-type", "Function 'Round' cannot be resolved due to ambiguous method parameters (INTEGER, "
     "INTEGER)."),
    ("ksqlDB: a string function given a number", "CREATE STREAM C AS SELECT ID, UCASE(X) AS U FROM L;",
     "expression-type", "Function 'ucase' does not accept parameters (INTEGER)."),
    ("ksqlDB: COALESCE of values of two types", "CREATE STREAM C AS SELECT ID, COALESCE(X, CAST(X AS BIGINT)) AS C "
     "FROM L;", "expression-type", "Function 'COALESCE' does not accept parameters (INTEGER, BIGINT)."),
    ("ksqlDB: TIMESTAMPTOSTRING takes milliseconds, not a TIMESTAMP", "CREATE STREAM C AS SELECT ID, "
     "TIMESTAMPTOSTRING(FROM_UNIXTIME(ROWTIME), 'yyyy') AS T FROM L;", "expression-type",
     "Function 'timestamptostring' does not accept parameters (TIMESTAMP, STRING)."),
    ("ksqlDB: LEN of NULL fits its STRING and its BYTES signature", "CREATE STREAM C AS SELECT ID, LEN(NULL) AS N FROM L;",
     "expression-type", "Function 'len' cannot be resolved due to ambiguous method parameters (null)."),
    ("ksqlDB: ARRAY_CONTAINS of a value of another type", "CREATE STREAM C AS SELECT ID, ARRAY_CONTAINS(ARRAY[X], V) "
     "AS A FROM L;", "expression-type", "Function 'ARRAY_CONTAINS' does not accept parameters (ARRAY<INTEGER>, STRING)."),
    ("ksqlDB: SUM of text", "CREATE TABLE A AS SELECT ID, SUM(V) AS S FROM L GROUP BY ID;", "expression-type",
     "Function 'SUM' does not accept parameters (STRING)."),
    ("ksqlDB: AVG of a DECIMAL", "CREATE TABLE A AS SELECT ID, AVG(CAST(X AS DECIMAL(4, 2))) AS S FROM L GROUP BY ID;",
     "expression-type", "Function 'avg' does not accept parameters (DECIMAL(4, 2))."),
    ("ksqlDB: MAX of a BOOLEAN", "CREATE TABLE A AS SELECT ID, MAX(X > 1) AS S FROM L GROUP BY ID;", "expression-type",
     "Function 'MAX' does not accept parameters (BOOLEAN)."),
    ("ksqlDB: an aggregate's arguments are not cast", "CREATE TABLE A AS SELECT ID, CORRELATION(X, CAST(X AS DOUBLE)) "
     "AS C FROM L GROUP BY ID;", "expression-type", "Function 'correlation' does not accept parameters (INTEGER, DOUBLE)."),
    ("an AVRO column named as Avro names nothing", "CREATE STREAM A1 (`1st` DOUBLE) WITH (kafka_topic='a1', "
     "value_format='AVRO');", "value-format", "Schema is not compatible with Avro: Illegal initial character: 1st"),
    ("an AVRO result whose STRUCT has a field Avro cannot name", "CREATE STREAM A2 WITH (value_format='AVRO') AS "
     "SELECT ID, STRUCT(`a-b` := X) AS S FROM L;", "value-format", "Schema is not compatible with Avro: Illegal "
     "character in: a-b"),
    ("ksqlDB: SUM_LIST of an array of text, named as written", "CREATE TABLE A AS SELECT ID, SUM_LIST(ARRAY[V]) AS S "
     "FROM L GROUP BY ID;", "expression-type", "Function 'sum_list' does not accept parameters (ARRAY<STRING>)."),
    ("ksqlDB: HISTOGRAM counts strings", "CREATE TABLE A AS SELECT ID, HISTOGRAM(X) AS H FROM L GROUP BY ID;",
     "expression-type", "Function 'histogram' does not accept parameters (INTEGER)."),
    ("ROUND given text", "CREATE STREAM C AS SELECT ID, ROUND(V, 2) AS R FROM L;", "expression-type",
     "Function 'round' does not accept parameters (STRING, INTEGER)."),
    ("a window bound in WHERE", "CREATE TABLE C AS SELECT ID, COUNT(*) AS N FROM L WINDOW TUMBLING (SIZE 1 SECOND) "
     "WHERE MIN(WINDOWEND) < 15000 GROUP BY ID;", "unknown-column", "Error in WHERE expression: Unknown column WINDOWEND."),
    ("a Java truststore as a Kafka client property", "SET 'kafka.ssl.truststore.location' = '/etc/kafka/trust.jks';",
     "invalid-setting", "give the CA certificates as a PEM file in 'ssl.ca.location'"),
    ("a Kafka table's OAuth login", "CREATE TABLE K (id STRING) WITH ('connector' = 'kafka', 'topic' = 'k', 'format' = "
     "'json', 'properties.sasl.jaas.config' = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
     "required;');", "kafka-property", "not OAuthBearerLoginModule"),
    ("Kafka tables with other client properties", "CREATE TABLE K (id STRING) WITH ('connector' = 'kafka', 'topic' = "
     "'k', 'format' = 'json', 'properties.group.id' = 'k-group', 'properties.sasl.username' = 'bob');", "kafka-property",
     "K's 'properties.sasl.username' differs from ORDERS's: a script's Kafka tables are read from one broker"),
]


@pytest.mark.parametrize("name,query,rule,fragment", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_with_rule_and_position(name, query, rule, fragment):
    planner = StatementPlanner(Catalog())
    statements = parse_script(KSQL_STREAMS + query)
    with pytest.raises(StatementError) as caught:
        for item in statements:
            planner.plan(item)
    err = caught.value
    assert err.rule == rule
    assert fragment.casefold() in str(err).casefold()
    assert err.statement_index == len(statements) - 1
    assert err.pos is not None and err.pos.line >= 1 and f"Line: {err.pos.line}, Col: {err.pos.column}: " in str(err)


@pytest.mark.parametrize("literal", ["9223372036854775808", "-9223372036854775809", "1.8E308"])
def test_ksqldb_places_a_literal_out_of_range_one_column_past_its_start(literal):
    """ksqlDB's ``ParsingException`` adds one to a node's column, already counted from 1."""
    query = f"CREATE STREAM J AS SELECT ID,\n  {literal} AS X FROM L;"
    planner = StatementPlanner(Catalog())
    with pytest.raises(StatementError) as caught:
        for item in parse_script(KSQL_STREAMS + query):
            planner.plan(item)
    line = (KSQL_STREAMS + query).count("\n") + 1
    assert caught.value.pos.line == line and caught.value.pos.column == 3
    assert f"Failed to prepare statement: line {line}:4: " in str(caught.value)


ACCEPTED = [
    # ksql.persistence.wrap.single.values leaves a format that is always wrapped (PROTOBUF) or unwrapped as it is
    "SET 'ksql.persistence.wrap.single.values'='false'; CREATE STREAM PB (ID INT KEY, V STRING) WITH "
    "(kafka_topic='pb', value_format='PROTOBUF'); CREATE STREAM PB2 AS SELECT ID, V FROM PB;",
    "CREATE TABLE W AS SELECT ID, COUNT(*) AS N FROM L WINDOW sessions SESSION (1 MINUTE) GROUP BY ID;",  # a named window
    # a condition in parentheses is a value ksqlDB groups or partitions by
    "CREATE STREAM P WITH (KEY_FORMAT='JSON') AS SELECT * FROM L PARTITION BY (V = 'a' AND X > 1);",
    # a windowed result's key in a binary format: the key, then the window's bytes
    "CREATE TABLE W WITH (KEY_FORMAT='AVRO') AS SELECT ID, COUNT(*) AS N FROM L WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY ID;",
    "CREATE STREAM C AS SELECT ID, ROUND(CAST(X AS DOUBLE), 2) AS R, GEO_DISTANCE(1.5, X, 2, 3, 'KM') AS D FROM L;",
    # ksqlDB's signatures, with its implicit casts (an INT where a DOUBLE goes) and generics of one type
    "CREATE STREAM C AS SELECT ID, GEO_DISTANCE(X, X, X, X) AS D, GREATEST(X, 1) AS G, COALESCE(V, 'none') AS N, "
    "SUBSTRING(V, X) AS S, CONCAT(V, V, V) AS C, CONCAT_WS('-', V, V) AS W, ELT(X, V, V) AS E, "
    "ARRAY_CONTAINS(ARRAY[X], 1) AS A, LPAD(V, X, '.') AS P FROM L;",
    # ksqlDB's conversion of text where a DATE, TIME, TIMESTAMP or BYTES goes
    "CREATE STREAM C AS SELECT ID, GREATEST(PARSE_DATE(V, 'yyyy'), V) AS G, FORMAT_DATE(V, 'yyyy') AS Y, "
    "FROM_BYTES(V, 'hex') AS B FROM L;",
    "CREATE TABLE A AS SELECT ID, COUNT() AS N, COUNT(V) AS C, TOPK(V, 2) AS T, TOPK(X, V, 2) AS TV, TOPKDISTINCT(X, 2) "
    "AS D, CORRELATION(X, X) AS R, HISTOGRAM(V) AS H, EARLIEST_BY_OFFSET(V, 2, false) AS E FROM L GROUP BY ID;",
    "CREATE TABLE W AS SELECT V, COUNT(*) AS N FROM L WINDOW SESSION (1 MINUTE) GROUP BY V EMIT FINAL;",
    "INSERT INTO J SELECT o.id FROM Orders o FULL JOIN Ships s ON o.id = s.oid AND s.t BETWEEN o.t AND o.t + "
    "INTERVAL '1' MINUTE AND (o.x < s.x OR s.x IS NULL);",
    "CREATE STREAM J AS SELECT L.ID AS ID, L.V AS LV, R.V AS RV FROM L JOIN R WITHIN 1 HOUR ON L.ID = R.ID;",
    "CREATE STREAM J AS SELECT ID, V FROM L WHERE ROWTIME BETWEEN '2018' AND '2019-06-01T00:00:00+0445';",
    "CREATE STREAM J AS SELECT ID, -9223372036854775808 AS X, 1.7976931348623157E308 AS Y FROM L;",
    "CREATE STREAM J AS SELECT L.ID AS ID, L.V, T.V AS TV FROM L LEFT JOIN T ON L.ID = T.ID AND T.X > 3;",
    "CREATE STREAM J AS SELECT T.ID AS ID, L.V, T.V AS TV FROM L JOIN T ON L.X + 1 = T.ID;",
    "CREATE STREAM J AS SELECT L.ID AS ID, T.V, L.V AS LV FROM T RIGHT JOIN L ON L.ID = T.ID;",
    "CREATE TABLE J AS SELECT T.ID AS ID, T.V, U.W FROM T FULL OUTER JOIN U ON T.ID = U.ID;",
    # a join's key left out where ksqlDB allows it: a transient SELECT, a stream-stream key by either ON column
    "SELECT L.V AS LV FROM L JOIN R WITHIN 1 HOUR ON L.ID = R.ID;",
    "CREATE STREAM J AS SELECT R.ID AS K, L.V AS LV FROM L LEFT JOIN R WITHIN 1 HOUR ON L.ID = R.ID;",
    "CREATE STREAM J AS SELECT ID AS K, V FROM L; CREATE STREAM P AS SELECT ABS(X) AS A, V FROM L PARTITION BY ABS(X);",
    "CREATE STREAM S WITH (KEY_FORMAT='JSON') AS SELECT STRUCT(F1 := X) AS S, V FROM L PARTITION BY STRUCT(f1 := X);",
    "CREATE STREAM N AS SELECT V FROM L PARTITION BY NULL;",
    "CREATE STREAM I AS SELECT ID, V FROM L WHERE X IN (1, '2', 3.5, NULL) AND V IN ('a', 1, true);",
    "CREATE STREAM ST (ID INT KEY, S STRUCT<a INT, `b c` STRING>) WITH (kafka_topic='st', value_format='JSON'); "
    "CREATE STREAM ST2 AS SELECT ID, S->*, S->A AS A2 FROM ST;",
    "CREATE TABLE T3 AS SELECT V, TOPK(X, ID, 3) AS BEST, HISTOGRAM(V) AS H, CORRELATION(X, ID) AS C, "
    "STDDEV_SAMP(X) AS SV FROM L GROUP BY V;",
    "ALTER STREAM L ADD COLUMN N BIGINT, ADD W STRING; CREATE STREAM A2 AS SELECT ID, N + X AS NX, W FROM L;",
    "CREATE SOURCE TABLE RT (ID INT PRIMARY KEY, V STRING) WITH (kafka_topic='rt', value_format='JSON'); DROP TABLE RT;",
    "CREATE STREAM LA AS SELECT ID, REDUCE(TRANSFORM(ARRAY[X, 2], x => x * ID), V, (s, x) => s + CAST(x AS STRING)) AS R, "
    "FILTER(MAP(V := ARRAY[X]), (k, v) => ARRAY_MAX(FILTER(v, x => x > ID)) > 0 AND k <> '') AS F FROM L;",  # v: the lambda's
    "CREATE STREAM W (ID INT KEY, N BIGINT, D DOUBLE) WITH (kafka_topic='w', value_format='JSON'); "
    "INSERT INTO W SELECT ID, X AS N, X AS D FROM L;",  # an INT where a BIGINT or DOUBLE goes: cast
    "SET 'ksql.persistence.default.format.value' = 'JSON'; CREATE STREAM N2 (ID INT KEY, V INT) WITH (kafka_topic='n2');",
    "SELECT ID, ROWTIME FROM L; CREATE STREAM RT AS SELECT ID, ROWTIME AS RT FROM L; CREATE STREAM J2 AS SELECT L.ID AS ID, "
    "L.ROWTIME, R.ROWTIME FROM L JOIN R WITHIN 1 MINUTE ON L.ID = R.ID; CREATE STREAM P2 AS SELECT * FROM L PARTITION BY ROWTIME;",
    "CREATE TABLE OLD (UID STRING, NAME STRING) WITH (kafka_topic='old', value_format='json', key='UID');"
    "CREATE STREAM J AS SELECT L.X AS X, OLD.NAME AS NAME FROM L JOIN OLD ON L.V = OLD.UID;",  # old KSQL: ROWKEY
    "CREATE TABLE C AS SELECT V, COUNT(*) AS N FROM L GROUP BY V HAVING COUNT(*) > 1;",
    "CREATE STREAM P AS SELECT * FROM L PARTITION BY V;",
    "CREATE STREAM J AS SELECT L.ID AS ID, L.V, F.N FROM L JOIN F ON L.ID = F.ID;",
    "CREATE TABLE J AS SELECT T.ID AS ID, U.W FROM T JOIN U ON T.X = U.ID;",
    "CREATE TABLE J AS SELECT T.ID AS ID, U.W FROM T RIGHT JOIN U ON T.X = U.ID;",
    "CREATE TABLE G AS SELECT U.W AS W, COUNT(*) AS N FROM T JOIN U ON T.ID = U.ID GROUP BY U.W;",
    "INSERT INTO J SELECT o.id, s.x FROM Orders o, Ships s WHERE o.id = s.oid AND o.t BETWEEN s.t - INTERVAL '4' HOUR AND s.t;",
    "INSERT INTO J SELECT o.id, s.x FROM Orders o FULL JOIN Ships s ON o.id = s.oid AND o.t > s.t AND o.t < s.t + INTERVAL '1' MINUTE;",
    "INSERT INTO J SELECT o.id, r.rate FROM Orders o LEFT JOIN Rates FOR SYSTEM_TIME AS OF o.t AS r ON o.id = r.cur;",
    "INSERT INTO J SELECT o.id, r.rate FROM Orders o JOIN Rates FOR SYSTEM_TIME AS OF o.p AS r ON o.id = r.cur;",
    "INSERT INTO J SELECT o.id, r.x FROM Orders o, LATERAL TABLE (RatesAt(o.t)) AS r WHERE r.oid = o.id;",
    "INSERT INTO J SELECT o.id, r.rate FROM Orders o FULL JOIN Rates r ON o.id = r.cur;",
    "INSERT INTO J SELECT o.id, n.oid FROM Orders o LEFT JOIN NoWm n ON o.id = n.oid;",
    "INSERT INTO J SELECT o.id FROM Orders o WHERE o.x > 0 AND NOT EXISTS (SELECT 1 FROM Ships WHERE oid = o.id AND x > o.x);",
    "INSERT INTO J SELECT id FROM Orders WHERE id IN (SELECT cur FROM Rates WHERE rate > 1);",
    "INSERT INTO J SELECT id, window_start, window_end, SUM(x) AS s FROM TABLE(TUMBLE(TABLE Orders, DESCRIPTOR(t), "
    "INTERVAL '1' MINUTE)) GROUP BY id, window_start, window_end;",
    "INSERT INTO J SELECT id, HOP_END(t, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS e, SUM(x) AS s FROM Orders "
    "GROUP BY HOP(t, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE), id;",
    "INSERT INTO J SELECT o.id, TUMBLE_START(s.t, INTERVAL '1' MINUTE) AS w, COUNT(*) AS n FROM Orders o JOIN Ships s "
    "ON o.id = s.oid AND o.t BETWEEN s.t - INTERVAL '1' MINUTE AND s.t GROUP BY TUMBLE(s.t, INTERVAL '1' MINUTE), o.id;",
    "CREATE STREAM J AS SELECT STREAM L.V FROM L OVER (ROWS 3 PRECEDING) CROSS JOIN R OVER (RANGE INTERVAL '1' SECOND PRECEDING);",
    "CREATE STREAM J AS SELECT STREAM L.V FROM L OVER (RANGE BETWEEN INTERVAL '2' MINUTE PRECEDING AND INTERVAL '1' MINUTE PRECEDING) FULL JOIN R ON L.ID = R.ID;",
    "CREATE STREAM J AS SELECT STREAM L.V, T.V AS TV FROM L OVER (ORDER BY FLOOR(ROWTIME TO DAY) RANGE CURRENT ROW) FULL JOIN T ON L.ID = T.ID;",
    "CREATE STREAM J AS SELECT STREAM T.V FROM T LEFT JOIN L OVER (ORDER BY FLOOR(ROWTIME TO HOUR) RANGE CURRENT ROW) ON L.ID = T.ID;",
    "CREATE STREAM J AS SELECT STREAM L.V FROM L OVER w JOIN R OVER w USING (ID) WINDOW w AS (ROWS 10 PRECEDING);",
    "CREATE TABLE Cdc (id STRING, v INT, PRIMARY KEY (id) NOT ENFORCED) "
    "WITH ('connector' = 'kafka', 'topic' = 'cdc', 'format' = 'debezium-json');",
    # Flink: bounds that never hold, no equality, a comparison of columns that are no time attributes (a
    # condition on each pair of a regular join), a further condition on a temporal join's version
    "INSERT INTO J SELECT o.id FROM Orders o, Ships s WHERE o.id = s.oid AND o.t BETWEEN s.t + INTERVAL '2' HOUR AND s.t + INTERVAL '1' HOUR;",
    "INSERT INTO J SELECT o.id FROM Orders o, Ships s WHERE o.t BETWEEN s.t - INTERVAL '1' HOUR AND s.t;",
    "INSERT INTO J SELECT o.id FROM Orders o JOIN Ships s ON o.id = s.oid AND o.x BETWEEN s.x - 1 AND s.x + 1;",
    "INSERT INTO J SELECT o.id FROM Orders o JOIN NoWm n ON o.id = n.oid AND o.t BETWEEN n.t AND n.t;",
    "INSERT INTO J SELECT o.id, r.rate FROM Orders o LEFT JOIN Rates FOR SYSTEM_TIME AS OF o.t AS r ON o.id = r.cur AND o.x < r.rate;",
    # SQLstream's own declarations: schema, native stream and table, VALUES, view, pumps
    "CREATE OR REPLACE SCHEMA zoo; SET SCHEMA 'zoo'; CREATE OR REPLACE STREAM ev (id INT NOT NULL, aid INT) DESCRIPTION 'e';"
    "CREATE TABLE zoo.animals (aid INT NOT NULL PRIMARY KEY, name VARCHAR(8)); INSERT INTO animals VALUES (1, 'cow');"
    "CREATE VIEW named (id, who) AS SELECT STREAM e.id, a.name FROM ev AS e JOIN animals AS a USING (aid);"
    "CREATE STREAM out (id INT, who VARCHAR(8)); CREATE PUMP p STOPPED AS INSERT INTO out SELECT STREAM id, who FROM named;"
    "ALTER PUMP zoo.* START;",
    # Lenses' own declarations
    "CREATE TABLE cars (_key.plate STRING, speed INT, sensor.id STRING) FORMAT (json, avro) PROPERTIES (partitions = 2);"
    "INSERT INTO cars (_key.plate, speed, sensor.id) VALUES (\"AB-1\", 50, \"s1\");"
    "INSERT INTO fast STORE KEY AS STRING VALUE AS JSON SELECT STREAM _key.plate AS plate, sensor.id AS sid FROM cars;",
    "INSERT INTO L (ROWTIME, ID, V) VALUES ('2019-03-30 05:03:30.000', 1, 'a'), (1000, -2, NULL);",
    # ksqlDB GROUP BY as ksqlDB takes it; a Flink global aggregate; Spark's own functions by their names
    "CREATE TABLE G AS SELECT V, COUNT(*) AS N, SUM(X) / COUNT(*) AS M FROM L GROUP BY V HAVING SUM(X) > 1;",
    "CREATE TABLE G AS SELECT SUBSTRING(V, 1, 2) AS P, COUNT(*) AS N FROM L GROUP BY SUBSTRING(V, 1, 2);",
    "INSERT INTO J SELECT COUNT(*) AS n FROM Orders;",
    "CREATE STREAM W AS SELECT ID, V, CONCAT_WS('-', V, V) AS VV, ABS(X) AS AX FROM L;",
    # Lenses' windows and event time
    "INSERT INTO o SELECT STREAM player, COUNT(*) AS n FROM games EVENTTIME BY startedAt WHERE score > 1 "
    "WINDOW BY HOP 5m,1m GRACE BY 10s GROUP BY player;",
    "INSERT INTO o SELECT STREAM g.player, SUM(score) AS s FROM games AS g EVENTTIME BY g._value.startedAt "
    "GROUP BY SESSION(30,s), g.player;",
    "CREATE STREAM B (K BOOLEAN KEY, V INT) WITH (kafka_topic='b', key_format='JSON', value_format='JSON');",
    "CREATE TABLE D (A INT PRIMARY KEY, B INT PRIMARY KEY, V INT) WITH (kafka_topic='d', format='JSON');",
    "CREATE STREAM J AS SELECT ID, STRUCT(A := X, B := V) AS S, MAP(V := X) AS M, ROUND(X) AS R, SPLIT(V, '.') AS P FROM L;",
    "CREATE STREAM J AS SELECT ID, V, TIMESTAMPTOSTRING(ROWTIME, 'yyyy', 'UTC') AS Y, X + 1.5 AS D, V + V AS VV FROM L "
    "WHERE V >= '2024' AND X = 2.5 AND ROWTIME > 0;",
    "CREATE TYPE POINT AS STRUCT<x DOUBLE, y DOUBLE>; CREATE TYPE IF NOT EXISTS POINT AS INT; DROP TYPE IF EXISTS GONE; "
    "CREATE STREAM J AS SELECT ID, CAST(STRUCT(X := X, Y := X) AS POINT) AS P FROM L;",
]


BOUNDS = [  # (ON time terms, expected (lower, upper) of right.t - left.t in ms)
    ("o.t BETWEEN s.t - INTERVAL '4' HOUR AND s.t", (0, 4 * 3600_000)),
    ("s.t >= o.t AND s.t <= o.t + INTERVAL '10' MINUTE", (0, 600_000)),
    ("o.t > s.t AND o.t < s.t + INTERVAL '1' MINUTE", (-59_999, -1)),
    ("s.t BETWEEN o.t - INTERVAL '2' SECOND AND o.t + INTERVAL '3' SECOND", (-2000, 3000)),
]


@pytest.mark.parametrize("terms,expected", BOUNDS, ids=[b[0] for b in BOUNDS])
def test_interval_bounds(terms, expected):
    from streamjoin.plan.intervals import interval_bounds
    from streamjoin.plan.nodes import Join, walk

    planner = StatementPlanner(Catalog())
    planned = [planner.plan(item) for item in parse_script(
        KSQL_STREAMS + f"INSERT INTO J SELECT o.id, s.x FROM Orders o JOIN Ships s ON o.id = s.oid AND {terms};")]
    join = next(n for n in walk(planned[-1].query.plan) if isinstance(n, Join))
    assert join.shape == "interval"
    bounds = interval_bounds(join)
    assert (bounds.lower, bounds.upper) == expected


@pytest.mark.parametrize("query", ACCEPTED)
def test_accepted(query):
    planner = StatementPlanner(Catalog())
    for item in parse_script(KSQL_STREAMS + query):
        planner.plan(item)


INTERVALS = [("2 seconds", 2000), ("500 milliseconds", 500), ("1 minute", 60_000), ("250", 250), ("0.5 s", 500),
             ("0", 0), ("3 SECONDS", 3000)]


@pytest.mark.parametrize("text,ms", INTERVALS, ids=[i[0] for i in INTERVALS])
def test_trigger_intervals(text, ms):
    from streamjoin.plan.settings import interval_ms

    assert interval_ms(text) == ms


def test_values_become_records_in_the_targets_formats():
    from streamjoin.connectors.topic_store import Record

    planner = StatementPlanner(Catalog())
    planned = [planner.plan(item) for item in parse_script(
        KSQL_STREAMS + "INSERT INTO L (ROWTIME, ID, V) VALUES ('1970-01-01 00:00:01.500', 7, 'a');"
        "CREATE TABLE cars (_key.plate STRING, speed INT, sensor.id STRING) FORMAT (json, json);"
        "INSERT INTO cars (_key.plate, speed, sensor.id) VALUES (\"AB-1\", 50, \"s1\");"
        "CREATE TABLE animals (aid INT NOT NULL PRIMARY KEY, name VARCHAR(8)); INSERT INTO animals VALUES (1, 'cow');")]
    produced = [p.produced for p in planned if p.produced]
    assert produced[0] == ("left", (Record(b"7", b'{"V": "a"}', 1500),))
    topic, (car,) = produced[1]
    assert topic == "cars" and car.key == b'{"plate": "AB-1"}' and car.value == b'{"speed": 50, "sensor": {"id": "s1"}}'
    topic, (animal,) = produced[2]
    assert topic == "ANIMALS" and animal.key == b"1" and animal.value == b'{"AID": 1, "NAME": "cow"}'


# (a script's SET statement, what EXPLAIN says it does here)
SETTINGS = [
    ("SET 'auto.offset.reset' = 'latest';", "auto.offset.reset = latest: where a query without a checkpoint starts"),
    ("SET commit.interval.ms = '1000';", "commit.interval.ms = 1000: the micro-batch cadence"),
    ("SET defaults.topic.partitions = 3;", "defaults.topic.partitions = 3: the partition count of a topic"),
    ("SET defaults.topic.autocreate = true;", "defaults.topic.autocreate = true: ignored: a topic an INSERT INTO writes "
     "is always created"),
    ("SET topic.`market-risk`.cleanup.policy = 'compact,delete';", "topic.market-risk.cleanup.policy = compact,delete: "
     "ignored: topic configurations are left to the broker"),
    ("SET 'processing.guarantee' = 'exactly_once_v2';", "processing.guarantee = exactly_once_v2: ignored: every query "
     "writes exactly once"),
    ("SET 'execution.runtime-mode' = 'streaming';", "ignored: Flink job settings"),
    ("SET 'table.exec.state.ttl' = '1 h';", "table.exec.state.ttl = 1 h: how long a Flink regular join keeps"),
    ("SET 'no.such.thing' = 'x';", "no.such.thing = x: ignored: not a setting streamjoin reads"),
    ("SET 'ksql.functions.collect_list.limit' = '5';", "ksql.functions.collect_list.limit = 5: how many values "
     "COLLECT_LIST keeps"),
    ("SET 'kafka.sasl.password' = 'not-shown';", "kafka.sasl.password = ***: a Kafka client property: every consumer, "
     "producer and admin client of the script takes it"),
    ("SET 'kafka.group.id' = 'mine';", "kafka.group.id = mine: ignored: streamjoin sets this Kafka client property"),
]


@pytest.mark.parametrize("statement,note", SETTINGS, ids=[s[0] for s in SETTINGS])
def test_explain_says_what_each_setting_does(statement, note):
    planner = StatementPlanner(Catalog())
    *_, explained = [planner.plan(item) for item in parse_script(
        KSQL_STREAMS + statement + "EXPLAIN INSERT INTO o SELECT STREAM player FROM games;")]
    assert "Settings:" in explained.output and note in explained.output


def test_lenses_partitions_setting_sizes_the_topics_its_inserts_create():
    planner = StatementPlanner(Catalog())
    *_, planned = [planner.plan(item) for item in parse_script(
        KSQL_STREAMS + "SET defaults.topic.partitions = 3; INSERT INTO o SELECT STREAM player FROM games;")]
    assert planned.created_topic == ("o", 3)


def test_every_translated_function_has_a_translation():
    from streamjoin.lower.expressions import _TRANSLATIONS
    from streamjoin.plan.expressions import AGGREGATES
    from streamjoin.plan.functions import KSQL_VARIANTS, LAMBDA_FUNCTIONS, TRANSLATED

    assert set(TRANSLATED) == set(_TRANSLATIONS) | set(LAMBDA_FUNCTIONS)  # lambdas: lower.expressions._with_lambdas
    assert set(KSQL_VARIANTS.values()) <= set(TRANSLATED) | AGGREGATES


KSQL_COMPARISONS = [  # (a WHERE condition; which of its comparisons, in order, are FALSE with a NULL operand, as ksqlDB's)
    ("A = B", [False]),  # keeping or dropping a row: NULL and FALSE do the same
    ("A = B AND C BETWEEN 1 AND 2", [False, False]),
    ("NOT (A = B) OR C > 1", [True, False]),
    ("(A = B) IS NULL", [True]),
    ("A NOT BETWEEN 1 AND B", [True]),
    ("IFNULL(A < B, TRUE) AND (A < B) = (C BETWEEN 1 AND 2)", [True, False, True, True]),
]


@pytest.mark.parametrize("condition, null_is_false", KSQL_COMPARISONS)
def test_ksqldb_comparisons_with_a_null_operand_are_false(condition, null_is_false):
    from streamjoin.plan.expressions import transform
    from streamjoin.plan.functions import ksql_comparisons
    from streamjoin.sql import ast
    from streamjoin.sql.parser import parse_expression

    def flags(e):
        found = []
        transform(e, lambda n: found.append(n.null_is_false) if hasattr(n, "null_is_false") and (
            not isinstance(n, ast.BinaryOp) or n.op in ("=", "<", ">")) else None)
        return found

    assert flags(ksql_comparisons(parse_expression(condition), condition=True)) == null_is_false
    assert flags(ksql_comparisons(parse_expression(condition))) == [True] * len(null_is_false)  # a value
