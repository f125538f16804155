"""Event time and stream time of raw topic records, computed where records are read.

Stream time is the largest event time read so far in ingestion order (DIALECT §2). It is global to a
query — across all its inputs and keys — so it is computed once, in the source, and carried on every
record as ``stream_time``; operators that work per key still see the same clock, whatever the batch cut.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
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
