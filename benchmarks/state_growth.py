"""State growth: does a micro-batch cost what the batch costs, or what the history costs?

2 x N records (default 2M a side), 1M keys, event time rising 10 ms per record and side (with up to 2 s of
disorder), cut into ``--batches`` micro-batches (default 40). Baseline: Spark's native inner stream-stream
join with a 5-minute window and 10 s watermarks. streamjoin variants:
- ``streamjoin-inner`` / ``streamjoin-left``: ``WITHIN 5 MINUTES`` with no GRACE PERIOD, so ksqlDB's default
  24 h grace: every record is kept for the whole run (the case that used to slow down every batch);
- ``streamjoin-table-left``: the left stream LEFT JOIN a changelog table whose topic gains a new key for
  every second stream record while the stream runs (1M keys at the end with the defaults);
- ``streamjoin-window-agg`` / ``streamjoin-session-agg``: ksqlDB's ``COUNT(*)`` of the left stream per key in
  1-minute tumbling windows / 5-minute sessions, EMIT CHANGES, with no GRACE PERIOD (24 h): no window closes in
  the run, so the open windows grow to ~N (sessions to ~1M), against Spark's native windowed count with a
  24-hour watermark (``spark-native-window-agg``, whose windows stay in its state too).
Per variant, besides the usual fields: ``batch_ms`` (every batch's duration, in order) and
``latency_growth`` = median of the last 10 batches / median of batches 2-11 (1.0: flat)."""
from __future__ import annotations

import os

import numpy as np

from common import native_window_join, raw_topics, time_query, time_streamjoin, topics_workspace, warmed_up

DEFAULT_ROWS, DEFAULT_BATCHES = 2_000_000, 40  # the defaults of ``run.py state-growth``
KEYS = 1_000_000
STEP_MS = 10
DISORDER_MS = 2_000
CHUNK = 10_000  # records of each topic appended together: ingestion interleaves the topics this finely
DDL = """
CREATE STREAM L (K INT KEY, V BIGINT) WITH (kafka_topic='left', value_format='JSON');
CREATE STREAM R (K INT KEY, W BIGINT) WITH (kafka_topic='right', value_format='JSON');
CREATE TABLE T (K INT PRIMARY KEY, N BIGINT) WITH (kafka_topic='dim', value_format='JSON');
"""
WINDOWED = "CREATE STREAM J AS SELECT L.K AS K, L.V, R.W FROM L {kind} JOIN R WITHIN 5 MINUTES ON L.K = R.K;"
TABLE = "CREATE STREAM E AS SELECT L.K AS K, L.V, T.N FROM L LEFT JOIN T ON L.K = T.K;"
AGGREGATES = {"streamjoin-window-agg": "CREATE TABLE A AS SELECT K, COUNT(*) AS N FROM L WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY K;",
              "streamjoin-session-agg": "CREATE TABLE S AS SELECT K, COUNT(*) AS N FROM L WINDOW SESSION (5 MINUTES) GROUP BY K;"}


def generate(root: str, rows: int) -> None:
    from streamjoin.connectors.topic_store import Record, TopicStore

    store = TopicStore(root)
    rng = np.random.default_rng(5)
    for start in range(0, rows, CHUNK):
        n = min(CHUNK, rows - start)
        idx = np.arange(start, start + n)
        batch = []
        for topic, field in (("left", "V"), ("right", "W")):
            times = idx * STEP_MS - rng.integers(0, DISORDER_MS, n)
            keys = rng.integers(0, KEYS, n)
            batch.append((topic, [Record(str(k).encode(), f'{{"{field}":{i}}}'.encode(), int(t))
                                  for k, i, t in zip(keys, idx, times)]))
        dim = idx[idx % 2 == 0] // 2  # a new table key for every second stream record
        batch.append(("dim", [Record(str(k).encode(), f'{{"N":{k}}}'.encode(), int(k * 2 * STEP_MS)) for k in dim]))
        store.append(batch)


def run(*, rows: int, batches: int, only: list[str]) -> dict:
    return warmed_up(_run_variants, ["spark-native-inner", "streamjoin-inner"], rows=rows, batches=batches, only=only)


def _run_variants(*, rows: int, batches: int, only: list[str]) -> dict:
    with topics_workspace(generate, rows) as (spark, work, root):
        results = {}
        if not only or "spark-native-inner" in only:
            joined = native_window_join(raw_topics(spark, root, "left,right", max(1, 2 * rows // batches)))
            results["spark-native-inner"] = dict(time_query(joined, os.path.join(work, "ck-native"), 2 * rows), baseline=True)

        variants = {f"streamjoin-{kind.lower()}": (DDL + WINDOWED.format(kind=kind), max(1, 2 * rows // batches))
                    for kind in ("INNER", "LEFT")}
        results.update(time_streamjoin(spark, variants, root, work, 2 * rows, only))
        table_rows = rows + (rows + 1) // 2
        results.update(time_streamjoin(spark, {"streamjoin-table-left": (DDL + TABLE, max(1, table_rows // batches))},
                                       root, work, table_rows, only))
        if not only or "spark-native-window-agg" in only:
            results["spark-native-window-agg"] = dict(time_query(native_window_count(raw_topics(
                spark, root, "left", max(1, rows // batches))), os.path.join(work, "ck-native-agg"), rows), baseline=True)
        aggregates = time_streamjoin(spark, {name: (DDL + sql, max(1, rows // batches)) for name, sql in AGGREGATES.items()},
                                     root, work, rows, only)
        results.update({name: dict(r, compared_with="spark-native-window-agg") for name, r in aggregates.items()})
        return results


def native_window_count(raw):
    """Spark's native count of the ``left`` topic's records per key in 1-minute windows, under a 24-hour watermark."""
    from pyspark.sql import functions as F

    rows = raw.select(F.col("key").cast("string").cast("int").alias("k"), F.timestamp_millis("timestamp").alias("ts"))
    return rows.withWatermark("ts", "24 hours").groupBy(F.window("ts", "1 minute"), "k").count()
