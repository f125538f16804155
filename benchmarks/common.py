"""Shared benchmark plumbing: a SparkSession, timing a streaming query, reading its progress."""
from __future__ import annotations

import statistics
import time

from pyspark.sql import DataFrame


def session():
    from streamjoin.runtime.session import build_session

    return build_session("local[2]", app_name="streamjoin-bench", conf={"spark.sql.shuffle.partitions": "2"})


def time_query(df: DataFrame, checkpoint: str, input_rows: int, state_rows=None) -> dict:
    """Run ``df`` into Spark's no-op sink until it has consumed all input; report throughput and latency."""
    started = time.monotonic()
    query = df.writeStream.format("noop").option("checkpointLocation", checkpoint).start()
    query.processAllAvailable()
    elapsed = time.monotonic() - started
    progress = [p for p in query.recentProgress if p.get("numInputRows", 0) > 0]
    query.stop()
    durations = [p["durationMs"]["triggerExecution"] for p in progress] or [0]
    breakdown = {k: sum(p["durationMs"].get(k, 0) for p in progress) for k in ("latestOffset", "addBatch", "queryPlanning", "walCommit")}
    native_state = max((sum(op.get("numRowsTotal", 0) for op in p.get("stateOperators", [])) for p in progress), default=0)
    return {
        "rows_per_s": round(input_rows / elapsed, 1),
        "seconds": round(elapsed, 2),
        "batches": len(progress),
        "batch_ms_median": statistics.median(durations),
        "batch_ms_max": max(durations),
        "state_rows_max": state_rows(checkpoint, len(progress)) if state_rows else native_state,
        "ms_by_phase": breakdown,
    }
