"""SQLstream OVER-window join: 2 x N records over 10k tickers in rowtime order, a 1-minute RANGE window on
each side. Baseline: Spark's native stream-stream join with the same time-range condition
(``r.t BETWEEN l.t - 1 min AND l.t + 1 min``) and zero-delay watermarks on the record timestamps. Both
read the same embedded topics through the same source and write to the no-op sink. A ROWS variant
(``ROWS 100 PRECEDING`` on each side, which needs one global order) is reported separately."""
from __future__ import annotations

import os

import numpy as np

from common import raw_topics, time_query, time_streamjoin, topics_workspace, warmed_up

TICKERS = 10_000
STEP_MS = 10  # rowtime advances 10 ms per record and side: a 1-minute window holds ~6000 rows a side
DDL = """
CREATE STREAM orders (ticker INT, quantity BIGINT) WITH (kafka_topic='left', value_format='JSON');
CREATE STREAM prices (ticker INT, price BIGINT) WITH (kafka_topic='right', value_format='JSON');
"""
JOIN = ("CREATE STREAM j AS SELECT STREAM ROWTIME, o.ticker, o.quantity, p.price FROM orders OVER ({frame}) AS o "
        "JOIN prices OVER ({frame}) AS p ON o.ticker = p.ticker;")
RANGE, ROWS = "RANGE INTERVAL '1' MINUTE PRECEDING", "ROWS 100 PRECEDING"


def generate(root: str, rows: int) -> None:
    from streamjoin.connectors.topic_store import Record, TopicStore

    store = TopicStore(root)
    rng = np.random.default_rng(11)
    chunk = 50_000
    for start in range(0, rows, chunk):
        batch = []
        for topic, field, offset in (("left", "QUANTITY", 0), ("right", "PRICE", STEP_MS // 2)):
            n = min(chunk, rows - start)
            idx = np.arange(start, start + n)
            tickers = rng.integers(0, TICKERS, n)
            batch.append((topic, [Record(None, f'{{"TICKER":{k},"{field}":{i}}}'.encode(), int(i * STEP_MS + offset))
                                  for k, i in zip(tickers, idx)]))
        store.append(batch)


def run(*, rows: int, batches: int, only: list[str]) -> dict:
    return warmed_up(_run_variants, ["spark-native-range", "streamjoin-range"], rows=rows, batches=batches, only=only)


def _run_variants(*, rows: int, batches: int, only: list[str]) -> dict:
    from pyspark.sql import functions as F

    with topics_workspace(generate, rows) as (spark, work, root):
        per_batch = max(1, (2 * rows) // batches)
        results = {}

        if not only or "spark-native-range" in only:
            raw = raw_topics(spark, root, "left,right", per_batch)

            def side(topic, field, prefix):
                value = F.from_json(F.col("value").cast("string"), f"TICKER INT, {field} BIGINT")
                return (raw.where(F.col("topic") == topic)
                        .select(value.alias("v"), (F.col("timestamp") / 1000).cast("timestamp").alias(f"{prefix}t"))
                        .select(F.col("v.TICKER").alias(f"{prefix}k"), F.col(f"v.{field}").alias(field), f"{prefix}t")
                        .withWatermark(f"{prefix}t", "0 seconds"))

            left, right = side("left", "QUANTITY", "l"), side("right", "PRICE", "r")
            joined = left.join(right, F.expr("lk = rk AND rt BETWEEN lt - INTERVAL 1 MINUTE AND lt + INTERVAL 1 MINUTE"))
            results["spark-native-range"] = dict(time_query(joined, os.path.join(work, "ck-native"), 2 * rows), baseline=True)

        variants = {"streamjoin-range": (DDL + JOIN.format(frame=RANGE), per_batch),
                    "streamjoin-rows": (DDL + JOIN.format(frame=ROWS), per_batch)}
        results.update(time_streamjoin(spark, variants, root, work, 2 * rows, only))
        return results
