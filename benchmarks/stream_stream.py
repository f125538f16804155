"""Windowed stream-stream join: 2 x N records, 100k keys, timestamps rising with a little disorder,
WITHIN 5 MINUTES. Baseline: Spark's native inner stream-stream join (watermarks, time-range condition).
Both read the same embedded topics through the same source; both write to the no-op sink."""
from __future__ import annotations

import os

import numpy as np

from common import native_window_join, raw_topics, time_query, time_streamjoin, topics_workspace, warmed_up

KEYS = 100_000
STEP_MS = 10  # event time advances 10 ms per record and side: a 5-minute window holds ~30k records a side
DISORDER_MS = 2_000
DDL = """
CREATE STREAM L (K INT KEY, V BIGINT) WITH (kafka_topic='left', value_format='JSON');
CREATE STREAM R (K INT KEY, W BIGINT) WITH (kafka_topic='right', value_format='JSON');
"""
JOIN = ("CREATE STREAM J AS SELECT L.K AS K, L.V, R.W FROM L {kind} JOIN R WITHIN 5 MINUTES GRACE PERIOD 10 SECONDS "
        "ON L.K = R.K;")  # grace = the baseline's watermark delay: both keep state for the window only


def generate(root: str, rows: int) -> None:
    from streamjoin.connectors.topic_store import Record, TopicStore

    store = TopicStore(root)
    rng = np.random.default_rng(7)
    chunk = 50_000
    for start in range(0, rows, chunk):
        batch = []
        for topic in ("left", "right"):
            n = min(chunk, rows - start)
            idx = np.arange(start, start + n)
            times = idx * STEP_MS - rng.integers(0, DISORDER_MS, n)
            keys = rng.integers(0, KEYS, n)
            field = "V" if topic == "left" else "W"
            batch.append((topic, [Record(str(k).encode(), f'{{"{field}":{i}}}'.encode(), int(t))
                                  for k, i, t in zip(keys, idx, times)]))
        store.append(batch)


def run(*, rows: int, batches: int, only: list[str]) -> dict:
    return warmed_up(_run_variants, ["spark-native-inner", "streamjoin-inner"], rows=rows, batches=batches, only=only)


def _run_variants(*, rows: int, batches: int, only: list[str]) -> dict:
    with topics_workspace(generate, rows) as (spark, work, root):
        per_batch = max(1, (2 * rows) // batches)
        results = {}

        if not only or "spark-native-inner" in only:
            joined = native_window_join(raw_topics(spark, root, "left,right", per_batch))
            results["spark-native-inner"] = dict(time_query(joined, os.path.join(work, "ck-native"), 2 * rows), baseline=True)

        variants = {f"streamjoin-{kind.lower()}": (DDL + JOIN.format(kind=kind), per_batch) for kind in ("INNER", "LEFT", "FULL")}
        results.update(time_streamjoin(spark, variants, root, work, 2 * rows, only))
        return results
