"""What a query's checkpoint was written for, saved beside it: the number of state buckets and the query.

Stateful operators hash each join (or group) key into one of N buckets and keep state per bucket
(``operators.keyed_inputs.bucketed``). Under another N a key hashes to another bucket, whose state knows
nothing of it: a restart must use the N the checkpoint was written with. A checkpoint also only serves the
query it was written by: another window, join or projection would read state (and offsets) laid down for
something else. So ``<checkpoint>/layout.json`` holds the count and the query's *fingerprint* (its
statement and the declarations of what it reads, each with its whitespace collapsed), written when the
query first starts, read through Hadoop's FileSystem (so any checkpoint URI Spark can write works), and
checked before any query of a script starts. A query that changed is refused, naming what changed;
``streamjoin run --reset QUERY`` starts it over. Editing other statements of the script changes neither the
query's id (``plan.statements``) nor its fingerprint.
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


def check_fingerprint(spark: SparkSession, query_id: str, checkpoint: str, fingerprint: dict) -> None:
    """Refuse to run ``query_id`` from a checkpoint written by another query (a layout written before
    fingerprints were saved is taken as it is)."""
    saved = (_read(spark, checkpoint) or {}).get("query")
    if saved is None or saved == fingerprint:
        return
    changed = [f"{part}: was `{saved.get(part)}`, now `{fingerprint.get(part)}`"
               for part in ("statement", "sources") if saved.get(part) != fingerprint.get(part)]
    raise LayoutMismatch(
        f"query {query_id} changed since its checkpoint ({checkpoint}) was written, and its state cannot serve the "
        f"new query. " + "; ".join(changed) + f". Run it with --reset {query_id} to start it over from its inputs' "
        f"beginning (its sink then receives its whole output again), or undo the change.")


def fingerprint(statement_text: str, sources) -> dict:
    """What a checkpoint is written for: the query's statement and the declarations of its sources."""
    return {"statement": " ".join(statement_text.split()),
            "sources": sorted(_declared(source) for source in sources)}


def _declared(source) -> str:
    columns = ", ".join(f"{c.name} {c.type}{' KEY' if c.origin == 'key' else ''}" for c in source.columns)
    return (f"{source.kind} {source.name} ({columns}) topic={source.topic} key={','.join(source.key_columns)} "
            f"formats={source.key_format}/{source.value_format} time={source.timestamp_column or source.watermark_column}")


def save_layout(spark: SparkSession, checkpoint: str, buckets: int, query: dict) -> None:
    """Write the layout once, when the checkpoint has none yet."""
    if _read(spark, checkpoint) is None:
        fs, path = _file(spark, checkpoint)
        out = fs.create(path, True)
        try:
            out.write(json.dumps({"buckets": buckets, "query": query}).encode())
        finally:
            out.close()


def reset(spark: SparkSession, checkpoint: str) -> bool:
    """Delete a query's checkpoint (through Hadoop's FileSystem): it starts over. Whether there was one."""
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(checkpoint)
    fs = path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())
    return bool(fs.exists(path) and fs.delete(path, True))


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
