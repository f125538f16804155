"""A query's ``foreachBatch`` function: write the batch to the sink, then what the batch's execution
observed beside it — dead letters (``connectors.dead_letters``) and drop counts (``runtime.observed_drops``)
— before Spark commits the batch."""
from __future__ import annotations

from typing import Callable

from ..connectors.dead_letters import DeadLetters
from .observed_drops import ObservedDrops


def sink_function(write: Callable, letters: list[DeadLetters], drops: ObservedDrops, spark, query_name: str) -> Callable:
    """The function, and its ``release()``: called when the query stops, it drops the function's hold on the
    Spark query. Spark keeps this function (a Python object) for as long as it keeps the query, and the function
    kept the query: neither side's garbage collector could free the pair, and every query a process ever ran,
    with its last plans, stayed on the driver's heap (a thousand conformance cases filled 1 GB)."""
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

    write_batch.release = running.clear
    return write_batch
