"""Live status of running queries: per query, from Spark's last progress report, the source's offset (its clock,
and on Kafka how far behind the broker it is) and the counters the query keeps in its checkpoint
(``runtime.metrics``: its drops, dead letters and state rows, counted per batch; never a read of the state).

``Status`` reads those counters again only after a query has run a new micro-batch (between batches nothing
changes them), and at most every ``COUNTERS_EVERY_S`` (a read is a listing and a small file read in the
checkpoint, which may be on an object store). Rates, batch, clock and lag are fresh at every refresh. ``streamjoin run`` on a terminal redraws ``status_table`` in
place; elsewhere it prints ``status_lines``.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional, TextIO

from ..connectors.kafka_source import tp_of

IDLE = "-"
COUNTERS_EVERY_S = 1.0


@dataclass(frozen=True)
class QueryStatus:
    query_id: str
    running: bool
    batch: Optional[int]
    rows_in_per_s: float
    rows_processed_per_s: float
    rows_out: int
    sink_topic: str
    clock: str
    state_rows: int
    late: int
    null_key: int
    null_value: int
    dead_letters: int
    lag: Optional[int]  # Kafka: records on the broker the query had not read at its last batch


def _offset(source: dict, field: str) -> dict:
    offset = source.get(field)
    return (json.loads(offset) if isinstance(offset, str) else offset) or {}


def _clock(progress: dict) -> str:
    for source in progress.get("sources", []):
        offset = _offset(source, "endOffset")
        millis = offset.get("streamTime")
        if millis is not None:
            name = "watermark" if offset.get("topicTimes") is not None else "stream time"
            return f"{name} {datetime.fromtimestamp(millis / 1000, timezone.utc):%Y-%m-%d %H:%M:%S.%f}"[:-3]
    return "no clock"


def kafka_lag(progress: dict, end_offsets) -> Optional[int]:
    """Records on the broker past what the query has read, summed over its partitions; None off Kafka.
    ``end_offsets(topics)`` gives the broker's end offset per (topic, partition)."""
    read: dict = {}
    for source in progress.get("sources", []):
        for key, position in (_offset(source, "endOffset").get("partitions") or {}).items():
            read[tp_of(key)] = int(position[0])
    if not read:
        return None
    ends = end_offsets(sorted({t for t, _ in read}))
    return sum(max(0, ends.get(tp, n) - n) for tp, n in read.items())


class Status:
    """The status of an engine's queries, reading each query's counters once per micro-batch it runs."""

    def __init__(self, engine, counters_every_s: float = COUNTERS_EVERY_S, clock=time.monotonic):
        self.engine, self.counters_every_s, self.clock = engine, counters_every_s, clock
        self._counted: dict[str, tuple] = {}  # query id -> (batch id, read at, metrics)

    def _metrics(self, query, batch) -> dict:
        seen, now = self._counted.get(query.query_id), self.clock()
        if seen is None or (seen[0] != batch and now - seen[1] >= self.counters_every_s):
            seen = self._counted[query.query_id] = (batch, now, query.metrics())
        return seen[2]

    def queries(self) -> list[QueryStatus]:
        out = []
        end_offsets = getattr(self.engine.store, "end_offsets", None)
        for q in self.engine.queries:
            p = q.spark_query.lastProgress or {}
            batch = p.get("batchId")
            m = self._metrics(q, batch)
            out.append(QueryStatus(
                q.query_id, q.spark_query.isActive, batch, p.get("inputRowsPerSecond") or 0.0,
                p.get("processedRowsPerSecond") or 0.0, q.rows_written(), q.topic, _clock(p), m["state_rows"],
                m["late"], m["null_key"], m["null_value"], m["dead_letters"],
                kafka_lag(p, end_offsets) if end_offsets is not None and p else None))
        return out

    def spark_ui(self) -> str:
        url = self.engine.spark.sparkContext.uiWebUrl
        return f"Spark UI: {url}" if url else "Spark UI: off (streamjoin run --ui turns it on)"


def status_lines(statuses: list[QueryStatus]) -> list[str]:
    """One line per query."""
    return [
        f"{s.query_id}: batch {IDLE if s.batch is None else s.batch}, {s.rows_in_per_s:.0f}/s in, "
        f"{s.rows_processed_per_s:.0f}/s processed, out {s.rows_out} rows to {s.sink_topic}, {s.clock}, "
        f"state {s.state_rows} rows; dropped {s.late} late, {s.null_key} null keys, {s.null_value} null values; "
        f"{s.dead_letters} dead letters" + ("" if s.lag is None else f"; Kafka lag {s.lag}")
        + f"; {'running' if s.running else 'stopped'}"
        for s in statuses]


COLUMNS = ("QUERY", "STATUS", "BATCH", "IN/S", "OUT", "CLOCK", "STATE ROWS", "LATE", "NULL KEY", "DEAD LETTERS", "LAG")


def status_table(statuses: list[QueryStatus]) -> list[str]:
    """The queries as an aligned table, a row each."""
    rows = [COLUMNS] + [(
        s.query_id, "running" if s.running else "stopped", IDLE if s.batch is None else str(s.batch),
        f"{s.rows_in_per_s:.0f}", str(s.rows_out), s.clock, str(s.state_rows), str(s.late), str(s.null_key),
        str(s.dead_letters), IDLE if s.lag is None else str(s.lag)) for s in statuses]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


class LiveView:
    """A status table redrawn in place on a terminal: each refresh moves the cursor back over the last drawing."""

    def __init__(self, out: TextIO):
        self.out, self.drawn = out, 0

    def draw(self, lines: list[str]) -> None:
        if self.drawn:
            self.out.write(f"\x1b[{self.drawn}F\x1b[J")  # to the first line drawn last time; clear below
        self.out.write("".join(line + "\n" for line in lines))
        self.out.flush()
        self.drawn = len(lines)


def progress_lines(engine) -> list[str]:
    """Every query's status as a line (what ``streamjoin run --once`` prints at its end)."""
    return status_lines(Status(engine).queries())
