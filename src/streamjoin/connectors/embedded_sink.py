"""Spark sink into the embedded topic store.

A query's output DataFrame has the columns ``key`` (binary), ``value`` (binary, null = tombstone),
``timestamp`` (long, ms) and ``seq`` / ``sub`` (the ingestion order of the record that produced the row
and its position among that record's outputs). Each micro-batch is sorted by ``(seq, sub)`` and
appended to the topic as one atomic commit tagged with the writer's id and the batch id, so a batch
replayed after a crash is not written again: the topic holds every result exactly once. (The replayed
batch is still computed, into Spark's no-op sink, because Spark requires every stateful operator of a
batch to commit its state.) The writer's id is the query id plus the id Spark keeps in the checkpoint, so a
query started again without its checkpoint, whose batch ids start again at 0, is a new writer.
"""
from __future__ import annotations

import json
import os
from typing import Callable

from pyspark.sql import DataFrame

from .topic_store import Record, TopicStore

ORDER_COLUMNS = ("seq", "sub")


def writer_identity(checkpoint: str, query_id: str) -> str:
    """``query_id`` and the run id Spark writes to ``<checkpoint>/metadata`` when a query first starts."""
    try:
        with open(os.path.join(checkpoint, "metadata")) as meta:
            return f"{query_id}@{json.load(meta)['id']}"
    except (OSError, ValueError, KeyError):
        return query_id


def topic_writer(root: str, topic: str, checkpoint: str, query_id: str, partitions: int) -> Callable[[DataFrame, int], None]:
    """A ``foreachBatch`` function writing each micro-batch to ``topic`` exactly once."""

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        store = TopicStore(root)
        writer_id = writer_identity(checkpoint, query_id)
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
        write_batch.rows_written += len(records)

    write_batch.rows_written = 0
    return write_batch
