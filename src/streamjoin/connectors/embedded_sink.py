"""Spark sink into the embedded topic store.

A query's output DataFrame has the columns ``key`` (binary), ``value`` (binary, null = tombstone),
``timestamp`` (long, ms) and ``seq`` / ``sub`` (the ingestion order of the record that produced the row
and its position among that record's outputs). Each micro-batch is sorted by ``(seq, sub)`` and
appended to the topic as one atomic commit tagged with the writer's id and the batch id, so a batch
replayed after a crash is not written again: the topic holds every result exactly once. (The replayed
batch is still computed, into Spark's no-op sink, because Spark requires every stateful operator of a
batch to commit its state.) The writer's id (``writer_id()``, from ``runtime.batch_sink.QueryRun``) is the query
id plus the id Spark keeps for the query in its checkpoint, so a query started again without its checkpoint,
whose batch ids start again at 0, is a new writer.
"""
from __future__ import annotations

from typing import Callable

from pyspark.sql import DataFrame

from .topic_store import Record, TopicStore

ORDER_COLUMNS = ("seq", "sub")


def topic_writer(root: str, topic: str, writer_id: Callable[[], str], partitions: int) -> Callable[[DataFrame, int], None]:
    """A ``foreachBatch`` function writing each micro-batch to ``topic`` exactly once."""

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        store = TopicStore(root)
        writer = writer_id()
        if batch_id <= store.writer_batch(writer):
            # written before a crash: run the batch anyway (into nothing) so its state stores commit
            batch.write.format("noop").mode("overwrite").save()
            return
        # the batch as it is (a query's sink rows have these columns and no others): a select first would be
        # another plan to analyse and optimise, ~7 ms of every micro-batch
        rows = batch.toArrow()
        order = [c for c in ORDER_COLUMNS if c in rows.column_names]
        if order:
            rows = rows.sort_by([(c, "ascending") for c in order])
        records = [
            Record(key=k, value=v, timestamp=t or 0)
            for k, v, t in zip(
                rows.column("key").to_pylist(), rows.column("value").to_pylist(), rows.column("timestamp").to_pylist()
            )
        ]
        store.append([(topic, records)], writer=writer, batch_id=batch_id, partitions=partitions)
        write_batch.rows_written += len(records)

    write_batch.rows_written = 0
    return write_batch
