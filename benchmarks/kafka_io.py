"""kafka-io: moving JSON records between Spark and a Kafka-protocol broker (Tansu, started on 127.0.0.1).

Data: ``rows`` JSON records (id, name, amount, time) on a topic of two partitions.

- baseline ``client-read`` / ``client-write``: what one Python confluent-kafka client moves on its own
  (a consume loop into lists; a produce loop) — the ceiling a Python reader or writer can reach here;
- ``source-read``: streamjoin's Kafka source into Spark's no-op sink (offsets, fetch, Arrow rows);
- ``query-read``: a ``SELECT *`` query as streamjoin runs it (source, JSON decode, dead-letter check,
  encode) into the no-op sink;
- ``sink-write``: streamjoin's exactly-once Kafka sink alone (headers, ordering by ingestion order,
  murmur2 partitioning, flush per micro-batch), fed the raw records from the embedded store, writing from
  the driver (as on a ``local`` master); ``sink-write-executors``: the same from the executors (as on a
  cluster);
- ``query-write``: the ``SELECT *`` query reading the embedded store and writing to Kafka through it.

The source and the sink are each warmed up first on as many records of another topic, cut the same way
(Spark's Python workers, the JVM's code paths): the figures are steady-state rates. A warm-up of 200k
records was too short: the JVM was still compiling the scan's code paths through the timed run, and
three 1M-record source runs in a row read at 130k, 146k and 153k rows/s. Ratios are to the client-read
baseline; compare the writes with client-write.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

from pyspark.sql import functions as F

from common import raw_topics, session, streamjoin_query, time_query

SQL = """CREATE STREAM bench_in (ID BIGINT KEY, NAME STRING, AMOUNT DOUBLE, T TIMESTAMP)
  WITH (kafka_topic='bench_in', value_format='JSON', partitions=2);
CREATE STREAM bench_out AS SELECT * FROM bench_in;"""


def _records(rows: int):
    for i in range(rows):
        value = {"NAME": f"name-{i % 997}", "AMOUNT": (i % 10_000) / 100, "T": "2024-01-01 00:00:00.000"}
        yield str(i).encode(), json.dumps(value).encode(), 1_700_000_000_000 + i


def _produce(bootstrap: str, topic: str, rows: int) -> float:
    from streamjoin.connectors.kafka_client import producer

    out = producer(bootstrap)
    records = list(_records(rows))  # made before the clock starts: the baseline times the client alone
    started = time.monotonic()
    for key, value, stamp in records:
        while True:
            try:
                out.produce(topic, key=key, value=value, timestamp=stamp)
                break
            except BufferError:
                out.poll(0.05)
    out.flush(120)
    return rows / (time.monotonic() - started)


def _consume(bootstrap: str, topic: str, rows: int) -> float:
    from confluent_kafka import TopicPartition

    from streamjoin.connectors.kafka_client import consumer

    client = consumer(bootstrap, **{"queued.min.messages": 200000})
    client.assign([TopicPartition(topic, p, 0) for p in range(2)])
    keys, values, stamps, seen, eof = [], [], [], 0, 0
    started = time.monotonic()
    while seen < rows and eof < 2:
        for msg in client.consume(10000, 1.0):
            if msg.error() is not None:
                eof += 1
                continue
            keys.append(msg.key())
            values.append(msg.value())
            stamps.append(msg.timestamp()[1])
            seen += 1
    elapsed = time.monotonic() - started
    client.close()
    return seen / elapsed


def _client_result(rows_per_s: float, rows: int, baseline: bool = False) -> dict:
    return {"rows_per_s": round(rows_per_s, 1), "seconds": round(rows / rows_per_s, 2), "batches": 1,
            "batch_ms_median": 0, "batch_ms_max": 0, "state_rows_max": 0, "baseline": baseline}


def run(rows: int, batches: int, only: list[str]) -> dict:
    from streamjoin.connectors.kafka_client import KafkaTopics
    from streamjoin.connectors.kafka_sink import kafka_writer
    from streamjoin.connectors.local_broker import local_broker
    from streamjoin.connectors.topic_store import Record, TopicStore

    per_batch = max(1, rows // batches)
    work = tempfile.mkdtemp(prefix="sjbench-")
    results: dict = {}
    wanted = lambda name: not only or name in only  # noqa: E731
    try:
        with local_broker() as bootstrap:
            topics = KafkaTopics(bootstrap)
            topics.create("bench_in", 2)
            topics.create("client_out", 2)
            write_rate = _produce(bootstrap, "client_out", rows)
            _produce(bootstrap, "bench_in", rows)
            results["client-read"] = _client_result(_consume(bootstrap, "bench_in", rows), rows, baseline=True)
            results["client-write"] = _client_result(write_rate, rows)
            spark = session()

            def source(topic):
                return (spark.readStream.format("streamjoin_kafka").option("bootstrap", bootstrap)
                        .option("topics", topic).option("ordered", "false")
                        .option("maxRecordsPerBatch", str(per_batch)).load())

            # steady state, not start-up: a run of the same size on another topic first (module docstring)
            topics.create("warm_up", 2)
            _produce(bootstrap, "warm_up", rows)
            time_query(source("warm_up"), os.path.join(work, "ck-warm-up"), rows)
            if wanted("source-read"):
                results["source-read"] = time_query(source("bench_in"), os.path.join(work, "ck-source"), rows)
            if wanted("query-read"):
                df = streamjoin_query(spark, SQL, "", per_batch, bootstrap=bootstrap)
                results["query-read"] = time_query(df, os.path.join(work, "ck-query-read"), rows)
            root = os.path.join(work, "topics")
            for topic in ("bench_in", "warm_up"):
                TopicStore(root).append([(topic, [Record(k, v, t) for k, v, t in _records(rows)])], partitions=2)

            def raw(topic):
                return raw_topics(spark, root, topic, per_batch).select(
                    "key", "value", "timestamp", "seq", F.lit(0).cast("bigint").alias("sub"))

            def write(name, df, count):
                topic, checkpoint = name.upper().replace("-", "_"), os.path.join(work, f"ck-{name}")
                topics.create(topic, 2)
                writer = kafka_writer(bootstrap, topic, lambda: f"{topic}@{checkpoint}",
                                      from_executors=name.endswith("executors"))
                result = time_query(df, checkpoint, count, sink=writer)
                result["records_on_topic"] = sum(topics.end_offsets([topic]).values())
                writer.close()
                return result

            write("warm-up-write", raw("warm_up"), rows)  # not reported
            write("warm-up-write-executors", raw("warm_up"), rows)
            writes = {
                "sink-write": lambda: raw("bench_in"),
                "sink-write-executors": lambda: raw("bench_in"),
                "query-write": lambda: streamjoin_query(spark, SQL, root, per_batch),
            }
            for name, make in writes.items():
                if wanted(name):
                    results[name] = write(name, make(), rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results
