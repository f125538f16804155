"""A query's counters, counted exactly per micro-batch and kept in its checkpoint: what every step dropped (a
join's null join keys and late records, an aggregate's null groups, a static join's null keys ...), the rows
its operators hold, other counts of its steps (a lookup join's database round trips), and the dead letters its
scans wrote.

Every step observes its counts per micro-batch as a Spark observed metric on the rows it handles
(``observe_counts``): a stateless step on the rows it filters, a stateful operator on the changes its steps
made to the counters in their state (``operators.state.run_segmented``). The query's sink function
(``runtime.batch_sink``) adds the batch's counts to ``<checkpoint>/dropped/<batch>.json`` after it wrote the
batch and before Spark commits it. The file names the last batch it counted, so a batch run again after a crash
is not counted twice; each batch's counts are a new file, written through Hadoop's FileSystem as Spark writes
its own logs (``runtime.storage.Versions``: any checkpoint URI works); a batch that changed no count writes
none. ``runtime.metrics`` reads the newest file: a query's counts are read without reading its state.

Checkpoints written before the operators' counters were observed keep them only in the operators' state: the
first batch such a query runs again reads them there once (``state_counters``) and carries on from them.
Older checkpoints kept one ``dropped.json``: it is read when there is nothing newer.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Optional

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..operators.state import STATE_ROWS, stored_metas
from .storage import Versions, read_json

FOLDER = "dropped"
OLD_FILE = "dropped.json"
STATE_COUNTED = "state_counted"  # in a saved file: the operators' counters are in its counts


@dataclass
class ObservedCounts:
    checkpoint: str
    metrics: list = field(default_factory=list)  # (observed metric name, the names it counts), one per observing step
    stateful: bool = False  # an operator's counters are among the metrics
    _saved: Optional[dict] = None  # what the checkpoint holds, once read
    _versions: Optional[Versions] = None  # the checkpoint's count files, once opened

    def observe_counts(self, rows: DataFrame, values: dict) -> DataFrame:
        """``rows``, with the sum of each of ``values`` (name -> column) over them observed per batch and counted
        under its name."""
        name = f"counted:{','.join(values)}:{uuid.uuid4().hex}"
        self.metrics.append((name, tuple(values)))
        self.stateful = self.stateful or STATE_ROWS in values
        sums = [F.coalesce(F.sum(value), F.lit(0)).cast("long").alias(f"c{i}") for i, value in enumerate(values.values())]
        return rows.observe(name, *sums)

    def record(self, spark: SparkSession, observed, batch_id: int, counted: Optional[dict] = None) -> None:
        """Add batch ``batch_id``'s observed counts (a Scala map from the batch's execution), and what the sink
        function itself ``counted`` in the batch (the dead letters it wrote), to the file."""
        if not self.metrics and not counted:
            return
        if self._versions is None:
            self._versions = Versions(spark, self.checkpoint, FOLDER)
        saved = self._saved = self._saved or saved_counts(spark, self.checkpoint, self._versions)
        if batch_id <= saved["batch"]:
            return  # counted before a crash
        counts, last = dict(saved["counts"]), dict(counted or {})
        for name, names in self.metrics:
            row = observed.get(name)
            if row.isDefined():
                for i, reason in enumerate(names):
                    last[reason] = last.get(reason, 0) + row.get().getLong(i)
        fresh = self.stateful and not saved.get(STATE_COUNTED)
        if fresh and batch_id > 0:  # a checkpoint whose operators counted in their state only
            for reason, count in state_counters(spark, self.checkpoint).items():
                counts[reason] = counts.get(reason, 0) + count
        if not fresh and not any(last.values()) and not any(saved["last"].values()):
            return  # nothing changed, and the last batch's own counts are zeros already
        for reason, count in last.items():
            counts[reason] = counts.get(reason, 0) + count
        value = {"batch": batch_id, "counts": counts, "last": last, **({STATE_COUNTED: True} if self.stateful else {})}
        self._versions.write(batch_id, value)
        self._saved = value


def saved_counts(spark: SparkSession, checkpoint: str, versions: Optional[Versions] = None) -> dict:
    """The counts so far, the last batch counted (-1 before the first) and that batch's own counts."""
    saved = (versions or Versions(spark, checkpoint, FOLDER)).latest() or read_json(spark, checkpoint, OLD_FILE)
    return {"batch": -1, "counts": {}, "last": {}} if saved is None else {"last": {}, **saved}


def state_counters(spark: SparkSession, checkpoint: str) -> dict:
    """The counters the operators of the checkpoint's last committed batch keep in their state, read from it (a
    Spark job per stateful operator, over its whole state)."""
    try:
        rows = spark.read.format("state-metadata").load(checkpoint).select("operatorId").distinct().collect()
    except Exception:  # noqa: BLE001 - no stateful operator, or no batch committed yet
        return {}
    counts: dict = {}
    for (operator_id,) in rows:
        try:
            metas = stored_metas(spark, checkpoint, operatorId=operator_id)
        except Exception:  # noqa: BLE001 - an operator without state yet
            continue
        for meta in metas:
            for name, count in {STATE_ROWS: meta.get("rows", 0), **meta.get("dropped", {})}.items():
                counts[name] = counts.get(name, 0) + count
    return counts
