"""Live progress of running queries: one line per query from Spark's last progress report."""
from __future__ import annotations


def progress_lines(engine) -> list[str]:
    lines = []
    for q in engine.queries:
        p = q.spark_query.lastProgress or {}
        m = q.metrics()
        lines.append(
            f"{q.query_id}: batch {p.get('batchId', '-')}, input {p.get('numInputRows', 0)} rows "
            f"({p.get('processedRowsPerSecond', 0.0):.0f} rows/s), join state {m['state_rows']} rows, "
            f"dropped: {m['null_value']} null values, {m['null_key']} null keys, {m['late']} late; "
            f"sink {q.topic}, active={q.spark_query.isActive}"
        )
    return lines
