"""The Python API: Engine(spark).execute / explain / dataframe, DESCRIBE, and refusals that start nothing."""
from __future__ import annotations

import json

import pytest

from streamjoin import Engine
from streamjoin.conformance.runner import produce_inputs
from streamjoin.errors import StatementError

DDL = "CREATE STREAM products (sku STRING, product_id STRING, name STRING) WITH (kafka_topic='products', value_format='JSON');"


def test_execute_returns_started_queries_and_the_result_is_a_dataframe(spark, tmp_path):
    engine = Engine(spark, home=str(tmp_path))
    queries = engine.execute(DDL + "CREATE STREAM by_id AS SELECT product_id, sku, name FROM products WHERE name <> 'x' "
                             "PARTITION BY product_id;")
    assert [q.sink for q in queries] == ["BY_ID"]
    produce_inputs(engine.store, [
        {"topic": "products", "timestamp": 5, "value": {"SKU": "s1", "PRODUCT_ID": "p1", "NAME": "scooter"}},
        {"topic": "products", "timestamp": 6, "value": {"SKU": "s2", "PRODUCT_ID": "p2", "NAME": "x"}},
    ])
    engine.process_all_available()
    rows = [r.asDict() for r in engine.dataframe(queries[0]).collect()]
    engine.stop()
    assert rows == [{"ROWKEY": "p1", "SKU": "s1", "NAME": "scooter", "ROWTIME": 5}]  # the key as read back


def test_a_scripts_trigger_interval_paces_its_queries(spark, tmp_path):
    engine = Engine(spark, home=str(tmp_path))
    [query] = engine.execute("SET 'streamjoin.trigger.interval' = '500 milliseconds';" + DDL
                             + "CREATE STREAM named AS SELECT sku, name FROM products;")
    assert "ProcessingTimeTrigger(500)" in query.spark_query._jsq.streamingQuery().trigger().toString()
    produce_inputs(engine.store, [{"topic": "products", "timestamp": 5, "value": {"SKU": "s1", "NAME": "scooter"}}])
    engine.process_all_available()
    rows = [r.asDict() for r in engine.dataframe(query).collect()]
    engine.stop()
    assert [(r["SKU"], r["NAME"]) for r in rows] == [("s1", "scooter")]


def test_explain_shows_where_predicates_run_and_repartitions(spark, tmp_path):
    engine = Engine(spark, home=str(tmp_path))
    text = engine.explain(DDL + "CREATE STREAM by_id AS SELECT * FROM products WHERE name <> 'x' PARTITION BY product_id;")
    assert "Filter [WHERE]" in text and "Repartition" in text and "Sink stream BY_ID" in text
    assert not engine.queries


@pytest.mark.parametrize("query, states", [
    ("SELECT * FROM l JOIN r WITHIN 1 MINUTE ON l.id = r.id", ["state stream_stream v1"]),
    ("SELECT * FROM l JOIN t ON l.id = t.id", ["state stream_table v1"]),
    ("SELECT l.id, COUNT(*) FROM l JOIN t ON l.id = t.id GROUP BY l.id", ["state stream_table v1", "state aggregate v2"]),
    ("SELECT t.id, COUNT(*) FROM t GROUP BY t.id", ["state table_aggregate v2"]),
    ("SELECT l.id, COUNT(*) FROM l WINDOW HOPPING (SIZE 1 MINUTE, ADVANCE BY 10 SECONDS) GROUP BY l.id",
     ["state window_aggregate v2"]),
    ("SELECT l.id, COUNT(*) FROM l WINDOW SESSION (1 MINUTE) GROUP BY l.id", ["state session_aggregate v1"]),
    ("SELECT * FROM l WHERE id > 1", []),
    ("SELECT * FROM t WHERE w = 'x'", ["state table_filter v1"]),
    ("SELECT l.id, COUNT(*) FROM l GROUP BY l.id HAVING COUNT(*) > 1", ["state aggregate v2", "state table_filter v1"]),
])
def test_explain_shows_what_each_stateful_operator_keeps_from_its_declaration(query, states):
    """In the order records flow through them."""
    from streamjoin.lower import operator_table
    from streamjoin.plan.catalog import Catalog
    from streamjoin.plan.statements import StatementPlanner
    from streamjoin.sql import parse_script

    planner = StatementPlanner(Catalog(), operators=operator_table)
    *_, explained = [planner.plan(item) for item in parse_script(
        "CREATE STREAM l (id INT KEY, v STRING) WITH (kafka_topic='l', value_format='JSON');"
        "CREATE STREAM r (id INT KEY, w STRING) WITH (kafka_topic='r', value_format='JSON');"
        "CREATE TABLE t (id INT PRIMARY KEY, w STRING) WITH (kafka_topic='t', value_format='JSON');"
        f"EXPLAIN {query} EMIT CHANGES;")]
    lines = [line.strip() for line in explained.output.splitlines()]
    assert [line.split(" per ")[0] for line in lines if line.startswith("state ")] == states
    assert len([line for line in lines if line.startswith("purged: ")]) == len(states)


def test_describe_lists_columns_and_key(spark, tmp_path):
    engine = Engine(spark, home=str(tmp_path))
    engine.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING) WITH (kafka_topic='t', value_format='JSON'); DESCRIBE t;")
    assert "ID INT (key)" in engine.outputs[-1]


def test_a_refused_script_starts_nothing(spark, tmp_path):
    engine = Engine(spark, home=str(tmp_path))
    with pytest.raises(StatementError):
        engine.execute(DDL + "CREATE STREAM ok AS SELECT * FROM products; CREATE STREAM bad AS SELECT nope FROM products;")
    assert not engine.queries and not spark.streams.active
    assert engine.catalog.source("products") is None


def test_describe_shows_the_optional_side_of_an_outer_join_as_nullable(spark, tmp_path):
    from streamjoin.plan.catalog import Catalog
    from streamjoin.plan.explain import describe_text
    from streamjoin.plan.statements import StatementPlanner
    from streamjoin.sql import parse_script

    planner = StatementPlanner(Catalog())
    for item in parse_script(
        "CREATE TABLE a (id INT PRIMARY KEY, v STRING) WITH (kafka_topic='a', value_format='JSON');"
        "CREATE TABLE b (id INT PRIMARY KEY, w STRING) WITH (kafka_topic='b', value_format='JSON');"
        "CREATE TABLE inner_ids AS SELECT a.id AS aid, b.id AS bid FROM a JOIN b ON a.id = b.id;"
        "CREATE TABLE left_ids AS SELECT a.id AS aid, b.id AS bid FROM a LEFT JOIN b ON a.id = b.id;"
    ):
        planner.plan(item)
    assert "BID INT NOT NULL" in describe_text(planner.catalog.source("inner_ids"))
    left = describe_text(planner.catalog.source("left_ids"))
    assert "BID INT\n" in left + "\n" and "BID INT NOT NULL" not in left


def test_drop_stops_the_writer_of_its_stream(spark, tmp_path):  # (a bare SELECT: test_transient.py)
    engine = Engine(spark, home=str(tmp_path))
    (query,) = engine.execute(DDL + "CREATE STREAM balls AS SELECT sku FROM products WHERE name = 'ball';")
    produce_inputs(engine.store, [{"topic": "products", "timestamp": 1, "value": {"SKU": "s2", "PRODUCT_ID": "p2", "NAME": "ball"}}])
    engine.process_all_available()
    assert [r.asDict()["SKU"] for r in engine.dataframe(query).collect()] == ["s2"]
    engine.execute(f"DROP STREAM {query.sink};")
    assert not engine.queries and not query.spark_query.isActive


def test_dropped_records_are_counted(spark, tmp_path):
    engine = Engine(spark, home=str(tmp_path))
    (query,) = engine.execute(
        "CREATE STREAM L (ID INT KEY, V STRING) WITH (kafka_topic='left', value_format='JSON');"
        "CREATE STREAM R (ID INT KEY, V STRING) WITH (kafka_topic='right', value_format='JSON');"
        "CREATE STREAM J AS SELECT L.ID AS ID, L.V AS LV, R.V AS RV FROM L JOIN R WITHIN 1 SECOND GRACE PERIOD 0 SECONDS ON L.ID = R.ID;"
    )
    produce_inputs(engine.store, [
        {"topic": "left", "key": None, "value": {"V": "no key"}, "timestamp": 1},
        {"topic": "left", "key": 1, "value": None, "timestamp": 2},
        {"topic": "left", "key": 1, "value": {"V": "A"}, "timestamp": 3},
        {"topic": "right", "key": 2, "value": {"V": "x"}, "timestamp": 60_000},
        {"topic": "right", "key": 1, "value": {"V": "late"}, "timestamp": 4},
    ])
    engine.process_all_available()
    metrics = query.metrics()
    engine.stop()
    assert {k: metrics[k] for k in ("null_value", "null_key", "late")} == {"null_value": 1, "null_key": 1, "late": 1}
    assert metrics["state_rows"] >= 1


def test_progress_lines_show_the_clock_outputs_and_dead_letters(spark, tmp_path):
    from streamjoin.runtime.progress import progress_lines

    engine = Engine(spark, home=str(tmp_path))
    engine.execute(DDL + "CREATE TABLE names (id STRING PRIMARY KEY, label STRING) WITH (kafka_topic='names', value_format='JSON');"
                   "CREATE STREAM labelled AS SELECT p.product_id, p.sku, n.label FROM products p LEFT JOIN names n ON p.product_id = n.id;")
    produce_inputs(engine.store, [
        {"topic": "products", "timestamp": 60_000, "value": {"SKU": "s1", "PRODUCT_ID": "p1", "NAME": "scooter"}},
        {"topic": "products", "timestamp": 61_000, "value": "not an object"},
    ])
    engine.process_all_available()
    [line] = progress_lines(engine)
    engine.stop()
    assert "out 1 rows to LABELLED" in line and "stream time 1970-01-01 00:01:01.000" in line and "1 dead letters" in line


def test_a_restart_keeps_the_checkpoints_bucket_count_and_refuses_another(spark, tmp_path):
    """State is kept per hash bucket of the join key: a restart must hash into as many buckets as before."""
    from streamjoin.runtime.checkpoint_layout import LayoutMismatch

    script = ("CREATE STREAM L (ID INT KEY, V STRING) WITH (kafka_topic='left', value_format='JSON');"
              "CREATE STREAM R (ID INT KEY, W STRING) WITH (kafka_topic='right', value_format='JSON');"
              "CREATE STREAM J AS SELECT L.ID AS ID, V, W FROM L JOIN R WITHIN 1 HOUR ON L.ID = R.ID;")
    engine = Engine(spark, home=str(tmp_path))
    engine.execute("SET 'streamjoin.buckets' = '3';" + script)
    produce_inputs(engine.store, [{"topic": "left", "key": k, "value": {"V": f"l{k}"}, "timestamp": k} for k in range(12)])
    engine.process_all_available()
    engine.stop()

    with pytest.raises(LayoutMismatch, match="3 buckets"):
        Engine(spark, home=str(tmp_path)).execute("SET 'streamjoin.buckets' = '5';" + script)
    assert not spark.streams.active

    engine = Engine(spark, home=str(tmp_path))
    (query,) = engine.execute(script)  # no SET: the checkpoint's 3 buckets, where the left records wait
    produce_inputs(engine.store, [{"topic": "right", "key": k, "value": {"W": f"r{k}"}, "timestamp": 100 + k} for k in range(12)])
    engine.process_all_available()
    rows = sorted((int(r["ROWKEY"]), r["V"], r["W"]) for r in engine.dataframe(query).collect())
    engine.stop()
    assert rows == [(k, f"l{k}", f"r{k}") for k in range(12)]


def test_a_query_killed_while_writing_its_first_offsets_starts_again(spark, tmp_path):
    """A kill -9 between Spark writing ``offsets/0`` as a hidden temporary file and renaming it leaves a log with
    no batch but a file in it; Spark itself would refuse to start there (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``).
    The query starts from the beginning instead, and its output is whole."""
    offsets = tmp_path / "checkpoints" / "CSAS_J" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / ".0.5d0c2a1e-0b7e-4f7e-9a55-2f1d3c4b5a69.tmp").write_bytes(b"")
    engine = Engine(spark, home=str(tmp_path))
    (query,) = engine.execute(
        "CREATE STREAM L (ID INT KEY, V STRING) WITH (kafka_topic='left', value_format='JSON');"
        "CREATE STREAM R (ID INT KEY, W STRING) WITH (kafka_topic='right', value_format='JSON');"
        "CREATE STREAM J AS SELECT L.ID AS ID, V, W FROM L JOIN R WITHIN 1 HOUR ON L.ID = R.ID;")
    produce_inputs(engine.store, [{"topic": t, "key": k, "value": {c: f"{t}{k}"}, "timestamp": k}
                                  for k in range(5) for t, c in (("left", "V"), ("right", "W"))])
    engine.process_all_available()
    rows = sorted((int(r["ROWKEY"]), r["V"], r["W"]) for r in engine.dataframe(query).collect())
    engine.stop()
    assert rows == [(k, f"left{k}", f"right{k}") for k in range(5)]


def test_a_join_reads_its_source_once_per_micro_batch(spark, tmp_path):
    """Both inputs and the tick rows of a windowed join come from one read of the batch's slice."""
    engine = Engine(spark, home=str(tmp_path))
    (query,) = engine.execute(
        "CREATE STREAM L (ID INT KEY, V STRING) WITH (kafka_topic='left', value_format='JSON');"
        "CREATE STREAM R (ID INT KEY, V STRING) WITH (kafka_topic='right', value_format='JSON');"
        "CREATE STREAM J AS SELECT L.ID AS ID, L.V AS LV, R.V AS RV FROM L JOIN R WITHIN 1 SECOND ON L.ID = R.ID;"
    )
    produce_inputs(engine.store, [{"topic": "left", "key": 1, "value": {"V": "A"}, "timestamp": 1},
                                  {"topic": "right", "key": 1, "value": {"V": "a"}, "timestamp": 2}])
    engine.process_all_available()
    plan = query.spark_query._jsq.streamingQuery().lastExecution().executedPlan().toString()
    rows = [(r["LV"], r["RV"]) for r in engine.dataframe(query).collect()]
    engine.stop()
    assert rows == [("A", "a")]
    assert plan.count("MicroBatchScan") == 1 and plan.count("ReusedExchange") == 2


def test_a_lenses_query_over_an_undeclared_topic_runs_on_its_inferred_schema(spark, tmp_path):
    """Lenses infers an undeclared JSON topic's schema from its records; a query over it runs, and DESCRIBE
    shows it. Records must be there before the query is planned (as in Lenses)."""
    from streamjoin.connectors.topic_store import Record

    engine = Engine(spark, home=str(tmp_path))
    engine.store.create("payments")
    engine.store.append([("payments", [Record(b"u1", b'{"user": "u1", "amount": 5, "at": 7000}', 1),
                                       Record(b"u2", b'{"user": "u2", "amount": 0.5, "at": 8000}', 2)])])
    (query,) = engine.execute("DESCRIBE payments; INSERT INTO big SELECT STREAM user, amount FROM payments "
                              "EVENTTIME BY at WHERE amount > 1;")
    assert "Columns (inferred from the topic's records):" in engine.outputs[-1] and "amount DOUBLE" in engine.outputs[-1]
    engine.store.append([("payments", [Record(b"u3", b'{"user": "u3", "amount": 9.25, "at": 9000}', 3)])])
    engine.process_all_available()
    rows = [(r.key, json.loads(r.value), r.timestamp) for r in engine.store.records("big")]
    engine.stop()
    assert rows == [(b"u1", {"user": "u1", "amount": 5.0}, 7000), (b"u3", {"user": "u3", "amount": 9.25}, 9000)]


def test_a_stopped_query_lets_go_of_its_spark_query(spark, tmp_path):
    """The foreachBatch function keeps the Spark query it reads observed metrics from; Spark keeps that function as
    long as it keeps the query, so the function must let go when the query stops, or neither side's garbage collector
    frees either (every query a process ran stayed on the driver's heap)."""
    engine = Engine(spark, home=str(tmp_path))
    engine.execute(DDL + "CREATE STREAM named AS SELECT sku, name FROM products;", start=False)
    produce_inputs(engine.store, [{"topic": "products", "value": {"sku": "a", "name": "pen"}, "timestamp": 1}], engine.catalog)
    engine.start_pending()
    engine.process_all_available()
    held = engine.queries[0].release.__self__  # what the function finds the Spark query through (a QueryRun)
    assert held._query is not None
    engine.stop()
    assert held._query is None


def test_a_query_stopped_during_a_micro_batch_stops_cleanly(spark, tmp_path, monkeypatch):
    """Stopped while its sink function waits on a Spark job, a query ends as stopped. Spark tells a stop from a
    failure by the Python error's text, with a regular expression that recursed once per character of a Java stack
    trace: the query's thread died of a StackOverflowError instead (and its status stayed 'Processing new data')."""
    import threading

    from pyspark.sql.classic.dataframe import DataFrame

    collecting, to_arrow = threading.Event(), DataFrame.toArrow

    def slow_to_arrow(self):  # the sink's collect, after a real Spark job that takes a few seconds
        collecting.set()
        self.sparkSession.range(1).mapInPandas(_slowly, "id long").collect()
        return to_arrow(self)

    monkeypatch.setattr(DataFrame, "toArrow", slow_to_arrow)
    engine = Engine(spark, home=str(tmp_path))
    [query] = engine.execute(DDL + "CREATE STREAM named AS SELECT sku, name FROM products;")
    produce_inputs(engine.store, [{"topic": "products", "value": {"sku": "a", "name": "pen"}, "timestamp": 1}], engine.catalog)
    assert collecting.wait(60)
    engine.stop()
    assert query.spark_query.status["message"] == "Stopped" and query.spark_query.exception() is None


def _slowly(batches):
    import time

    time.sleep(5)
    yield from batches
