"""What a running query has dropped and holds: read from its checkpoint, so the counts are exact and
survive restarts.

- ``null_value``: input records with a null value (ignored by streams), counted by the source in its
  offsets;
- ``null_key`` / ``late`` / ``no_time``: records a join dropped for a null join key, as late (a KSQL
  windowed join: a record its side's store did not keep, being a whole retention behind that side's clock;
  Flink: a record behind the watermark that joined nothing on a side that is not preserved), or for having
  no event time, counted in the operator's state (a stateless step's in ``runtime.observed_drops``);
- ``state_rows``: records held in join state.
"""
from __future__ import annotations

import json
import pickle

from pyspark.sql import SparkSession

from ..operators.state import META
from .observed_drops import saved_drops


def query_metrics(spark: SparkSession, checkpoint: str, last_progress: dict | None) -> dict:
    metrics = {"null_value": 0, "null_key": 0, "late": 0, "state_rows": 0}
    for source in (last_progress or {}).get("sources", []):
        offset = source.get("endOffset")
        offset = json.loads(offset) if isinstance(offset, str) else offset or {}
        metrics["null_value"] += sum((offset.get("nullValues") or {}).values())
    observed = saved_drops(spark, checkpoint)
    for name, count in observed["counts"].items():
        metrics[name] = metrics.get(name, 0) + count
    if "lookup_round_trips" in observed["counts"]:  # also per micro-batch: the last one's
        metrics["lookup_round_trips_last_batch"] = observed["last"].get("lookup_round_trips", 0)
    for operator_id in _stateful_operators(spark, checkpoint):
        try:
            values = (spark.read.format("statestore").option("operatorId", operator_id).option("stateVarName", META)
                      .load(checkpoint).select("value.value").collect())
        except Exception:  # noqa: BLE001 - an operator without state yet
            continue
        for (blob,) in values:
            counted = pickle.loads(blob) if blob is not None else {}
            metrics["state_rows"] += counted.get("rows", 0)
            for name, count in counted.get("dropped", {}).items():
                metrics[name] = metrics.get(name, 0) + count
    return metrics


def _stateful_operators(spark: SparkSession, checkpoint: str) -> list[int]:
    try:
        rows = spark.read.format("state-metadata").load(checkpoint).select("operatorId").distinct().collect()
    except Exception:  # noqa: BLE001 - no stateful operator, or no batch committed yet
        return []
    return sorted(r[0] for r in rows)
