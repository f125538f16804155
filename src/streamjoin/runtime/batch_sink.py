"""A query's ``foreachBatch`` function: write the batch to the sink, then what the batch's execution
observed beside it — dead letters (``connectors.dead_letters``) and counts (``runtime.observed_counts``)
— before Spark commits the batch."""
from __future__ import annotations

from typing import Callable

from ..connectors.dead_letters import DeadLetters
from ..errors import StreamjoinError
from .observed_counts import ObservedCounts


class QueryRun:
    """The Spark query a sink function belongs to, found by its name at its first batch: what the batch's
    execution observed, and the identity the query writes its sink under — its id plus the id Spark keeps for
    it in the checkpoint (``StreamingQuery.id``, the same across restarts from that checkpoint), so a query
    started over from an empty checkpoint, whose batch ids start again at 0, is a new writer."""

    def __init__(self, spark, query_name: str, query_id: str):
        self.spark, self.query_name, self.query_id = spark, query_name, query_id
        self._query = None

    def query(self):
        if self._query is None:
            found = [q for q in self.spark.streams.active if q.name == self.query_name]
            if not found:
                raise StreamjoinError(f"query {self.query_id}: its Spark query ({self.query_name}) is not running")
            self._query = found[0]
        return self._query

    def writer(self) -> str:
        return f"{self.query_id}@{self.query().id}"

    def observed(self):
        """The observed metrics of the batch that just ran."""
        return self.query()._jsq.streamingQuery().lastExecution().observedMetrics()

    def release(self) -> None:
        self._query = None


def sink_function(write: Callable, letters: list[DeadLetters], counts: ObservedCounts, run: QueryRun) -> Callable:
    """The function, and its ``release()``: called when the query stops, it drops the function's hold on the
    Spark query. Spark keeps this function (a Python object) for as long as it keeps the query, and the function
    kept the query: neither side's garbage collector could free the pair, and every query a process ever ran,
    with its last plans, stayed on the driver's heap (a thousand conformance cases filled 1 GB)."""

    def write_batch(batch, batch_id: int) -> None:
        write(batch, batch_id)
        if not letters and not counts.metrics:
            return
        observed = run.observed()
        written = sum(dead_letters.write_observed(observed) for dead_letters in letters)
        counts.record(run.spark, observed, batch_id, {"dead_letters": written} if letters else {})

    write_batch.release = run.release
    return write_batch
