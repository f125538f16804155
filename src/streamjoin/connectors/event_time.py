"""Event time and the query's clock of raw topic records, computed where records are read.

The clock is global to a query — across all its inputs and keys — so it is computed once, in the source,
and carried on every record as ``stream_time``; operators that work per key still see the same clock,
whatever the batch cut. It is one of (DIALECT §2):
- stream time: the largest event time read so far, in ingestion order (KSQL, Lenses, SQLstream);
- the watermark (Flink inputs with ``WATERMARK FOR``): per input topic, the largest event time read so
  far minus the declared delay; the minimum over the inputs; none until every input has a time.
Both only move through records, and include the record that carries them.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pyarrow as pa

NO_TIME = np.iinfo(np.int64).min


def _to_millis(value) -> Optional[int]:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1))
        except ValueError:
            return None
        return int((dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp() * 1000)
    return None


def _field_millis(raw: Optional[bytes], field: str) -> Optional[int]:
    if raw is None:
        return None
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    if field in obj:
        return _to_millis(obj[field])
    folded = field.casefold()
    return next((_to_millis(v) for k, v in obj.items() if k.casefold() == folded), None)


def event_times(table: pa.Table, field: Optional[str]) -> np.ndarray:
    """Event time per record (ms): the record timestamp, or the JSON value field ``field``.
    Records without a usable time get ``NO_TIME`` (they do not move stream time)."""
    if not field:
        return table.column("timestamp").to_numpy(zero_copy_only=False).astype(np.int64)
    values = table.column("value").to_pylist()
    return np.array([t if (t := _field_millis(v, field)) is not None else NO_TIME for v in values], dtype=np.int64)


def stream_times(times: np.ndarray, start: int) -> np.ndarray:
    """Running maximum of ``times`` (already in ingestion order), starting from ``start``."""
    if times.size == 0:
        return times
    return np.maximum.accumulate(np.maximum(times, start))


@dataclass(frozen=True)
class Clock:
    """``fields``: topic -> value field holding the event time (None: the record timestamp).
    ``delays``: topic -> watermark delay in ms; given, the clock is the watermark over those topics."""

    fields: dict
    delays: Optional[dict] = None

    def run(self, table: Optional[pa.Table], state: dict) -> "tuple[np.ndarray, dict]":
        """The clock on every record of ``table`` (ingestion order; ``NO_TIME`` while there is none), and the
        state to continue from (kept in the source offset: ``streamTime``, and ``topicTimes`` for watermarks)."""
        if table is None or table.num_rows == 0:
            return np.array([], dtype=np.int64), state
        topics = table.column("topic").to_numpy(zero_copy_only=False)
        times = np.full(table.num_rows, NO_TIME, dtype=np.int64)
        for topic in set(topics):
            mask = topics == topic
            times[mask] = event_times(table.filter(pa.array(mask)), self.fields.get(topic))
        if self.delays is None:
            start = state.get("streamTime")
            clock = stream_times(times, NO_TIME if start is None else start)
            return clock, {"streamTime": _or_none(clock[-1])}
        clock = np.full(table.num_rows, np.iinfo(np.int64).max, dtype=np.int64)
        topic_times = dict(state.get("topicTimes") or {})
        for topic, delay in sorted(self.delays.items()):
            start = topic_times.get(topic)
            running = stream_times(np.where(topics == topic, times, NO_TIME), NO_TIME if start is None else start)
            clock = np.minimum(clock, np.where(running == NO_TIME, NO_TIME, running - delay))
            topic_times[topic] = _or_none(running[-1])
        return clock, {"streamTime": _or_none(clock[-1]), "topicTimes": topic_times}


def _or_none(t) -> Optional[int]:
    return None if t == NO_TIME else int(t)
