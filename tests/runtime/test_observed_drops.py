"""A stateless step's drops are observed per batch and added to the checkpoint once per batch, even when
the sink function runs a batch again (as after a crash before Spark committed it). The checkpoint is named by a
``file://`` URI, which Python's ``open`` cannot read: the counts go through Hadoop's FileSystem."""
from __future__ import annotations

import json

from pyspark.sql import functions as F

from streamjoin.runtime.batch_sink import QueryRun, sink_function
from streamjoin.runtime.observed_drops import ObservedDrops, saved_drops


def test_a_batch_written_again_is_counted_once(spark, tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.json").write_text("".join(json.dumps({"k": k}) + "\n" for k in (1, None, None, 2)))
    checkpoint = f"file://{tmp_path}/ck"
    drops = ObservedDrops(checkpoint)
    rows = drops.observe(spark.readStream.schema("k INT").json(str(inputs)), "null_key", F.col("k").isNull())
    written = []
    write_batch = sink_function(lambda batch, _: written.extend(batch.collect()), [], drops,
                                QueryRun(spark, "observed_drops_test", "Q"))

    def run_twice(batch, batch_id):
        write_batch(batch, batch_id)
        write_batch(batch, batch_id)

    query = (rows.where(F.col("k").isNotNull()).writeStream.queryName("observed_drops_test").foreachBatch(run_twice)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    assert sorted(r.k for r in written) == [1, 1, 2, 2]
    assert saved_drops(spark, checkpoint) == {"batch": 0, "counts": {"null_key": 2}, "last": {"null_key": 2}}
    assert [p.name for p in (tmp_path / "ck" / "dropped").glob("*.json")] == ["0.json"]
