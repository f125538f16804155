"""Spark sink into a Kafka topic that holds each result exactly once, even after a crash and restart.

A ``foreachBatch`` function, like the embedded sink: each micro-batch is sorted by ``(seq, sub)`` (the
ingestion order of the records that produced it) and produced with an idempotent producer — in order and
without duplicates per partition — keys chosen by the Java clients' murmur2 partitioner. Every record
carries three headers: the writer (``runtime.batch_sink.QueryRun.writer``), the micro-batch id and the record's index in the batch.

Exactly once without transactions (the test broker, Tansu, does not hide aborted transactions from
readers): Spark re-runs only the last micro-batch after a crash, and re-runs it with the same input and
state, so it yields the same records in the same order. When a writer starts, it reads back the tail of
each partition of its topic to find the last batch it wrote and which of that batch's records arrived.
A re-run of that batch produces only the records that are missing; an older batch is not written again.
(Its rows are still computed, into Spark's no-op sink, so the batch's state stores commit.)
"""
from __future__ import annotations

from typing import Callable, Optional

from pyspark.sql import DataFrame

from .embedded_sink import ORDER_COLUMNS
from .kafka_client import BrokerError, admin, consumer, high_watermarks, producer, stamp_headers

WRITER_HEADER = "streamjoin.writer"
BATCH_HEADER = "streamjoin.batch"
INDEX_HEADER = "streamjoin.index"
TAIL_WINDOW = 1000


class WrittenSoFar:
    """The last micro-batch a writer wrote to a topic, and the indices of its records that arrived."""

    def __init__(self, bootstrap: str, topic: str, writer_id: str):
        self.bootstrap, self.topic, self.writer = bootstrap, topic, writer_id.encode()
        self.batch: Optional[int] = None
        self.indices: set[int] = set()

    def load(self) -> None:
        meta = admin(self.bootstrap).list_topics(topic=self.topic, timeout=10)
        partitions = sorted(meta.topics[self.topic].partitions) if self.topic in meta.topics else []
        client = consumer(self.bootstrap)
        try:
            ends = high_watermarks(client, {(self.topic, p): 0 for p in partitions})
            found = [self._tail(client, p, end) for (_, p), end in ends.items()]
        finally:
            client.close()
        batches = [b for b, _ in found if b is not None]
        self.batch = max(batches) if batches else -1
        self.indices = {i for b, idx in found if b == self.batch for i in idx}

    def _tail(self, client, partition: int, end: int) -> tuple[Optional[int], set[int]]:
        """This writer's last batch in one partition and its indices there, reading back from ``end``."""
        last, indices, upto, window = None, set(), end, TAIL_WINDOW
        while upto > 0:
            first = max(0, upto - window)
            older = False
            for batch, index in self._writer_records(client, partition, first, upto):
                if last is None or batch > last:
                    last, indices = batch, set()
                if batch == last:
                    indices.add(index)
                else:
                    older = True
            if older or (last is not None and first == 0):
                break
            upto, window = first, window * 2
        return last, indices

    def _writer_records(self, client, partition: int, first: int, upto: int):
        from confluent_kafka import TopicPartition

        from .kafka_client import _check

        client.assign([TopicPartition(self.topic, partition, first)])
        try:
            while True:
                messages = client.consume(max(1, min(10000, upto - first)), 5.0)
                if not messages:
                    raise BrokerError(f"{self.topic}[{partition}]: no answer while reading back offsets {first}-{upto}")
                for msg in messages:
                    if msg.error() is not None:
                        _check(msg.error())
                        return
                    if msg.offset() >= upto:
                        return
                    headers = dict(msg.headers() or ())
                    if headers.get(WRITER_HEADER) == self.writer:
                        yield int(headers[BATCH_HEADER]), int(headers[INDEX_HEADER])
                    if msg.offset() >= upto - 1:
                        return
        finally:
            client.unassign()

    def wrote(self, batch_id: int, count: int) -> None:
        self.batch, self.indices = batch_id, set(range(count))


def kafka_writer(bootstrap: str, topic: str, writer_id: Callable[[], str]) -> Callable[[DataFrame, int], None]:
    """A ``foreachBatch`` function writing each micro-batch to ``topic`` exactly once."""
    clients: list = []  # the producer, made on first use and released by close()
    failures: list = []  # errors of records the broker did not take
    written: list[WrittenSoFar] = []

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        if not written:
            written.append(WrittenSoFar(bootstrap, topic, writer_id()))
            written[0].load()
        written_so_far = written[0]
        if batch_id < written_so_far.batch:
            batch.write.format("noop").mode("overwrite").save()
            return
        present = written_so_far.indices if batch_id == written_so_far.batch else set()
        if not clients:  # made first: it connects while the batch is computed
            # delivery reports only for failures: a callback per record costs as much as the send
            clients.append(producer(bootstrap, **{"delivery.report.only.error": True,
                                                  "on_delivery": lambda err, _msg: failures.append(err.str())}))
        out = clients[0]
        order = [c for c in ORDER_COLUMNS if c in batch.columns]
        rows = batch.select("key", "value", "timestamp", *order).toArrow()
        if order:
            rows = rows.sort_by([(c, "ascending") for c in order])
        failures.clear()
        writer_value, batch_value = written_so_far.writer, str(batch_id).encode()
        keys, values, stamps = (rows.column(n).to_pylist() for n in ("key", "value", "timestamp"))
        produce = out.produce
        for index, (key, value, stamp) in enumerate(zip(keys, values, stamps)):
            if index in present:
                continue
            # headers as a dict, arguments by position: ~320k calls/s here, against ~210k with keywords and a list
            headers = {WRITER_HEADER: writer_value, BATCH_HEADER: batch_value, INDEX_HEADER: b"%d" % index}
            if not stamp:
                stamp, headers = stamp_headers(0, list(headers.items()))
            while True:
                try:  # topic, value, key, partition (-1: the partitioner's), callback, on_delivery, timestamp, headers
                    produce(topic, value, key, -1, None, None, stamp, headers)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    out.poll(0.05)
        if out.flush(120) or failures:
            raise BrokerError(f"micro-batch {batch_id} not fully delivered to {topic}: {failures[:3] or 'flush timed out'}")
        written_so_far.wrote(batch_id, len(keys))
        write_batch.rows_written += len(keys)

    def close() -> None:
        """Release the producer (an idle client keeps asking the broker about its topic, even once deleted)."""
        if clients:
            clients.pop().flush(30)

    write_batch.rows_written = 0
    write_batch.close = close
    return write_batch
