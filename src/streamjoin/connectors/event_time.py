"""Event time and the query's clock of raw topic records, computed where records are read.

The clock is global to a query — across all its inputs and keys — so it is computed once, in the source,
and carried on every record as ``stream_time``; operators that work per key still see the same clock,
whatever the batch cut. It is one of (DIALECT §2):
- stream time: the largest event time read so far, in ingestion order (KSQL, Lenses, SQLstream);
- the watermark (Flink inputs with ``WATERMARK FOR``): per input topic, the largest event time read so
  far minus the declared delay; the minimum over the inputs; none until every input has a time.
Both only move through records, and include the record that carries them.

A KSQL windowed join also needs each input's own clock (DIALECT §3: each side's store keeps records by the
largest time seen on that side, as Kafka Streams' window stores do): with ``sides`` the clock also gives,
for every record, the largest event time read so far of each of those topics (``topic_times``).
"""
from __future__ import annotations

import io
import json
from datetime import datetime, timezone
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

NO_TIME = np.iinfo(np.int64).min
CHANGELOG_PREFIX = "debezium-json:"  # an event-time field read from inside a debezium-json envelope
KEY_PREFIX = "key:"  # an event-time field of a JSON record key; the prefix alone: the (primitive) key itself


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
    return _to_millis(_field_value(raw, field))


def _field_value(raw: Optional[bytes], field: str):
    """The JSON value ``raw``'s field ``field`` (matched in any case), or None."""
    if raw is None:
        return None
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    if isinstance(obj, dict) and field.startswith(CHANGELOG_PREFIX):
        # a debezium-json envelope: the time of the row it upserts (a delete has none, as a tombstone)
        obj, field = obj.get("after"), field[len(CHANGELOG_PREFIX):]
    if not isinstance(obj, dict):
        return None
    if field in obj:
        return obj[field]
    folded = field.casefold()
    return next((v for k, v in obj.items() if k.casefold() == folded), None)


def event_times(table: pa.Table, field: Optional[str], pattern: Optional[str] = None) -> np.ndarray:
    """Event time per record (ms): the record timestamp, or the JSON value field ``field`` (of the key, after
    ``KEY_PREFIX``; the key itself, as text, for the prefix alone); ``pattern``: the field holds text in that
    DateTimeFormatter pattern (ksqlDB's ``TIMESTAMP_FORMAT``). Records without a usable time get ``NO_TIME``
    (they do not move stream time)."""
    if not field:
        return table.column("timestamp").to_numpy(zero_copy_only=False).astype(np.int64)
    part = "value"
    if field.startswith(KEY_PREFIX):
        part, field = "key", field[len(KEY_PREFIX):]
        if not field and pattern is None:
            return _key_millis(table.column("key"))
    if pattern is not None:
        return _formatted_times(table.column(part), field, pattern)
    fast = _arrow_event_times(table.column(part), field)
    if fast is not None:
        return fast
    values = table.column(part).to_pylist()  # record at a time: mixed types, odd layouts, bad JSON
    return np.array([t if (t := _field_millis(v, field)) is not None else NO_TIME for v in values], dtype=np.int64)


def _formatted_times(values: pa.ChunkedArray, field: str, pattern: str) -> np.ndarray:
    """Times held as text in ``pattern``: the JSON field ``field`` of each value, or (no field) each value's text."""
    from .time_formats import parse_millis

    def millis(raw) -> int:
        if raw is None:
            return NO_TIME
        if field:
            text = _field_value(raw, field)
        else:
            text = raw.decode("utf-8", "replace")
            text = text[1:-1] if len(text) > 1 and text[0] == text[-1] == '"' else text  # a JSON string key
        t = parse_millis(text, pattern) if isinstance(text, str) else None
        return NO_TIME if t is None else t

    return np.array([millis(v) for v in values.to_pylist()], dtype=np.int64)


def _key_millis(keys: pa.ChunkedArray) -> np.ndarray:
    """Times of primitive keys (their text: epoch ms, or a date-time); Arrow's cast when every key is a whole
    number, else record at a time."""
    try:
        millis = pc.cast(pc.cast(keys, pa.string()), pa.int64())
        return np.where(pc.is_valid(millis).to_numpy(zero_copy_only=False),
                        millis.fill_null(0).to_numpy(zero_copy_only=False), NO_TIME).astype(np.int64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return np.array([t if k is not None and (t := _to_millis(k.decode("utf-8", "replace"))) is not None
                         else NO_TIME for k in keys.to_pylist()], dtype=np.int64)


def _arrow_event_times(values: pa.ChunkedArray, field: str) -> Optional[np.ndarray]:
    """The same, with Arrow's JSON reader and casts (about ten times faster); None when the batch needs
    the record-at-a-time path (a value that is not one-line JSON, a field of mixed types, a time with a
    zone offset, ...)."""
    values = values.combine_chunks()
    present = pc.is_valid(values).to_numpy(zero_copy_only=False)
    out = np.full(len(values), NO_TIME, dtype=np.int64)
    if not present.any():
        return out
    present_values = values.filter(pa.array(present))
    if pc.any(pc.match_substring(present_values.cast(pa.large_binary()), "\n")).as_py():
        return None
    lines = present_values.to_pylist()
    try:
        parsed = pa_json.read_json(io.BytesIO(b"\n".join(lines)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if parsed.num_rows != len(lines):
        return None
    columns = {name: parsed.column(name) for name in parsed.column_names}
    if field.startswith(CHANGELOG_PREFIX):  # a debezium-json envelope: the time of the row it upserts
        after = columns.get("after")
        if after is None or not pa.types.is_struct(after.type):
            return None
        columns = {after.type.field(i).name: pc.struct_field(after, [i]) for i in range(after.type.num_fields)}
        field = field[len(CHANGELOG_PREFIX):]
    # the exact name first, then any name equal ignoring case
    matching = sorted((name for name in columns if name.casefold() == field.casefold()), key=lambda n: n != field)
    if not matching:
        return out
    millis = None
    for name in matching:
        column = _millis(columns[name])
        if column is None:
            return None
        millis = column if millis is None else pc.coalesce(millis, column)
    times = millis.to_numpy(zero_copy_only=False)
    out[present] = np.where(pc.is_valid(millis).to_numpy(zero_copy_only=False), np.nan_to_num(times), NO_TIME)
    return out


def _millis(column) -> Optional[pa.Array]:
    """A parsed JSON column as int64 milliseconds (nulls kept), or None if its type cannot be one."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kind = column.type
    if pa.types.is_null(kind):
        return pa.nulls(len(column), pa.int64())
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return pc.cast(column, pa.int64(), safe=False)
    if pa.types.is_timestamp(kind):
        return pc.cast(pc.cast(column, pa.timestamp("ms", kind.tz)), pa.int64())
    if pa.types.is_string(kind):
        try:
            return pc.cast(pc.cast(column, pa.timestamp("ms")), pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    return None


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
    sides: tuple = ()  # topics whose own running maximum every record also carries
    patterns: Optional[dict] = None  # topic -> the TIMESTAMP_FORMAT its time field's text is in

    STATE_KEYS = ("streamTime", "topicTimes", "sideTimes")

    def run(self, table: Optional[pa.Table], state: dict) -> "tuple[np.ndarray, dict]":
        """The clock on every record of ``table`` (ingestion order; ``NO_TIME`` while there is none), and the
        state to continue from (kept in the source offset: ``streamTime``, ``topicTimes`` for watermarks,
        ``sideTimes`` for ``sides``). With ``sides``, the clock is a matrix: the query's clock in column 0,
        then each side topic's own running maximum."""
        if table is None or table.num_rows == 0:
            return np.zeros((0, 1 + len(self.sides)) if self.sides else 0, dtype=np.int64), state
        clock, after, times, rows_of = self._run(table, state)
        if not self.sides:
            return clock, after
        side_times = dict(state.get("sideTimes") or {})
        columns = [clock]
        for topic in self.sides:
            start = side_times.get(topic)
            mine = rows_of.get(topic, np.zeros(table.num_rows, dtype=bool))
            running = stream_times(np.where(mine, times, NO_TIME), NO_TIME if start is None else start)
            columns.append(running)
            side_times[topic] = _or_none(running[-1])
        return np.column_stack(columns), {**after, "sideTimes": side_times}

    def _run(self, table: pa.Table, state: dict):
        topics = pc.dictionary_encode(table.column("topic")).combine_chunks()
        codes = topics.indices.to_numpy(zero_copy_only=False)
        rows_of = {topic: codes == code for code, topic in enumerate(topics.dictionary.to_pylist())}
        times = np.full(table.num_rows, NO_TIME, dtype=np.int64)
        for topic, mask in rows_of.items():
            part = table if len(rows_of) == 1 else table.filter(pa.array(mask))  # one topic: no copy
            times[mask] = event_times(part, self.fields.get(topic), (self.patterns or {}).get(topic))
        if self.delays is None:
            start = state.get("streamTime")
            clock = stream_times(times, NO_TIME if start is None else start)
            return clock, {"streamTime": _or_none(clock[-1])}, times, rows_of
        clock = np.full(table.num_rows, np.iinfo(np.int64).max, dtype=np.int64)
        topic_times = dict(state.get("topicTimes") or {})
        for topic, delay in sorted(self.delays.items()):
            start = topic_times.get(topic)
            mine = rows_of.get(topic, np.zeros(table.num_rows, dtype=bool))
            running = stream_times(np.where(mine, times, NO_TIME), NO_TIME if start is None else start)
            clock = np.minimum(clock, np.where(running == NO_TIME, NO_TIME, running - delay))
            topic_times[topic] = _or_none(running[-1])
        return clock, {"streamTime": _or_none(clock[-1]), "topicTimes": topic_times}, times, rows_of


def _or_none(t) -> Optional[int]:
    return None if t == NO_TIME else int(t)
