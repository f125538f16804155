"""Live progress of running queries: one line per query, from Spark's last progress report, the source's
offset (its clock) and the query's checkpoint and dead letters (``runtime.metrics``)."""
from __future__ import annotations

import json
from datetime import datetime, timezone


def _clock(progress: dict) -> str:
    for source in progress.get("sources", []):
        offset = source.get("endOffset")
        offset = json.loads(offset) if isinstance(offset, str) else offset or {}
        millis = offset.get("streamTime")
        if millis is not None:
            name = "watermark" if offset.get("topicTimes") is not None else "stream time"
            return f"{name} {datetime.fromtimestamp(millis / 1000, timezone.utc):%Y-%m-%d %H:%M:%S.%f}"[:-3]
    return "no clock"


def progress_lines(engine) -> list[str]:
    lines = []
    for q in engine.queries:
        p = q.spark_query.lastProgress or {}
        m = q.metrics()
        lines.append(
            f"{q.query_id}: batch {p.get('batchId', '-')}, in {p.get('numInputRows', 0)} rows "
            f"({p.get('inputRowsPerSecond', 0.0):.0f}/s in, {p.get('processedRowsPerSecond', 0.0):.0f}/s processed), "
            f"out {q.rows_written()} rows to {q.topic}, {_clock(p)}, state {m['state_rows']} rows; "
            f"dropped {m['late']} late, {m['null_key']} null keys, {m['null_value']} null values; "
            f"{m['dead_letters']} dead letters; {'running' if q.spark_query.isActive else 'stopped'}"
        )
    return lines
