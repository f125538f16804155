"""Live progress of running queries: one line per query from Spark's last progress report."""
from __future__ import annotations


def progress_lines(engine) -> list[str]:
    lines = []
    for q in engine.queries:
        p = q.spark_query.lastProgress or {}
        state_rows = sum(op.get("numRowsTotal", 0) for op in p.get("stateOperators", []))
        lines.append(
            f"{q.query_id}: batch {p.get('batchId', '-')}, input {p.get('numInputRows', 0)} rows "
            f"({p.get('processedRowsPerSecond', 0.0):.0f} rows/s), state {state_rows} rows, "
            f"sink {q.topic}, active={q.spark_query.isActive}"
        )
    return lines
