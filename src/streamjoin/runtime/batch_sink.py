"""A query's ``foreachBatch`` function: write the batch to the sink, then what the batch's execution
observed beside it — dead letters (``connectors.dead_letters``) and drop counts (``runtime.observed_drops``)
— before Spark commits the batch."""
from __future__ import annotations

from typing import Callable

from ..connectors.dead_letters import DeadLetters
from .observed_drops import ObservedDrops


def sink_function(write: Callable, letters: list[DeadLetters], drops: ObservedDrops, spark, query_name: str) -> Callable:
    running = []  # the Spark query, found by name at its first batch (a lookup costs a round trip per query)

    def write_batch(batch, batch_id: int) -> None:
        write(batch, batch_id)
        if not letters and not drops.metrics:
            return
        if not running:
            running.extend(q._jsq.streamingQuery() for q in spark.streams.active if q.name == query_name)
        observed = running[0].lastExecution().observedMetrics()  # of the batch that just ran
        for dead_letters in letters:
            dead_letters.write_observed(observed)
        drops.record(observed, batch_id)

    return write_batch
