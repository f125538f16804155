"""Records a query drops as late or for a null key go to the topic ``SET 'streamjoin.late.topic'`` names, with the
reason, the stream time and where each record was read; once each, however the input is cut into micro-batches,
across restarts and when a batch's sink function runs again; without the setting they are only counted."""
from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from streamjoin import Engine, Topics
from streamjoin.connectors.late_records import LateRecords
from streamjoin.conformance.runner import produce_inputs
from streamjoin.runtime.batch_sink import QueryRun, sink_function
from streamjoin.runtime.observed_counts import ObservedCounts

DECLARATIONS = (
    "CREATE STREAM L (ID INT KEY, V STRING) WITH (kafka_topic='left', value_format='JSON');"
    "CREATE STREAM R (ID INT KEY, V STRING) WITH (kafka_topic='right', value_format='JSON');"
    "CREATE TABLE U (ID INT PRIMARY KEY, NAME STRING) WITH (kafka_topic='users', value_format='JSON');"
)
QUERIES = (
    "CREATE STREAM J AS SELECT L.ID AS ID, L.V AS LV, R.V AS RV FROM L JOIN R WITHIN 1 SECOND GRACE PERIOD 0 SECONDS"
    " ON L.ID = R.ID;"
    "CREATE STREAM E AS SELECT R.ID AS ID, R.V, U.NAME FROM R LEFT JOIN U ON R.ID = U.ID;"
    "CREATE TABLE C AS SELECT V, COUNT(*) AS N FROM L GROUP BY V;"
    "CREATE TABLE W AS SELECT V, COUNT(*) AS N FROM R WINDOW TUMBLING (SIZE 1 SECOND, GRACE PERIOD 0 SECONDS) GROUP BY V;"
)
LATE_TOPIC = "SET 'streamjoin.late.topic' = 'late_records';"

RECORDS = [  # (topic, key, value, timestamp): offsets count per topic from 0
    ("users", 1, {"NAME": "one"}, 0),
    ("left", 1, {"V": "a"}, 1_001),
    ("right", 1, {"V": "x"}, 1_002),
    ("left", 2, {"V": None}, 1_003),      # left offset 1: no group for C (a null key)
    ("right", None, {"V": "y"}, 1_004),   # right offset 1: a null join key for J and for E
    ("right", 2, {"V": "z"}, 9_000),      # moves the right side's clock on
    ("right", 3, {"V": "old"}, 1_005),    # right offset 3: far behind its side's clock, late for J and W
    ("left", 3, {"V": "b"}, 9_001),
]

EXPECTED = [  # (query, reason, topic, partition, offset, rowtime, stream time)
    ("CSAS_J", "late", "right", 0, 3, 1_005, 9_000),
    ("CSAS_J", "null_key", "right", 0, 1, 1_004, 1_004),
    ("CSAS_E", "null_key", "right", 0, 1, 1_004, 1_004),
    ("CTAS_C", "null_key", "left", 0, 1, 1_003, None),  # a query that keeps no clock
    ("CTAS_W", "late", "right", 0, 3, 1_005, 9_000),
]


def _inputs(records) -> list[dict]:
    return [{"topic": t, "key": k, "value": v, "timestamp": ts} for t, k, v, ts in records]


def _late(home) -> list[tuple]:
    records = Topics(str(home)).read("late_records")
    values = [r["value"] for r in records]
    assert all(r["timestamp"] == v["rowtime"] for r, v in zip(records, values))
    return sorted((v["query"], v["reason"], v["topic"], v["partition"], v["offset"], v["rowtime"], v["stream_time"])
                  for v in values)


@pytest.mark.parametrize("records_per_batch", [1, 0])
def test_dropped_records_go_to_the_late_topic_once_across_restarts(spark, tmp_path, records_per_batch):
    script = DECLARATIONS + LATE_TOPIC + QUERIES
    engine = Engine(spark, home=str(tmp_path), records_per_batch=records_per_batch)
    engine.execute(script)
    produce_inputs(engine.store, _inputs(RECORDS[:5]))
    engine.process_all_available()
    engine.stop()

    engine = Engine(spark, home=str(tmp_path), records_per_batch=records_per_batch)  # a restart of the same script
    engine.execute(script)
    produce_inputs(engine.store, _inputs(RECORDS[5:]))
    engine.process_all_available()
    counted = {q.query_id: q.metrics() for q in engine.queries}
    engine.stop()

    assert _late(tmp_path) == sorted(EXPECTED)
    for query in ("CSAS_J", "CSAS_E", "CTAS_C", "CTAS_W"):  # what is written is what is counted
        for reason in ("late", "null_key"):
            assert counted[query].get(reason, 0) == sum(1 for e in EXPECTED if e[:2] == (query, reason)), (query, reason)


def test_without_the_setting_dropped_records_are_only_counted(spark, tmp_path):
    engine = Engine(spark, home=str(tmp_path), records_per_batch=0)
    engine.execute(DECLARATIONS + QUERIES)
    produce_inputs(engine.store, _inputs(RECORDS))
    engine.process_all_available()
    counted = {q.query_id: q.metrics() for q in engine.queries}
    engine.stop()
    assert "late_records" not in Topics(str(tmp_path)).list()
    assert counted["CSAS_J"]["late"] == 1 and counted["CSAS_J"]["null_key"] == 1


def test_a_batch_whose_sink_function_runs_again_writes_its_late_records_once(spark, tmp_path):
    """As after a crash between the sink's write and Spark's commit: the batch's late records are not doubled."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.json").write_text("".join(json.dumps({"k": k, "t": t}) + "\n" for k, t in ((1, 5), (None, 6), (None, 7))))
    late = LateRecords("Q", "late_records", root=str(tmp_path / "topics"))
    late.create_topic()
    rows = spark.readStream.schema("k INT, t BIGINT").json(str(inputs))
    description = F.to_json(F.struct(F.lit("null_key").alias("reason"), F.col("t").alias("rowtime")))
    rows = late.observe(rows, F.when(F.col("k").isNull(), description))
    write_batch = sink_function(lambda batch, _: batch.collect(), [], ObservedCounts(f"{tmp_path}/ck"),
                                QueryRun(spark, "late_records_test", "Q"), late)

    def run_twice(batch, batch_id):
        write_batch(batch, batch_id)
        write_batch(batch, batch_id)

    query = (rows.where(F.col("k").isNotNull()).writeStream.queryName("late_records_test").foreachBatch(run_twice)
             .option("checkpointLocation", f"{tmp_path}/ck").trigger(availableNow=True).start())
    query.awaitTermination()
    written = [r["value"] for r in Topics(str(tmp_path)).read("late_records")]
    assert sorted((v["query"], v["reason"], v["rowtime"]) for v in written) == [("Q", "null_key", 6), ("Q", "null_key", 7)]
