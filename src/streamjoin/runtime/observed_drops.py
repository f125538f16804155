"""Records a stateless step drops, counted exactly: the static stream-table join's null join keys (and other
counts of stateless steps: a lookup join's database round trips).

A stateful operator keeps its drop counts in its state (``runtime.metrics``); a stateless step has no
state. It observes its drops per micro-batch instead, as a Spark observed metric on the rows it filters
(``observe``). The query's sink function (``runtime.batch_sink``) adds the batch's counts to
``<checkpoint>/dropped/<batch>.json`` after it wrote the batch and before Spark commits it. The file names the
last batch it counted, so a batch run again after a crash is not counted twice; each batch's counts are a new
file, written through Hadoop's FileSystem as Spark writes its own logs (``runtime.storage.Versions``: any
checkpoint URI works). Checkpoints written before kept one ``dropped.json``: it is read when there is nothing
newer.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from .storage import Versions, read_json

FOLDER = "dropped"
OLD_FILE = "dropped.json"


@dataclass
class ObservedDrops:
    checkpoint: str
    metrics: list = field(default_factory=list)  # (observed metric name, reason), one per observing step

    def observe(self, rows: DataFrame, reason: str, dropped: Column) -> DataFrame:
        """``rows``, with the number of them a later filter drops (``dropped`` is true) observed per batch."""
        return self.observe_total(rows, reason, F.when(dropped, 1))

    def observe_total(self, rows: DataFrame, reason: str, value: Column) -> DataFrame:
        """``rows``, with the sum of ``value`` over them observed per batch (a stateless step's own count, such
        as a lookup join's database round trips), counted under ``reason``."""
        name = f"dropped:{reason}:{uuid.uuid4().hex}"
        self.metrics.append((name, reason))
        return rows.observe(name, F.coalesce(F.sum(value), F.lit(0)).cast("long").alias("dropped"))

    def record(self, spark: SparkSession, observed, batch_id: int) -> None:
        """Add batch ``batch_id``'s observed counts (a Scala map from the batch's execution) to the file."""
        if not self.metrics:
            return
        saved = saved_drops(spark, self.checkpoint)
        if batch_id <= saved["batch"]:
            return  # counted before a crash
        counts, last = saved["counts"], {}
        for name, reason in self.metrics:
            row = observed.get(name)
            if row.isDefined():
                last[reason] = last.get(reason, 0) + row.get().getLong(0)
                counts[reason] = counts.get(reason, 0) + row.get().getLong(0)
        Versions(spark, self.checkpoint, FOLDER).write(batch_id, {"batch": batch_id, "counts": counts, "last": last})


def saved_drops(spark: SparkSession, checkpoint: str) -> dict:
    """The counts so far, the last batch counted (-1 before the first) and that batch's own counts."""
    saved = Versions(spark, checkpoint, FOLDER).latest() or read_json(spark, checkpoint, OLD_FILE)
    return {"batch": -1, "counts": {}, "last": {}} if saved is None else {"last": {}, **saved}
