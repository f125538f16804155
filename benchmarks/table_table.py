"""Table-table join: two changelogs of N updates each over 100k keys, 5% of them tombstones, interleaved in
ingestion order; joined on their keys (INNER, FULL), and by a foreign key (INNER, LEFT: each left row points at a
random right key, ksqlDB's foreign-key join); and the left table alone aggregated by its foreign key (ksqlDB's
table aggregation: every change moves a row between two of 100k groups). Spark has no changelog join or
aggregation to compare with, so the reference (ratio 1.0) is streamjoin's own stream-table join (changelog table)
on N stream records, run in the same process. Rows/s count input changes of the tables read; state rows are the
table rows held at the peak."""
from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

import stream_table
from common import session, time_streamjoin

KEYS = 100_000
TOMBSTONE_RATE = 0.05
DDL = """
CREATE TABLE L (ID INT PRIMARY KEY, A BIGINT, F INT) WITH (kafka_topic='left', value_format='JSON');
CREATE TABLE R (ID INT PRIMARY KEY, B BIGINT) WITH (kafka_topic='right', value_format='JSON');
"""
JOIN = "CREATE TABLE J AS SELECT L.ID AS ID, L.A, R.B FROM L {kind} JOIN R ON L.ID = R.ID;"
FOREIGN_KEY_JOIN = "CREATE TABLE J AS SELECT L.ID AS ID, L.A, R.B FROM L {kind} JOIN R ON L.F = R.ID;"
AGGREGATE = "CREATE TABLE J AS SELECT L.F, COUNT(*) AS N, SUM(L.A) AS S, AVG(CAST(L.A AS DOUBLE)) AS M FROM L GROUP BY L.F;"


def generate(root: str, rows: int) -> None:
    from streamjoin.connectors.topic_store import Record, TopicStore

    store = TopicStore(root)
    rng = np.random.default_rng(5)
    chunk = 50_000
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        batch = []
        for topic, field in (("left", "A"), ("right", "B")):
            keys, pointers = rng.integers(0, KEYS, n), rng.integers(0, KEYS, n)
            deletes = rng.random(n) < TOMBSTONE_RATE
            extra = ',"F":{}' if topic == "left" else ""
            batch.append((topic, [Record(str(k).encode(), None if d else (f'{{"{field}":{i}' + extra.format(f) + "}").encode(), i)
                                  for k, f, d, i in zip(keys, pointers, deletes, range(start, start + n))]))
        store.append(batch)


def run(*, rows: int, batches: int, only: list[str]) -> dict:
    stream_table.run(rows=20_000, batches=2, only=["streamjoin-changelog"])  # warm-up
    results = {}
    if not only or "stream-table-reference" in only:
        ref = stream_table._run_variants(rows=rows, batches=batches, only=["streamjoin-changelog"])["streamjoin-changelog"]
        results["stream-table-reference"] = dict(ref, baseline=True)
    spark = session()
    work = tempfile.mkdtemp(prefix="sjbench-")
    root = os.path.join(work, "topics")
    generate(root, rows)
    per_batch = max(1, (2 * rows) // batches)
    variants = {f"streamjoin-{kind.lower()}": (DDL + JOIN.format(kind=kind), per_batch) for kind in ("INNER", "FULL")}
    variants.update({f"streamjoin-fk-{kind.lower()}": (DDL + FOREIGN_KEY_JOIN.format(kind=kind), per_batch)
                     for kind in ("INNER", "LEFT")})
    results.update(time_streamjoin(spark, variants, root, work, 2 * rows, only))
    aggregate = {"streamjoin-table-aggregate": (DDL + AGGREGATE, max(1, rows // batches))}  # reads the left table only
    results.update(time_streamjoin(spark, aggregate, root, work, rows, only))
    shutil.rmtree(work, ignore_errors=True)
    return results
