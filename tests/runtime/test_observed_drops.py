"""A stateless step's drops are observed per batch and added to the checkpoint once per batch, even when
the sink function runs a batch again (as after a crash before Spark committed it)."""
from __future__ import annotations

import json

from pyspark.sql import functions as F

from streamjoin.runtime.batch_sink import sink_function
from streamjoin.runtime.observed_drops import ObservedDrops, saved_drops


def test_a_batch_written_again_is_counted_once(spark, tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.json").write_text("".join(json.dumps({"k": k}) + "\n" for k in (1, None, None, 2)))
    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    drops = ObservedDrops(str(checkpoint))
    rows = drops.observe(spark.readStream.schema("k INT").json(str(inputs)), "null_key", F.col("k").isNull())
    written = []
    write_batch = sink_function(lambda batch, _: written.extend(batch.collect()), [], drops, spark, "observed_drops_test")

    def run_twice(batch, batch_id):
        write_batch(batch, batch_id)
        write_batch(batch, batch_id)

    query = (rows.where(F.col("k").isNotNull()).writeStream.queryName("observed_drops_test").foreachBatch(run_twice)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    assert sorted(r.k for r in written) == [1, 1, 2, 2]
    assert saved_drops(str(checkpoint)) == {"batch": 0, "counts": {"null_key": 2}, "last": {"null_key": 2}}
