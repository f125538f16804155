"""Spark sink into a Kafka topic that holds each result exactly once, even after a crash and restart.

A ``foreachBatch`` function. Each record's partition is the one a Java producer would pick for its key
(``kafka_partitioner``); in each partition the records stand in ``(seq, sub)`` order (the ingestion order of
the records that produced them), however the batch's tasks ran, sent by an idempotent producer. Every record
carries three headers: the writer (``runtime.batch_sink.QueryRun.writer``), the micro-batch id and the record's
index among the batch's records in its partition.

Where the records are sent from is the caller's choice (``from_executors``). On a cluster, from the executors:
the batch is spread over ``min(partitions, Spark's parallelism)`` tasks by partition, every partition in one
task, sorted there, and produced by the producer the task's Python worker keeps for its next task; the driver
only learns how many records each partition took. On one machine, from the driver: the batch is collected as
Arrow and produced by the query's own producer. A Python task costs a fixed ~70 ms per micro-batch here
(one-record batches: the sink's job took ~160 ms from the executors against ~85 ms from the driver), and the
driver of a ``local`` master is its executors' process anyway.

Exactly once without transactions (the test broker, Tansu, does not hide aborted transactions from
readers): Spark re-runs only the last micro-batch after a crash, and re-runs it with the same input and
state, so it yields the same records in the same partitions and order. When a writer starts, it reads back
the tail of each partition of its topic to find the last batch it wrote there and which of that batch's
indices arrived; a re-run of that batch produces only the missing ones, and an older batch is not written
again (its rows are still computed, into Spark's no-op sink, so the batch's state stores commit). A task
that Spark runs again (an executor lost mid-batch) reads back its own partitions the same way first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Container, Iterator, Optional

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import IntegerType, StructField, StructType

from .embedded_sink import ORDER_COLUMNS
from .kafka_client import BrokerError, admin, consumer, high_watermarks, producer, registered_properties, \
    stamp_headers, use_client_properties
from .kafka_partitioner import partitions_of

WRITER_HEADER = "streamjoin.writer"
BATCH_HEADER = "streamjoin.batch"
INDEX_HEADER = "streamjoin.index"
TAIL_WINDOW = 1000
PARTITION = "__partition"


class WrittenSoFar:
    """The last micro-batch a writer wrote to each partition of a topic, and the indices of its records there."""

    def __init__(self, bootstrap: str, topic: str, writer_id: str):
        self.bootstrap, self.topic, self.writer = bootstrap, topic, writer_id.encode()
        self.partitions = 0  # the topic's, when loaded
        self.last: dict[int, tuple[int, Container[int]]] = {}  # partition -> (batch, its indices there)

    @property
    def batch(self) -> int:
        """The last batch the writer wrote to any partition (-1: none)."""
        return max((batch for batch, _ in self.last.values()), default=-1)

    @property
    def indices(self) -> set[int]:
        """The indices of ``batch``'s records that arrived, over all partitions (for a one-partition topic)."""
        return {i for batch, indices in self.last.values() if batch == self.batch for i in indices}

    def present(self, batch_id: int) -> dict[int, Container[int]]:
        """The indices of ``batch_id``'s records already in each partition."""
        return {p: indices for p, (batch, indices) in self.last.items() if batch == batch_id}

    def load(self, only: Optional[list[int]] = None) -> None:
        """Read back the tails of the topic's partitions (or of the partitions ``only``)."""
        meta = admin(self.bootstrap).list_topics(topic=self.topic, timeout=10)
        partitions = sorted(meta.topics[self.topic].partitions) if self.topic in meta.topics else []
        self.partitions = len(partitions)
        client = consumer(self.bootstrap)
        try:
            wanted = [p for p in partitions if only is None or p in only]
            ends = high_watermarks(client, {(self.topic, p): 0 for p in wanted})
            found = {p: self._tail(client, p, end) for (_, p), end in ends.items()}
        finally:
            client.close()
        self.last = {p: (batch, indices) for p, (batch, indices) in found.items() if batch is not None}

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

    def wrote(self, batch_id: int, counts: dict[int, int]) -> None:
        """The writer wrote all of batch ``batch_id``: ``counts[p]`` records to partition ``p``."""
        self.last.update({p: (batch_id, range(count)) for p, count in counts.items()})


def kafka_writer(bootstrap: str, topic: str, writer_id: Callable[[], str], *,
                 from_executors: bool) -> Callable[[DataFrame, int], None]:
    """A ``foreachBatch`` function writing each micro-batch to ``topic`` exactly once (module docstring), from the
    executors or, ``from_executors`` false (one machine), from the driver."""
    written: list[WrittenSoFar] = []
    clients: list = []  # the driver's producer and its failures, made on first use and released by close()

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        if not written:
            written.append(WrittenSoFar(bootstrap, topic, writer_id()))
            written[0].load()
        so_far = written[0]
        if so_far.partitions == 0:
            raise BrokerError(f"the sink topic {topic} does not exist on the broker at {bootstrap}")
        if batch_id < so_far.batch:
            batch.write.format("noop").mode("overwrite").save()
            return
        order = [c for c in ORDER_COLUMNS if c in batch.columns]
        rows = batch.select("key", "value", "timestamp", *order)
        run = _Produce(bootstrap, registered_properties(bootstrap), topic, so_far.partitions, so_far.writer.decode(),
                       batch_id, so_far.present(batch_id))
        if from_executors:
            counts = _from_executors(rows, order, run)
        else:
            if not clients:
                clients.append(_new_producer(bootstrap))
            counts = _from_driver(rows, order, run, clients[0])
        so_far.wrote(batch_id, counts)
        write_batch.rows_written += sum(counts.values())

    def close() -> None:
        """Release the driver's producer (an idle client keeps asking the broker about its topic, even once deleted)."""
        if clients:
            clients.pop()[0].flush(30)

    write_batch.rows_written = 0
    write_batch.close = close
    return write_batch


def _from_executors(rows: DataFrame, order: list[str], run: "_Produce") -> dict[int, int]:
    """Spread the batch over ``min(partitions, Spark's parallelism)`` tasks by partition, every partition in one
    task sorted by ingestion order, and produce there; how many records each partition took."""
    tasks = min(run.partitions, rows.sparkSession.sparkContext.defaultParallelism)
    if run.partitions > 1:
        placed = StructType([*rows.schema.fields, StructField(PARTITION, IntegerType(), False)])
        rows = rows.mapInArrow(run.place, placed)
        order = [PARTITION, *order]
    rows = rows.repartition(tasks, PARTITION) if tasks > 1 else rows.repartition(1)
    if order:
        rows = rows.sortWithinPartitions(*order)
    return {r.partition: r.records for r in rows.mapInArrow(run, "partition int, records long").collect()}


def _from_driver(rows: DataFrame, order: list[str], run: "_Produce", client: tuple) -> dict[int, int]:
    """Collect the batch as Arrow, sort it by partition and ingestion order, and produce it with ``client``;
    how many records each partition took."""
    table = rows.toArrow().combine_chunks()
    table = table.append_column(PARTITION, pa.array(run.partitions_of(table), pa.int32()))
    batches = table.sort_by([(c, "ascending") for c in (PARTITION, *order)]).to_batches()
    return {p: n for done in run.write(batches, *client, retried=False)
            for p, n in zip(done.column("partition").to_pylist(), done.column("records").to_pylist())}


_PRODUCERS: dict[tuple, tuple] = {}  # (broker, client properties) -> (producer, its failures) a worker keeps


@dataclass(frozen=True)
class _Produce:
    """One micro-batch's records from a task to the broker (pickled into the ``mapInArrow`` functions)."""
    bootstrap: str
    properties: dict
    topic: str
    partitions: int
    writer: str
    batch_id: int
    present: dict  # partition -> indices of this batch already there (a re-run after a crash)

    def place(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Each record with the partition it goes to."""
        for rows in batches:
            yield rows.append_column(PARTITION, pa.array(self.partitions_of(rows), pa.int32()))

    def partitions_of(self, rows) -> np.ndarray:
        """The partition of each of ``rows`` (a record batch, or a table of one chunk, of the sink's columns)."""
        def whole(column):
            return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column

        seq = whole(rows.column("seq")) if "seq" in rows.schema.names else None
        return partitions_of(whole(rows.column("key")), seq, self.partitions)

    def _partitions(self, rows: pa.RecordBatch) -> np.ndarray:
        if PARTITION in rows.schema.names:
            return rows.column(PARTITION).to_numpy()
        return self.partitions_of(rows)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """A task's records to the broker with the producer its Python worker keeps (``write``)."""
        from pyspark import TaskContext

        context = TaskContext.get()
        yield from self.write(batches, *self._producer(), retried=context is not None and context.attemptNumber() > 0)

    def write(self, batches, out, failures: list, *, retried: bool) -> Iterator[pa.RecordBatch]:
        """Produce records (sorted by partition, then ingestion order), skipping those already written; yield
        how many each partition took. ``retried``: Spark runs this task again, after part of it may have been
        written."""
        failures.clear()
        counts: dict[int, int] = {}
        skip_of: dict[int, Container[int]] = {}  # partition -> indices of this batch already there
        writer_value, batch_value = self.writer.encode(), str(self.batch_id).encode()
        produce, topic = out.produce, self.topic
        for rows in batches:
            partitions = self._partitions(rows)
            starts = [0, *(np.flatnonzero(np.diff(partitions)) + 1).tolist(), len(partitions)]
            for start, end in zip(starts, starts[1:]):  # a run of one partition's records
                p, part = int(partitions[start]), rows.slice(start, end - start)
                first = counts.get(p, 0)
                counts[p] = first + part.num_rows
                skip = self._already_there(p, retried) if first == 0 else skip_of[p]
                skip_of[p] = skip
                columns = (part.column(n).to_pylist() for n in ("key", "value", "timestamp"))
                for index, (key, value, stamp) in enumerate(zip(*columns), first):
                    if index in skip:
                        continue
                    # headers as a dict, arguments by position: ~320k calls/s, against ~210k with keywords and a list
                    headers = {WRITER_HEADER: writer_value, BATCH_HEADER: batch_value, INDEX_HEADER: b"%d" % index}
                    if not stamp:
                        stamp, headers = stamp_headers(0, list(headers.items()))
                    while True:
                        try:  # topic, value, key, partition, callback, on_delivery, timestamp, headers
                            produce(topic, value, key, p, None, None, stamp, headers)
                            break
                        except BufferError:  # the local queue is full: let deliveries drain it
                            out.poll(0.05)
        if out.flush(120) or failures:
            raise BrokerError(f"micro-batch {self.batch_id} not fully delivered to {topic}: "
                              f"{failures[:3] or 'flush timed out'}")
        if counts:
            yield pa.RecordBatch.from_pydict({"partition": pa.array(list(counts), pa.int32()),
                                              "records": pa.array(list(counts.values()), pa.int64())})

    def _already_there(self, partition: int, retried: bool) -> Container[int]:
        if not retried:
            return self.present.get(partition, ())
        # a task run again: its first attempt may have written part of its partitions
        written = WrittenSoFar(self.bootstrap, self.topic, self.writer)
        written.load(only=[partition])
        return written.present(self.batch_id).get(partition, ())

    def _producer(self) -> tuple:
        key = (self.bootstrap, tuple(sorted(self.properties.items())))
        if key not in _PRODUCERS:
            _PRODUCERS.clear()  # one broker at a time: an idle client of a broker gone would keep calling it
            use_client_properties(self.bootstrap, self.properties)
            _PRODUCERS[key] = _new_producer(self.bootstrap)
        return _PRODUCERS[key]


def _new_producer(bootstrap: str) -> tuple:
    """A producer and the list its delivery failures go to (reports only for failures: a callback per record
    costs as much as the send)."""
    failures: list = []
    out = producer(bootstrap, **{"delivery.report.only.error": True,
                                 "on_delivery": lambda err, _msg: failures.append(err.str())})
    return out, failures
