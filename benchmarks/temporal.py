"""Flink event-time temporal join: N orders against a versioned table of 100k keys x 10 versions (N
version records), interleaved by event time, a 10-second watermark delay. Spark has no temporal join, so
the reference (ratio 1.0) is streamjoin's processing-time temporal join (the stream-table operator) on the
same data; rows/s count orders and versions, state rows are versions and waiting orders at the peak."""
from __future__ import annotations

import numpy as np

from common import time_streamjoin, topics_workspace, warmed_up

KEYS = 100_000
VERSIONS = 10
STEP_MS = 5
DDL = """
CREATE TABLE O (id BIGINT, k INT, t TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR t AS t - INTERVAL '10' SECOND)
  WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
CREATE TABLE V (k INT, price BIGINT, t TIMESTAMP(3), PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR t AS t - INTERVAL '10' SECOND)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'versions', 'key.format' = 'json', 'value.format' = 'json');
"""
JOIN = "INSERT INTO J SELECT o.id, o.k, v.price FROM O AS o JOIN V FOR SYSTEM_TIME AS OF o.{time} AS v ON o.k = v.k;"


def generate(root: str, rows: int) -> None:
    """``rows`` orders and ``rows`` versions (each key's versions spread over the whole time range)."""
    from streamjoin.connectors.topic_store import Record, TopicStore

    store = TopicStore(root)
    rng = np.random.default_rng(11)
    keys_in_use = max(1, min(KEYS, rows // VERSIONS))
    version_keys = np.tile(np.arange(keys_in_use), rows // keys_in_use + 1)[:rows]
    rng.shuffle(version_keys)  # any key's turn comes up again about every rows / VERSIONS versions
    chunk = 50_000
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        idx = np.arange(start, start + n)
        times = idx * STEP_MS
        stamps = np.datetime_as_string(times.astype("datetime64[ms]"), unit="ms")
        order_keys = rng.integers(0, keys_in_use, n)
        orders = [Record(None, f'{{"id":{i},"k":{k},"t":"{s}"}}'.encode(), int(t))
                  for i, k, s, t in zip(idx, order_keys, stamps, times)]
        versions = [Record(f'{{"k":{k}}}'.encode(), f'{{"k":{k},"price":{i},"t":"{s}"}}'.encode(), int(t))
                    for i, k, s, t in zip(idx, version_keys[start:start + n], stamps, times)]
        store.append([("versions", versions), ("orders", orders)])


def run(*, rows: int, batches: int, only: list[str]) -> dict:
    return warmed_up(_run_variants, ["streamjoin-event-time"], rows=rows, batches=batches, only=only)


def _run_variants(*, rows: int, batches: int, only: list[str]) -> dict:
    with topics_workspace(generate, rows) as (spark, work, root):
        per_batch = max(1, (2 * rows) // batches)
        variants = {"streamjoin-proctime-reference": (DDL + JOIN.format(time="pt"), per_batch),
                    "streamjoin-event-time": (DDL + JOIN.format(time="t"), per_batch)}
        results = time_streamjoin(spark, variants, root, work, 2 * rows, only)
        if "streamjoin-proctime-reference" in results:
            results["streamjoin-proctime-reference"]["baseline"] = True
        return results
