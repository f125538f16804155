"""Group window aggregates: N records over 10k keys, event times rising 10 ms a record with up to 2 s of
disorder, Flink's ``GROUP BY TUMBLE(t, INTERVAL '1' MINUTE), k`` (COUNT and SUM) under a 10-second watermark
delay, and ksqlDB's ``WINDOW TUMBLING (SIZE 1 MINUTE, GRACE PERIOD 10 SECONDS)`` with EMIT FINAL and EMIT CHANGES.
Baseline: Spark's native windowed aggregation (``groupBy(window(t, '1 minute'), k)`` with a 10-second
watermark, append mode: a window's row leaves once the watermark passes its end). Both read the same
embedded topic through the same source and write to the no-op sink."""
from __future__ import annotations

import os

import numpy as np

from common import raw_topics, time_query, time_streamjoin, topics_workspace, warmed_up

KEYS = 10_000
STEP_MS = 10
DISORDER_MS = 2_000
DDL = """
CREATE TABLE L (k INT, v BIGINT, t TIMESTAMP(3), WATERMARK FOR t AS t - INTERVAL '10' SECOND)
  WITH ('connector' = 'kafka', 'topic' = 'left', 'format' = 'json');
"""
QUERY = ("INSERT INTO J SELECT k, TUMBLE_START(t, INTERVAL '1' MINUTE) AS ws, COUNT(*) AS n, SUM(v) AS s "
         "FROM L GROUP BY TUMBLE(t, INTERVAL '1' MINUTE), k;")
# the same windows in ksqlDB (record times are the event times): one row per window when it closes (as Spark's
# append mode), or the window's values after every record
KSQL = """
CREATE STREAM LK (k INT, v BIGINT) WITH (kafka_topic='left', value_format='JSON');
CREATE TABLE JK AS SELECT k, COUNT(*) AS n, SUM(v) AS s FROM LK
  WINDOW TUMBLING (SIZE 1 MINUTE, GRACE PERIOD 10 SECONDS) GROUP BY k EMIT {emit};
"""


def generate(root: str, rows: int) -> None:
    from streamjoin.connectors.topic_store import Record, TopicStore

    store = TopicStore(root)
    rng = np.random.default_rng(11)
    chunk = 50_000
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        idx = np.arange(start, start + n)
        times = idx * STEP_MS - rng.integers(0, DISORDER_MS, n) + DISORDER_MS
        stamps = np.datetime_as_string(times.astype("datetime64[ms]"), unit="ms")
        keys = rng.integers(0, KEYS, n)
        store.append([("left", [Record(None, f'{{"k":{k},"v":{i},"t":"{s}"}}'.encode(), int(t))
                                for k, i, s, t in zip(keys, idx, stamps, times)])])


def run(*, rows: int, batches: int, only: list[str]) -> dict:
    return warmed_up(_run_variants, ["spark-native", "streamjoin-tumble", "streamjoin-ksql-final", "streamjoin-ksql-changes"],
                     rows=rows, batches=batches, only=only)


def _run_variants(*, rows: int, batches: int, only: list[str]) -> dict:
    from pyspark.sql import functions as F

    with topics_workspace(generate, rows) as (spark, work, root):
        per_batch = max(1, rows // batches)
        results = {}
        if not only or "spark-native" in only:
            raw = raw_topics(spark, root, "left", per_batch)
            value = F.from_json(F.col("value").cast("string"), "k INT, v BIGINT, t TIMESTAMP")
            rows_df = raw.select(value.alias("r")).select("r.k", "r.v", "r.t").withWatermark("t", "10 seconds")
            windows = rows_df.groupBy(F.window("t", "1 minute"), "k").agg(F.count("*").alias("n"), F.sum("v").alias("s"))
            results["spark-native"] = dict(time_query(windows, os.path.join(work, "ck-native"), rows), baseline=True)
        variants = {"streamjoin-tumble": (DDL + QUERY, per_batch),
                    "streamjoin-ksql-final": (KSQL.format(emit="FINAL"), per_batch),
                    "streamjoin-ksql-changes": (KSQL.format(emit="CHANGES"), per_batch)}
        results.update(time_streamjoin(spark, variants, root, work, rows, only))
        return results
