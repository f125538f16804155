"""What a query's checkpoint was written for, saved beside it: the number of state buckets and the query.

Stateful operators hash each join (or group) key into one of N buckets and keep state per bucket
(``operators.keyed_inputs.bucketed``). Under another N a key hashes to another bucket, whose state knows
nothing of it: a restart must use the N the checkpoint was written with. A checkpoint also only serves the
query it was written by: another window, join or projection would read state (and offsets) laid down for
something else, and an operator's state only the streamjoin whose state layout wrote it. So
``<checkpoint>/layout.json`` holds the count and the query's *fingerprint* (its statement and the
declarations of what it reads, each with its whitespace collapsed, and the name and version of each of its
operators' state, ``operators.base.DeclaredState``), written when the query first starts, read through
Hadoop's FileSystem (so any checkpoint URI Spark can write works), and checked before any query of a script
starts, and the *state layout*: how ``operators.state`` keeps a bucket's meta value (1: in a value state of
its own; 2: in the segment map, one state variable). A query that changed, or whose state an older layout
wrote, is refused, naming what changed;
``streamjoin run --reset QUERY`` starts it over. Editing other statements of the script changes neither the
query's id (``plan.statements``) nor its fingerprint.
"""
from __future__ import annotations

from pyspark.sql import SparkSession

from ..errors import StreamjoinError
from ..plan.settings import BUCKETS
from .storage import delete, filesystem, jvm, read_json, write_json

FILE = "layout.json"
STATE_LAYOUT = 2  # what a new checkpoint is written with
BUCKETS_PER_CORE = 4  # several buckets a task: a slow bucket does not hold a whole core's share of the batch


class LayoutMismatch(StreamjoinError):
    """A query asked for another state layout than its checkpoint holds."""


def state_buckets(spark: SparkSession, query_id: str, checkpoint: str, properties: dict) -> int:
    """The bucket count ``query_id`` runs with: its checkpoint's; else ``SET 'streamjoin.buckets'``; else
    ``BUCKETS_PER_CORE`` per unit of Spark's default parallelism. A SET count that differs from the
    checkpoint's is refused."""
    asked = properties.get(BUCKETS)
    saved = _read(spark, checkpoint)
    if saved is not None:
        if asked is not None and int(asked) != saved["buckets"]:
            raise LayoutMismatch(
                f"query {query_id}: its checkpoint ({checkpoint}) keeps operator state in {saved['buckets']} "
                f"buckets, and SET '{BUCKETS}' = '{asked}' would look for each key in another bucket. "
                f"Set it to {saved['buckets']} (or remove the SET), or delete the checkpoint to run the query "
                f"from the start.")
        return saved["buckets"]
    if asked is not None:
        if int(asked) < 1:
            raise LayoutMismatch(f"SET '{BUCKETS}' = '{asked}': the bucket count must be at least 1")
        return int(asked)
    return BUCKETS_PER_CORE * max(1, spark.sparkContext.defaultParallelism)


def check_fingerprint(spark: SparkSession, query_id: str, checkpoint: str, fingerprint: dict) -> None:
    """Refuse to run ``query_id`` from a checkpoint written by another query, or holding operator state that
    another state layout wrote (a layout written before fingerprints were saved is taken as it is)."""
    saved = (_read(spark, checkpoint) or {}).get("query")
    if saved is None or saved == fingerprint:
        return
    again = (f"Run it with --reset {query_id} to start it over from its inputs' beginning (its sink then receives its "
             f"whole output again)")
    changed = [f"{part}: was `{saved.get(part)}`, now `{fingerprint.get(part)}`"
               for part in ("statement", "sources") if saved.get(part) != fingerprint.get(part)]
    if changed:
        raise LayoutMismatch(
            f"query {query_id} changed since its checkpoint ({checkpoint}) was written, and its state cannot serve "
            f"the new query. " + "; ".join(changed) + f". {again}, or undo the change.")
    if saved.get("state", []) == fingerprint["state"]:
        return  # a query without state, whose layout was written before state versions were recorded
    written = ", ".join(saved.get("state") or []) or "a layout from before state versions were recorded"
    raise LayoutMismatch(
        f"query {query_id}: its checkpoint ({checkpoint}) holds operator state written by another version of "
        f"streamjoin ({written}; this version keeps {', '.join(fingerprint['state'])}), which it cannot read. "
        f"{again}, or run it with the streamjoin that wrote the checkpoint.")


def fingerprint(statement_text: str, sources, states) -> dict:
    """What a checkpoint is written for: the query's statement, the declarations of its sources, and the
    layouts of its operators' state (``DeclaredState``s, in plan order)."""
    return {"statement": " ".join(statement_text.split()),
            "sources": sorted(_declared(source) for source in sources),
            "state": [f"{state.name} v{state.version}" for state in states]}


def _declared(source) -> str:
    columns = ", ".join(f"{c.name} {c.type}{' KEY' if c.origin == 'key' else ''}" for c in source.columns)
    return (f"{source.kind} {source.name} ({columns}) topic={source.topic} key={','.join(source.key_columns)} "
            f"formats={source.key_format}/{source.value_format} time={source.timestamp_column or source.watermark_column}")


def save_layout(spark: SparkSession, checkpoint: str, buckets: int, query: dict) -> int:
    """Write the layout once, when the checkpoint has none yet; return the state layout the checkpoint's
    operators keep their state in: its layout's; 1 for a checkpoint written before layouts were numbered (or
    saved) that holds a batch; ``STATE_LAYOUT`` for a new one."""
    saved = _read(spark, checkpoint)
    if saved is not None:
        return saved.get("state_layout", 1)
    layout = 1 if _batches(spark, checkpoint) else STATE_LAYOUT
    write_json(spark, {"buckets": buckets, "query": query, "state_layout": layout}, checkpoint, FILE)
    return layout


def _batches(spark: SparkSession, checkpoint: str) -> bool:
    """Whether the checkpoint's offsets log holds a batch."""
    fs, root = filesystem(spark, checkpoint)
    log = jvm(spark).Path(root, "offsets")
    return fs.exists(log) and any(f.getPath().getName().isdigit() for f in fs.listStatus(log))


def drop_unfinished_first_batch(spark: SparkSession, checkpoint: str) -> None:
    """Remove what a query killed while writing its first offsets left: Spark writes ``offsets/0`` as a hidden
    temporary file and renames it, so a kill -9 in between leaves ``offsets/.0.<uuid>.tmp`` and no batch. On
    restart Spark then starts from batch 0, finds the directory not empty and refuses to start
    (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``). Only when the offsets log holds no batch are its and the
    commit log's hidden files removed; nothing of a checkpoint with a batch is touched."""
    if _batches(spark, checkpoint):
        return
    fs, root = filesystem(spark, checkpoint)
    logs = [jvm(spark).Path(root, name) for name in ("offsets", "commits")]
    for log in logs:
        for f in fs.listStatus(log) if fs.exists(log) else []:
            if f.getPath().getName().startswith("."):
                fs.delete(f.getPath(), False)


def reset(spark: SparkSession, checkpoint: str) -> bool:
    """Delete a query's checkpoint (through Hadoop's FileSystem): it starts over. Whether there was one."""
    return delete(spark, checkpoint)


def _read(spark: SparkSession, checkpoint: str) -> dict | None:
    return read_json(spark, checkpoint, FILE)
