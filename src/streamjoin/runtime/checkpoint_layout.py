"""How a query's operator state is laid out, saved in its checkpoint: the number of state buckets.

Stateful operators hash each join (or group) key into one of N buckets and keep state per bucket
(``operators.keyed_inputs.bucketed``). Under another N a key hashes to another bucket, whose state knows
nothing of it: a restart must use the N the checkpoint was written with. The count is saved in
``<checkpoint>/layout.json`` when the query first starts, read through Hadoop's FileSystem (so any
checkpoint URI Spark can write works), and checked before any query of a script starts.
"""
from __future__ import annotations

import json

from pyspark.sql import SparkSession

from ..errors import StreamjoinError

BUCKETS_PROPERTY = "streamjoin.buckets"
FILE = "layout.json"
BUCKETS_PER_CORE = 4  # several buckets a task: a slow bucket does not hold a whole core's share of the batch


class LayoutMismatch(StreamjoinError):
    """A query asked for another state layout than its checkpoint holds."""


def state_buckets(spark: SparkSession, query_id: str, checkpoint: str, properties: dict) -> int:
    """The bucket count ``query_id`` runs with: its checkpoint's; else ``SET 'streamjoin.buckets'``; else
    ``BUCKETS_PER_CORE`` per unit of Spark's default parallelism. A SET count that differs from the
    checkpoint's is refused."""
    asked = properties.get(BUCKETS_PROPERTY)
    saved = _read(spark, checkpoint)
    if saved is not None:
        if asked is not None and int(asked) != saved["buckets"]:
            raise LayoutMismatch(
                f"query {query_id}: its checkpoint ({checkpoint}) keeps operator state in {saved['buckets']} "
                f"buckets, and SET '{BUCKETS_PROPERTY}' = '{asked}' would look for each key in another bucket. "
                f"Set it to {saved['buckets']} (or remove the SET), or delete the checkpoint to run the query "
                f"from the start.")
        return saved["buckets"]
    if asked is not None:
        if int(asked) < 1:
            raise LayoutMismatch(f"SET '{BUCKETS_PROPERTY}' = '{asked}': the bucket count must be at least 1")
        return int(asked)
    return BUCKETS_PER_CORE * max(1, spark.sparkContext.defaultParallelism)


def save_layout(spark: SparkSession, checkpoint: str, buckets: int) -> None:
    """Write the layout once, when the checkpoint has none yet."""
    if _read(spark, checkpoint) is None:
        fs, path = _file(spark, checkpoint)
        out = fs.create(path, True)
        try:
            out.write(json.dumps({"buckets": buckets}).encode())
        finally:
            out.close()


def _read(spark: SparkSession, checkpoint: str) -> dict | None:
    fs, path = _file(spark, checkpoint)
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        return json.loads(spark._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def _file(spark: SparkSession, checkpoint: str):
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(jvm.org.apache.hadoop.fs.Path(checkpoint), FILE)
    return path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf()), path
