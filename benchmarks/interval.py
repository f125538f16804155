"""Flink interval join: 2 x N records, 100k keys, event times rising with a little disorder, bounds of
+/- 5 minutes, a 10-second watermark delay. Baseline: Spark's native stream-stream join with the same
time-range condition and watermarks. Both read the same embedded topics through the same source and write
to the no-op sink; streamjoin also computes the watermark of every record in its source."""
from __future__ import annotations

import os

import numpy as np

from common import raw_topics, time_query, time_streamjoin, topics_workspace, warmed_up

KEYS = 100_000
STEP_MS = 10  # event time advances 10 ms per record and side: +/- 5 minutes holds ~30k records a side
DISORDER_MS = 2_000
DDL = """
CREATE TABLE L (k INT, v BIGINT, t TIMESTAMP(3), WATERMARK FOR t AS t - INTERVAL '10' SECOND)
  WITH ('connector' = 'kafka', 'topic' = 'left', 'format' = 'json');
CREATE TABLE R (k INT, w BIGINT, t TIMESTAMP(3), WATERMARK FOR t AS t - INTERVAL '10' SECOND)
  WITH ('connector' = 'kafka', 'topic' = 'right', 'format' = 'json');
"""
JOIN = ("INSERT INTO J SELECT L.k, L.v, R.w FROM L {kind} JOIN R ON L.k = R.k "
        "AND R.t BETWEEN L.t - INTERVAL '5' MINUTE AND L.t + INTERVAL '5' MINUTE;")


def generate(root: str, rows: int) -> None:
    from streamjoin.connectors.topic_store import Record, TopicStore

    store = TopicStore(root)
    rng = np.random.default_rng(7)
    chunk = 50_000
    for start in range(0, rows, chunk):
        batch = []
        for topic, field in (("left", "v"), ("right", "w")):
            n = min(chunk, rows - start)
            idx = np.arange(start, start + n)
            times = idx * STEP_MS - rng.integers(0, DISORDER_MS, n) + DISORDER_MS
            stamps = np.datetime_as_string(times.astype("datetime64[ms]"), unit="ms")
            keys = rng.integers(0, KEYS, n)
            batch.append((topic, [Record(None, f'{{"k":{k},"{field}":{i},"t":"{s}"}}'.encode(), int(t))
                                  for k, i, s, t in zip(keys, idx, stamps, times)]))
        store.append(batch)


def run(*, rows: int, batches: int, only: list[str]) -> dict:
    return warmed_up(_run_variants, ["spark-native-inner", "streamjoin-inner"], rows=rows, batches=batches, only=only)


def _run_variants(*, rows: int, batches: int, only: list[str]) -> dict:
    from pyspark.sql import functions as F

    with topics_workspace(generate, rows) as (spark, work, root):
        per_batch = max(1, (2 * rows) // batches)
        results = {}

        if not only or "spark-native-inner" in only:
            raw = raw_topics(spark, root, "left,right", per_batch)

            def side(topic, field, prefix):
                value = F.from_json(F.col("value").cast("string"), f"k INT, {field} BIGINT, t TIMESTAMP")
                return (raw.where(F.col("topic") == topic).select(value.alias("v"))
                        .select(F.col("v.k").alias(f"{prefix}k"), F.col(f"v.{field}").alias(field), F.col("v.t").alias(f"{prefix}t"))
                        .withWatermark(f"{prefix}t", "10 seconds"))

            left, right = side("left", "v", "l"), side("right", "w", "r")
            joined = left.join(right, F.expr("lk = rk AND rt BETWEEN lt - INTERVAL 5 MINUTES AND lt + INTERVAL 5 MINUTES"))
            results["spark-native-inner"] = dict(time_query(joined, os.path.join(work, "ck-native"), 2 * rows), baseline=True)

        variants = {f"streamjoin-{kind.lower()}": (DDL + JOIN.format(kind=kind), per_batch) for kind in ("INNER", "LEFT")}
        results.update(time_streamjoin(spark, variants, root, work, 2 * rows, only))
        return results
