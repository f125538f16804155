"""Flink regular join: N orders (an append-only stream) joined with a customers table of 100k keys (an
upsert table: N/10 changes, so most keys change once), no time bounds, interleaved in ingestion order.
Baseline: Spark's native stream-stream inner join of the same two topics without watermarks (both sides
kept for ever: Spark's nearest to an unbounded join; it cannot retract an updated customer, so it emits
more pairs, not fewer). Rows/s count orders and customer changes; state rows are the rows held at the
peak. Apache Flink 2.3 ran a 1M ⋈ 100k regular join at ~199k rows/s on this machine (see the README)."""
from __future__ import annotations

import os

import numpy as np

from common import raw_topics, time_query, time_streamjoin, topics_workspace, warmed_up

KEYS = 100_000
DDL = """
CREATE TABLE Orders (id BIGINT, cid INT, amount BIGINT) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
CREATE TABLE Customers (cid INT, name STRING, PRIMARY KEY (cid) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'customers', 'key.format' = 'json', 'value.format' = 'json');
"""
JOIN = "INSERT INTO J SELECT o.id, o.amount, c.name FROM Orders AS o {kind} JOIN Customers AS c ON o.cid = c.cid;"


def generate(root: str, rows: int) -> None:
    from streamjoin.connectors.topic_store import Record, TopicStore

    store = TopicStore(root)
    rng = np.random.default_rng(3)
    chunk = 50_000
    customers = max(1, rows // 10)
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        orders = [Record(None, f'{{"id":{i},"cid":{c},"amount":{i % 97}}}'.encode(), i)
                  for i, c in zip(range(start, start + n), rng.integers(0, KEYS, n))]
        first = start * customers // rows
        last = (start + n) * customers // rows
        changes = [Record(f'{{"cid":{c}}}'.encode(), f'{{"cid":{c},"name":"n{i}"}}'.encode(), i * rows // customers)
                   for i, c in zip(range(first, last), np.arange(first, last) % KEYS)]  # among the orders, by time
        store.append([("customers", changes), ("orders", orders)])


def run(*, rows: int, batches: int, only: list[str]) -> dict:
    return warmed_up(_run_variants, ["spark-native-inner", "streamjoin-inner"], rows=rows, batches=batches, only=only)


def _run_variants(*, rows: int, batches: int, only: list[str]) -> dict:
    from pyspark.sql import functions as F

    with topics_workspace(generate, rows) as (spark, work, root):
        input_rows = rows + rows // 10
        per_batch = max(1, input_rows // batches)
        results = {}
        if not only or "spark-native-inner" in only:
            raw = raw_topics(spark, root, "orders,customers", per_batch)
            orders = raw.where(F.col("topic") == "orders").select(
                F.from_json(F.col("value").cast("string"), "id BIGINT, cid INT, amount BIGINT").alias("o")).select("o.*")
            customers = raw.where(F.col("topic") == "customers").select(
                F.from_json(F.col("value").cast("string"), "cid INT, name STRING").alias("c")).select(
                F.col("c.cid").alias("ccid"), "c.name")
            joined = orders.join(customers, F.expr("cid = ccid")).select("id", "amount", "name")
            results["spark-native-inner"] = dict(time_query(joined, os.path.join(work, "ck-native"), input_rows), baseline=True)
        variants = {f"streamjoin-{kind.lower()}": (DDL + JOIN.format(kind=kind), per_batch) for kind in ("INNER", "LEFT")}
        results.update(time_streamjoin(spark, variants, root, work, input_rows, only))
        return results
