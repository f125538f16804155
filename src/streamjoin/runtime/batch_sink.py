"""A query's ``foreachBatch`` function: write the batch to the sink, then what the batch's execution
observed beside it — late records (``connectors.late_records``), dead letters (``connectors.dead_letters``)
and counts (``runtime.observed_counts``) — before Spark commits the batch. A test can kill the engine between
those steps (``runtime.crash_points``)."""
from __future__ import annotations

from typing import Callable, Optional

from py4j.protocol import Py4JJavaError

from ..connectors.dead_letters import DeadLetters
from ..connectors.late_records import LateRecords
from ..errors import StreamjoinError
from .crash_points import reached
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


def sink_function(write: Callable, letters: list[DeadLetters], counts: ObservedCounts, run: QueryRun,
                  late: Optional[LateRecords] = None) -> Callable:
    """The function, and its ``release()``: called when the query stops, it drops the function's hold on the
    Spark query. Spark keeps this function (a Python object) for as long as it keeps the query, and the function
    kept the query: neither side's garbage collector could free the pair, and every query a process ever ran,
    with its last plans, stayed on the driver's heap (a thousand conformance cases filled 1 GB)."""

    def write_batch(batch, batch_id: int) -> None:
        try:
            write(batch, batch_id)
            reached("sink-written", run.spark)
            if letters or counts.metrics or late is not None:
                observed = run.observed()
                if late is not None:
                    late.write_observed(observed, batch_id, run.writer())
                written = sum(dead_letters.write_observed(observed) for dead_letters in letters)
                counts.record(run.spark, observed, batch_id, {"dead_letters": written} if letters else {})
            reached("batch-written", run.spark)
        except Py4JJavaError as error:
            interruption = _interruption(error)
            if interruption is None:
                raise
            raise StoppedDuringBatch(f"{STOP_TEXT} {interruption}") from None

    write_batch.release = run.release
    return write_batch


# What Spark looks for in the text of a Python error to tell a query stopped during a batch from a failed one
# (``StreamExecution.PROXY_ERROR``), followed by the interruption's class name.
STOP_TEXT = "py4j.protocol.Py4JJavaError: An error occurred while calling the JVM:"
_INTERRUPTIONS = ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                  "java.nio.channels.ClosedByInterruptException")


class StoppedDuringBatch(Exception):
    """The query was stopped while its sink function waited on the JVM (a collect, a write).

    Spark then reads the Python error's text with a regular expression that recurses once per character after
    ``STOP_TEXT``; on the whole Java stack trace of the interruption (~7 KB) the query's thread died of a
    StackOverflowError at every stop that fell inside a batch. This error's text is short and says the same."""


def _interruption(error: Py4JJavaError) -> str | None:
    """The class name of the interruption behind a JVM error (the error or one of its causes), or None."""
    cause = error.java_exception
    for _ in range(16):
        if cause is None:
            return None
        name = cause.getClass().getName()
        if name in _INTERRUPTIONS:
            return name
        cause = cause.getCause()
    return None
