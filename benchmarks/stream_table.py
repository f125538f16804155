"""Stream-table join: N stream records against a 100k-row table (every table row ingested first).
Baseline: Spark's native stream-static join — the stream read through the same source, the table loaded
once from a file of the same rows and cached, broadcast hash join. streamjoin variants:
- ``streamjoin-changelog``: the table is a topic, materialised by the stream-table operator (the general
  case: table changes interleave with the stream);
- ``streamjoin-static``: the table is declared on the file (SQLstream's static table), lowered to the same
  native stream-static join as the baseline.
Rows/s count stream records; every variant writes to the no-op sink."""
from __future__ import annotations

import json
import os
import shutil
import tempfile

import numpy as np

from common import session, time_query, time_streamjoin

TABLE_ROWS = 100_000
MISS_RATE = 0.05  # stream records whose key is not in the table
STREAM_DDL = "CREATE STREAM CLICKS (ID BIGINT KEY, USER_ID INT, URL STRING) WITH (kafka_topic='clicks', value_format='JSON');"
TOPIC_TABLE = "CREATE TABLE USERS (USER_ID INT PRIMARY KEY, NAME STRING, REGION STRING) WITH (kafka_topic='users', value_format='JSON');"
FILE_TABLE = "CREATE TABLE USERS (USER_ID INT PRIMARY KEY, NAME STRING, REGION STRING) WITH (path='{path}', value_format='JSON');"
JOIN = ("CREATE STREAM ENRICHED AS SELECT C.USER_ID AS USER_ID, C.ID AS ID, C.URL, U.NAME, U.REGION FROM CLICKS C "
        "LEFT JOIN USERS U ON C.USER_ID = U.USER_ID;")


def generate(root: str, table_file: str, rows: int) -> None:
    from streamjoin.connectors.topic_store import Record, TopicStore

    store = TopicStore(root)
    users = [(k, {"NAME": f"user-{k}", "REGION": f"r{k % 17}"}) for k in range(TABLE_ROWS)]
    store.append([("users", [Record(str(k).encode(), json.dumps(v).encode(), 0) for k, v in users])])
    with open(table_file, "w") as f:
        for k, v in users:
            f.write(json.dumps({"USER_ID": k, **v}) + "\n")
    rng = np.random.default_rng(11)
    chunk = 100_000
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        keys = rng.integers(0, int(TABLE_ROWS / (1 - MISS_RATE)), n)
        store.append([("clicks", [Record(str(i).encode(), f'{{"USER_ID":{k},"URL":"/p/{i % 1000}"}}'.encode(), 1 + i)
                                  for i, k in zip(range(start, start + n), keys)])])


def run(*, rows: int, batches: int, only: list[str]) -> dict:
    """Warm up on a small data set, then time every variant on the real one."""
    _run_variants(rows=20_000, batches=2, only=["spark-native-stream-static", "streamjoin-changelog"])
    return _run_variants(rows=rows, batches=batches, only=only)


def _run_variants(*, rows: int, batches: int, only: list[str]) -> dict:
    from pyspark.sql import functions as F

    spark = session()
    work = tempfile.mkdtemp(prefix="sjbench-")
    root, table_file = os.path.join(work, "topics"), os.path.join(work, "users.json")
    generate(root, table_file, rows)
    per_batch = max(1, rows // batches)
    results = {}

    if not only or "spark-native-stream-static" in only:
        users = spark.read.schema("USER_ID INT, NAME STRING, REGION STRING").json(table_file).cache()
        users.count()
        clicks = (spark.readStream.format("streamjoin_topics").option("root", root).option("topics", "clicks")
                  .option("maxRecordsPerBatch", str(per_batch)).load()
                  .select(F.col("key").cast("string").cast("bigint").alias("ID"),
                          F.from_json(F.col("value").cast("string"), "USER_ID INT, URL STRING").alias("v"), "timestamp")
                  .select("ID", "v.USER_ID", "v.URL", "timestamp"))
        joined = clicks.join(F.broadcast(users), "USER_ID", "left")
        results["spark-native-stream-static"] = dict(time_query(joined, os.path.join(work, "ck-native"), rows), baseline=True)
        users.unpersist()

    variants = {
        # the table's records come first in ingestion order: cut the batches so each holds per_batch clicks
        "streamjoin-changelog": (STREAM_DDL + TOPIC_TABLE + JOIN, max(1, (rows + TABLE_ROWS) // batches)),
        "streamjoin-static": (STREAM_DDL + FILE_TABLE.format(path=table_file) + JOIN, per_batch),
    }
    results.update(time_streamjoin(spark, variants, root, work, rows, only))
    shutil.rmtree(work, ignore_errors=True)
    return results
