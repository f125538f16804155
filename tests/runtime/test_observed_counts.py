"""A stateless step's drops are observed per batch and added to the checkpoint once per batch, even when
the sink function runs a batch again (as after a crash before Spark committed it). The checkpoint is named by a
``file://`` URI, which Python's ``open`` cannot read: the counts go through Hadoop's FileSystem."""
from __future__ import annotations

import json
import shutil

from pyspark.sql import functions as F

from streamjoin.runtime.batch_sink import QueryRun, sink_function
from streamjoin.runtime.observed_counts import ObservedCounts, saved_counts, state_counters


def test_a_batch_written_again_is_counted_once(spark, tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.json").write_text("".join(json.dumps({"k": k}) + "\n" for k in (1, None, None, 2)))
    checkpoint = f"file://{tmp_path}/ck"
    drops = ObservedCounts(checkpoint)
    rows = drops.observe_counts(spark.readStream.schema("k INT").json(str(inputs)), {"null_key": F.when(F.col("k").isNull(), 1)})
    written = []
    write_batch = sink_function(lambda batch, _: written.extend(batch.collect()), [], drops,
                                QueryRun(spark, "observed_counts_test", "Q"))

    def run_twice(batch, batch_id):
        write_batch(batch, batch_id)
        write_batch(batch, batch_id)

    query = (rows.where(F.col("k").isNotNull()).writeStream.queryName("observed_counts_test").foreachBatch(run_twice)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    assert sorted(r.k for r in written) == [1, 1, 2, 2]
    assert saved_counts(spark, checkpoint) == {"batch": 0, "counts": {"null_key": 2}, "last": {"null_key": 2}}
    assert [p.name for p in (tmp_path / "ck" / "dropped").glob("*.json")] == ["0.json"]


SCRIPT = (
    "CREATE STREAM L (ID INT KEY, V STRING) WITH (kafka_topic='left', value_format='JSON');"
    "CREATE STREAM R (ID INT KEY, V STRING) WITH (kafka_topic='right', value_format='JSON');"
    "CREATE STREAM J AS SELECT L.ID AS ID, L.V AS LV, R.V AS RV FROM L JOIN R WITHIN 1 SECOND GRACE PERIOD 0 SECONDS"
    " ON L.ID = R.ID;"
    "CREATE TABLE C AS SELECT V, COUNT(*) AS N FROM L WINDOW TUMBLING (SIZE 1 SECOND) GROUP BY V;"
)


def _records(start: int) -> list[dict]:
    """Matches, a null key, a record a whole window late on each side, and new groups for the count."""
    t = start * 10_000
    return [
        {"topic": "left", "key": 1, "value": {"V": f"a{start}"}, "timestamp": t + 1},
        {"topic": "right", "key": 1, "value": {"V": "x"}, "timestamp": t + 2},
        {"topic": "left", "key": None, "value": {"V": None}, "timestamp": t + 3},
        {"topic": "right", "key": 2, "value": {"V": "y"}, "timestamp": t + 5_000},
        {"topic": "left", "key": 2, "value": {"V": f"b{start}"}, "timestamp": t + 4},
        {"topic": "right", "key": 3, "value": {"V": "late"}, "timestamp": t + 6},
    ]


def _counted_as_in_state(spark, queries) -> list[dict]:
    found = []
    for query in queries:
        metrics, in_state = query.metrics(), state_counters(spark, query.checkpoint)
        assert in_state, query.query_id
        assert {k: metrics.get(k, 0) for k in in_state} == in_state, query.query_id
        found.append(in_state)
    return found


def test_operator_counters_are_observed_per_batch_as_their_state_holds_them(spark, tmp_path):
    """``metrics()`` reads the operators' counters from the checkpoint, added up from each batch's observed changes:
    after every restart they equal what the operators' state holds (read here from the state itself), at one record
    a batch and all at once; and a checkpoint whose counters were never observed (as written before they were) starts from its state."""
    from streamjoin import Engine
    from streamjoin.conformance.runner import produce_inputs

    engine = Engine(spark, home=str(tmp_path), records_per_batch=1)
    engine.execute(SCRIPT)
    produce_inputs(engine.store, _records(0))
    engine.process_all_available()
    first = _counted_as_in_state(spark, engine.queries)
    assert first[0]["null_key"] == 1 and first[0]["late"] >= 1 and first[0]["state_rows"] > 0
    engine.stop()

    for step in (1, 2):
        if step == 2:  # as a checkpoint from before: no counts observed, the operators' own in their state
            for folder in tmp_path.rglob("dropped"):
                shutil.rmtree(folder)
        engine = Engine(spark, home=str(tmp_path))
        engine.execute(SCRIPT)
        produce_inputs(engine.store, _records(step))
        engine.process_all_available()
        counted = _counted_as_in_state(spark, engine.queries)
        assert counted[0]["null_key"] == step + 1
        engine.stop()
