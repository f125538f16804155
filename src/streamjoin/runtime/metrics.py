"""What a running query has dropped and holds: read from its checkpoint, so the counts are exact and
survive restarts.

- ``null_value``: input records with a null value (ignored by streams), counted by the source in its
  offsets;
- ``null_key`` / ``late`` / ``no_time``: records a join dropped for a null join key, as late (a KSQL
  windowed join: a record its side's store did not keep, being a whole retention behind that side's clock;
  Flink: a record behind the watermark that joined nothing on a side that is not preserved), or for having
  no event time;
- ``state_rows``: records held in operator state;
- ``dead_letters``: input records its scans could not decode, written to the dead-letter topic.

All but ``null_value`` are counted per micro-batch as Spark observed metrics and added up in the checkpoint
(``runtime.observed_counts``): reading them costs a file read, never a read of the state.
"""
from __future__ import annotations

import json

from pyspark.sql import SparkSession

from ..operators.state import STATE_ROWS
from .observed_counts import saved_counts


def query_metrics(spark: SparkSession, checkpoint: str, last_progress: dict | None) -> dict:
    metrics = {"null_value": 0, "null_key": 0, "late": 0, STATE_ROWS: 0, "dead_letters": 0}
    for source in (last_progress or {}).get("sources", []):
        offset = source.get("endOffset")
        offset = json.loads(offset) if isinstance(offset, str) else offset or {}
        metrics["null_value"] += sum((offset.get("nullValues") or {}).values())
    observed = saved_counts(spark, checkpoint)
    for name, count in observed["counts"].items():
        metrics[name] = metrics.get(name, 0) + count
    if "lookup_round_trips" in observed["counts"]:  # also per micro-batch: the last one's
        metrics["lookup_round_trips_last_batch"] = observed["last"].get("lookup_round_trips", 0)
    return metrics
