"""Lookup join: N stream records over 100k distinct keys against a 1M-row table in PostgreSQL (started here,
on 127.0.0.1). Baseline: Spark's native stream-static join — the table read once into a DataFrame through
streamjoin's database source, cached, broadcast. streamjoin variants (Flink's lookup join, `FOR SYSTEM_TIME AS
OF` the stream's PROCTIME()):
- ``streamjoin-lookup-partial``: 'lookup.cache' = 'PARTIAL' (200k rows, 1 h after write);
- ``streamjoin-lookup-none``: no cache: every micro-batch asks the database for its keys.
``round_trips_per_batch`` (the JSON) is each micro-batch's number of database queries; the target is at most
its number of partitions. Rows/s count stream records; every variant writes to the no-op sink."""
from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

from common import session, streamjoin_query, time_query

TABLE_ROWS = 1_000_000
DISTINCT_KEYS = 100_000
STREAM = ("CREATE TABLE clicks (id BIGINT, user_id INT, url STRING, proc AS PROCTIME()) "
          "WITH ('connector' = 'kafka', 'topic' = 'clicks', 'format' = 'json');")
TABLE = ("CREATE TABLE users (user_id INT, name STRING, region STRING, PRIMARY KEY (user_id) NOT ENFORCED) WITH "
         "('connector' = 'jdbc', 'url' = '{url}', 'table-name' = 'users', 'username' = '{user}', 'password' = '{password}'{cache});")
JOIN = ("CREATE TABLE enriched (id BIGINT, url STRING, name STRING, region STRING) WITH ('connector' = 'kafka', "
        "'topic' = 'enriched', 'format' = 'json');\n"
        "INSERT INTO enriched SELECT c.id, c.url, u.name, u.region FROM clicks AS c "
        "LEFT JOIN users FOR SYSTEM_TIME AS OF c.proc AS u ON c.user_id = u.user_id;")
PARTIAL = (", 'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.max-rows' = '200000', "
           "'lookup.partial-cache.expire-after-write' = '1 h'")


def generate(root: str, rows: int) -> None:
    from streamjoin.connectors.topic_store import Record, TopicStore

    store = TopicStore(root)
    rng = np.random.default_rng(7)
    keys = rng.choice(TABLE_ROWS, DISTINCT_KEYS, replace=False)
    chunk = 100_000
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        picked = keys[rng.integers(0, DISTINCT_KEYS, n)]
        store.append([("clicks", [Record(str(i).encode(), f'{{"id":{i},"user_id":{k},"url":"/p/{i % 1000}"}}'.encode(), 1 + i)
                                  for i, k in zip(range(start, start + n), picked)])])


def run(*, rows: int, batches: int, only: list[str]) -> dict:
    from streamjoin.connectors.local_postgres import local_postgres

    with local_postgres() as pg:
        import adbc_driver_postgresql.dbapi as driver

        with driver.connect(pg.uri) as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE users (user_id INTEGER PRIMARY KEY, name TEXT, region TEXT)")
            cur.execute(f"INSERT INTO users SELECT k, 'user-' || k, 'r' || (k % 17) FROM generate_series(0, {TABLE_ROWS - 1}) k")
            cur.execute("ANALYZE users")
            conn.commit()
        _run_variants(pg, rows=20_000, batches=2, only=["spark-native-stream-static", "streamjoin-lookup-partial"])
        return _run_variants(pg, rows=rows, batches=batches, only=only)


def _run_variants(pg, *, rows: int, batches: int, only: list[str]) -> dict:
    from pyspark.sql import functions as F

    from streamjoin.lower.decode import read_database

    spark = session()
    work = tempfile.mkdtemp(prefix="sjbench-")
    root = os.path.join(work, "topics")
    generate(root, rows)
    per_batch = max(1, rows // batches)
    results = {}
    table = dict(url=pg.jdbc_url, user=pg.user, password=pg.password)

    if not only or "spark-native-stream-static" in only:
        from streamjoin.plan.catalog import DatabaseTable

        users = read_database(spark, DatabaseTable(pg.jdbc_url, "users", pg.user, pg.password),
                              [("user_id", "int"), ("name", "string"), ("region", "string")]).cache()
        users.count()
        clicks = (spark.readStream.format("streamjoin_topics").option("root", root).option("topics", "clicks")
                  .option("maxRecordsPerBatch", str(per_batch)).load()
                  .select(F.from_json(F.col("value").cast("string"), "id BIGINT, user_id INT, url STRING").alias("v"))
                  .select("v.*"))
        joined = clicks.join(F.broadcast(users), "user_id", "left")
        results["spark-native-stream-static"] = dict(time_query(joined, os.path.join(work, "ck-native"), rows), baseline=True)
        users.unpersist()

    for name, cache in (("streamjoin-lookup-partial", PARTIAL), ("streamjoin-lookup-none", "")):
        if not only or name in only:
            df = streamjoin_query(spark, STREAM + TABLE.format(cache=cache, **table) + JOIN, root, per_batch)
            results[name] = time_query(df, os.path.join(work, f"ck-{name}"), rows)
            results[name]["round_trips_per_batch"] = results[name]["observed_per_batch"].get("lookup_round_trips")
    shutil.rmtree(work, ignore_errors=True)
    return results
