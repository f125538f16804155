"""Spark sink into the embedded topic store.

A query's output DataFrame has the columns ``key`` (binary), ``value`` (binary, null = tombstone),
``timestamp`` (long, ms) and ``seq`` / ``sub`` (the ingestion order of the record that produced the row
and its position among that record's outputs). Each micro-batch is sorted by ``(seq, sub)`` and
appended to the topic as one atomic commit tagged with the query's id and the batch id, so a batch
replayed after a crash is not written again: the topic holds every result exactly once. (The replayed
batch is still computed, into Spark's no-op sink, because Spark requires every stateful operator of a
batch to commit its state.)
"""
from __future__ import annotations

from typing import Callable

from pyspark.sql import DataFrame

from .topic_store import Record, TopicStore

ORDER_COLUMNS = ("seq", "sub")


def topic_writer(root: str, topic: str, writer_id: str, partitions: int) -> Callable[[DataFrame, int], None]:
    """A ``foreachBatch`` function writing each micro-batch to ``topic`` exactly once."""

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        store = TopicStore(root)
        if batch_id <= store.writer_batch(writer_id):
            # written before a crash: run the batch anyway (into nothing) so its state stores commit
            batch.write.format("noop").mode("overwrite").save()
            return
        order = [c for c in ORDER_COLUMNS if c in batch.columns]
        rows = batch.select("key", "value", "timestamp", *order).toArrow()
        if order:
            rows = rows.sort_by([(c, "ascending") for c in order])
        records = [
            Record(key=k, value=v, timestamp=t or 0)
            for k, v, t in zip(
                rows.column("key").to_pylist(), rows.column("value").to_pylist(), rows.column("timestamp").to_pylist()
            )
        ]
        store.append([(topic, records)], writer=writer_id, batch_id=batch_id, partitions=partitions)

    return write_batch
