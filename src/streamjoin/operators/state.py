"""Keyed state for streamjoin's operators, on Spark's ``transformWithStateInPandas``, checkpointed with the
query in Spark's state store (RocksDB), restored exactly on restart and unchanged on a cluster.

Every operator keeps its state per bucket (a hash of the join or group key), **segmented** (``run_segmented``):
a map from segment number to one pickled frame of stored rows, and, under the reserved number
``META_SEGMENT``, a small pickled *meta* value (counters, and an index of the bucket's segments). The operator
reads only the segments its batch can touch and writes back only those that changed; expiry removes whole
segments by number without reading them. Its cost per batch follows the batch. A segment is a slice of event time (the windowed joins), or a
chunk of a table's change log (``new_table_log``: the table joins and aggregates), which the worker keeps
between batches as a ``LiveTable``: found by key and changed in place, at the cost of the batch's keys.

Measured here (``transformWithStateInPandas``, local[2]): a state call costs 0.3-0.5 ms, and a value moves
at ~12 ms per MB each way; so few calls, and bytes only for what a batch needs. Rows of a state bucket go
to the operator packed into Arrow blobs (``packed_by``), not row by row. A Python worker keeps the frames it
read or wrote (``_StoredSegments``), so a bucket that comes back to the same worker reads nothing.

One state variable, because Spark sets every state variable up again in every task of every micro-batch (its
encoders resolved by Catalyst's analyzer, its schema parsed: ~25 ms a task for a value state, ~55 ms for a map
state, measured in the Python worker). A checkpoint of state layout 1 (``runtime.checkpoint_layout``) keeps the
meta value in a value state of its own (``META``), and is read and written that way.

The meta value holds the bucket's counters (``rows``: rows held, and ``dropped``: reason -> records
dropped). What a batch changes in them leaves the operator as Spark observed metrics (``run_segmented``'s
``observe``), which the query's sink function adds up in the checkpoint: ``runtime.metrics`` reads that, never
the state. ``transformWithStateInPandas`` is used rather than
``applyInPandasWithState`` because several of them can be chained in one query (a join feeding a join or an
aggregate).
"""
from __future__ import annotations

import json
import os
import pickle
import time
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from pyspark import cloudpickle
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from ..connectors.late_records import LATE, ORIGIN, described

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from .base import LoweringContext

SegmentedStep = Callable[[Any, "pd.DataFrame", "Segments"], "tuple[pd.DataFrame, Any]"]
Idle = Callable[[Any, "pa.Table"], bool]  # (meta, a bucket's rows) -> whether the step would change nothing
_STATE_SCHEMA = StructType([StructField("value", BinaryType())])
_SEGMENT_KEY = StructType([StructField("segment", LongType())])
SEGMENTS = "segments"  # the state variable: a map from segment number to a pickled frame
META_SEGMENT = -2 ** 63  # the segment number of a group's meta value (counters ``rows``, ``dropped`` included)
META = "state"  # state layout 1: the value state holding a group's meta value
STATE_ROWS = "state_rows"  # the counter of rows held, as metrics name it
COUNTED = (STATE_ROWS, "late", "null_key", "no_time", "expired")  # every counter a meta value may hold
_COUNT = "__count_"  # an output column of a counter row: the change a step made to one counter
_KEPT: Optional[list] = None  # while a step of a query that keeps late records runs: the records it dropped


def keep_dropped(reason: str, rows: "pd.DataFrame", mask: "np.ndarray") -> None:
    """Keep the rows of ``rows`` (the running step's input) where ``mask`` holds as records dropped for
    ``reason``, when the step's query writes them to a late-records topic (``connectors.late_records``)."""
    import numpy as np

    if _KEPT is None or not np.any(mask):
        return
    from ..plan.nodes import ROWTIME, STREAM_TIME  # here: a worker of a query without late records skips the plan

    rows = rows[np.asarray(mask, dtype=bool)]
    origins = rows[ORIGIN].to_numpy(dtype=object) if ORIGIN in rows.columns else [None] * len(rows)

    def times(column):
        values = rows[column].to_numpy(dtype=float) if column in rows.columns else np.full(len(rows), np.nan)
        return [None if np.isnan(v) else int(v) for v in values]

    _KEPT.extend(described(reason, t, clock, origin)
                 for t, clock, origin in zip(times(ROWTIME), times(STREAM_TIME), origins))


# ------------------------------------------------------------------ where a Python worker's time goes

PROFILE_DIR = os.environ.get("STREAMJOIN_PROFILE")  # set by ``benchmarks/run.py --phases``; off otherwise
_PHASES: dict[str, float] = {}  # phase -> seconds this worker process spent in it


def _timed(phase: str, started: float, excluding: float = 0.0) -> float:
    """Add the time since ``started``, less ``excluding`` (time counted in other phases meanwhile), to
    ``phase`` (when profiling); the current time."""
    now = time.perf_counter()
    if PROFILE_DIR:
        _PHASES[phase] = _PHASES.get(phase, 0.0) + now - started - excluding
    return now


def _in_state() -> float:
    return _PHASES.get("state_read", 0.0) + _PHASES.get("state_write", 0.0)


def _write_phases() -> None:
    """This worker's totals so far, in ``<PROFILE_DIR>/<pid>.json`` (``benchmarks.common`` sums the files)."""
    if PROFILE_DIR:
        path = os.path.join(PROFILE_DIR, f"{os.getpid()}.json")
        with open(path + ".tmp", "w") as out:
            json.dump(_PHASES, out)
        os.replace(path + ".tmp", path)


class Segments:
    """A group's segments as the operator sees them: numbered frames, read and written one at a time; and
    ``memo``, what the operator derived from them (a table built from its change log), which may survive
    to the group's next batch when the segments are still those it was derived from, and is empty else."""

    memo: dict

    def get(self, segment: int) -> "pd.DataFrame": ...
    def put(self, segment: int, frame: "pd.DataFrame") -> None: ...
    def remove(self, segment: int) -> None: ...


def by_segment(frame: "pd.DataFrame", segment: "np.ndarray") -> dict[int, "pd.DataFrame"]:
    """``frame``'s rows by their ``segment`` number (one per row), each part in the frame's order. (Grouped by a
    Series: given a bare array, pandas first looks it up as a column label and formats the whole array into the
    error it catches, milliseconds per call on a few hundred rows.)"""
    import pandas as pd

    if len(segment) and segment.min() == segment.max():  # the usual case, without a groupby: ~1 ms less
        return {int(segment[0]): frame.reset_index(drop=True)}
    parts = frame.groupby(pd.Series(segment, index=frame.index), sort=False)
    return {int(i): part.reset_index(drop=True) for i, part in parts}


class InMemorySegments(Segments):
    """Segments in a dict, for driving a segmented step without Spark; counts the reads and writes."""

    def __init__(self):
        self.frames: dict[int, Any] = {}
        self.memo: dict = {}
        self.reads = self.writes = 0

    def get(self, segment):
        self.reads += 1
        return self.frames[segment]

    def put(self, segment, frame):
        self.writes += 1
        self.frames[segment] = frame

    def remove(self, segment):
        self.writes += 1
        del self.frames[segment]


class _StoredSegments(Segments):
    """A group's segments in Spark's state store (a map state), read through the worker's cache.

    Spark keeps its Python workers across micro-batches, so the frames a worker read or wrote for a group
    are usually still in its memory the next time that group comes to it: ``_CACHE`` keeps them, with the
    token of the group's state they belong to. The token is drawn anew whenever a batch changes a segment
    and is saved in the group's meta value, so a cached frame is used only while the state store holds
    the very state it was cached from; after a failed or re-run batch (the store rolled back) or on another
    worker, the tokens differ and the segments are read from the store. Frames handed to ``put`` or
    returned by ``get`` are shared with the cache: operators do not modify them."""

    def __init__(self, map_state, frames: dict, memo: dict):
        self.map = map_state
        self.frames = frames
        self.memo = memo
        self.changed = False

    def get(self, segment):
        frame = self.frames.get(segment)
        if frame is None:
            started = time.perf_counter()
            frame = self.frames[segment] = _naive_frame(pickle.loads(self.map.getValue((int(segment),))[0]))
            _timed("state_read", started)
        return frame

    def put(self, segment, frame):
        started = time.perf_counter()
        self.map.updateValue((int(segment),), (pickle.dumps(frame, protocol=5),))
        _timed("state_write", started)
        self.frames[segment] = frame
        self.changed = True

    def remove(self, segment):
        started = time.perf_counter()
        self.map.removeKey((int(segment),))
        _timed("state_write", started)
        self.frames.pop(segment, None)
        self.changed = True


TOKEN = "__token"  # in a segmented group's meta: which state of its segments the worker cache may hold
CACHE_BYTES = int(os.environ.get("STREAMJOIN_STATE_CACHE_MB", "1024")) * 2 ** 20  # per Python worker
# (processor, group) -> (token, segment -> frame, memo, bytes)
_CACHE: "OrderedDict[tuple, tuple[str, dict, dict, int]]" = OrderedDict()
_CACHED_BYTES = [0]


def _cached(entry: tuple, token) -> tuple[dict, dict]:
    """Copies of the group's cached frames and memo if they belong to ``token``'s state, else empty ones (a
    batch that fails half-way must leave the cache as it found it)."""
    cached = _CACHE.get(entry)
    if token is None or cached is None or cached[0] != token:
        return {}, {}
    # a memo changed in place (``LiveTable``) by a batch that then failed is valid for no token
    return dict(cached[1]), {k: m for k, m in cached[2].items() if getattr(m, "valid_for", token) == token}


def _keep(entry: tuple, token: str, frames: dict, memo: dict) -> None:
    """Cache a group's frames and memo under ``token``, evicting the least recently used groups past
    ``CACHE_BYTES``."""
    for memo_value in memo.values():
        if isinstance(memo_value, LiveTable):
            memo_value.valid_for = token
    previous = _CACHE.pop(entry, None)
    if previous is not None and previous[0] == token and previous[1].keys() == frames.keys() and previous[2].keys() == memo.keys():
        _CACHE[entry] = previous  # the same state, nothing more read: the same frames, no need to size them
        return
    size = _size(frames, memo)
    _CACHED_BYTES[0] += size - (previous[3] if previous is not None else 0)
    _CACHE[entry] = (token, frames, memo, size)
    while _CACHED_BYTES[0] > CACHE_BYTES and len(_CACHE) > 1:
        _, evicted = _CACHE.popitem(last=False)
        _CACHED_BYTES[0] -= evicted[3]


def _size(frames: dict, memo: dict) -> int:
    """A cache entry's memory, roughly: strings count as their pointers."""
    return sum(int(f.memory_usage(index=False, deep=False).sum()) if hasattr(f, "memory_usage") else f.nbytes()
               for f in (*frames.values(), *memo.values()) if hasattr(f, "memory_usage") or isinstance(f, LiveTable))


class _SegmentedStateProcessor(StatefulProcessor):
    """Spark also unpickles the processor in a fresh Python process on the driver, when a query plans its
    first batch, only to call ``init``; the step (and with it pandas and the operators) is therefore kept
    as bytes and loaded on first use, which saves most of a second per stateful operator and query start."""

    def __init__(self, step: SegmentedStep, input_columns: list[str], output_schema: StructType,
                 idle: Optional[Idle] = None, counted: bool = False, meta_in_value_state: bool = False,
                 late: bool = False):
        self.step_bytes = cloudpickle.dumps((step, idle))
        self.meta_in_value_state = meta_in_value_state  # state layout 1
        self.step = self.idle = None
        self.input_columns = input_columns
        self.columns = output_schema.fieldNames()
        self.counted = counted  # the output ends with a ``_COUNT`` column per counter (``run_segmented``)
        self.late = late  # the output has a ``LATE`` column: the step's dropped records leave on rows of their own
        self.identity = uuid.uuid4().hex  # made once on the driver: every task of this run shares it

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.map = handle.getMapState(SEGMENTS, _SEGMENT_KEY, _STATE_SCHEMA)
        self.state = handle.getValueState(META, _STATE_SCHEMA) if self.meta_in_value_state else None

    def _stored_meta(self) -> bytes | None:
        """The group's pickled meta value (one call to the state store), or None."""
        stored = self.state.get() if self.state is not None else self.map.getValue((META_SEGMENT,))
        return stored[0] if stored is not None else None

    def _store_meta(self, value: bytes) -> None:
        if self.state is not None:
            self.state.update((value,))
        else:
            self.map.updateValue((META_SEGMENT,), (value,))

    def handleInputRows(self, key, rows: Iterator["pd.DataFrame"], timerValues) -> Iterator["pd.DataFrame"]:
        started = time.perf_counter()
        if self.step is None:
            self.step, self.idle = cloudpickle.loads(self.step_bytes)
        packed = unpacked_table([blob for frame in rows for blob in frame.iloc[:, -1]])  # ``packed_by``'s blobs
        now = _timed("input", started)
        stored = self._stored_meta()
        meta = pickle.loads(stored) if stored is not None else None
        now = _timed("state_read", now)
        if meta is not None and self.idle is not None and self.idle(meta, packed):
            _timed("step", now)
            _write_phases()
            return  # the batch changes nothing here: no frame built, no segment read, nothing written
        batch = as_frame(packed, self.input_columns)
        now = _timed("input", now)
        entry = (self.identity, tuple(key))
        segments = _StoredSegments(self.map, *_cached(entry, meta and meta.get(TOKEN)))
        in_state = _in_state()
        before = _counters(meta)
        global _KEPT
        _KEPT = [] if self.late else None
        try:
            out, meta = self.step(meta, batch, segments)
        finally:
            kept, _KEPT = _KEPT, None
        now = _timed("step", now, excluding=_in_state() - in_state)  # segments read or written in the step
        if segments.changed or TOKEN not in meta:
            meta[TOKEN] = uuid.uuid4().hex
        value = pickle.dumps(meta, protocol=5)
        if value != stored:  # a batch that changed nothing (a tick with nothing due) writes nothing
            self._store_meta(value)
        _keep(entry, meta[TOKEN], segments.frames, segments.memo)
        now = _timed("state_write", now)
        if len(out):  # an empty frame's columns may have no usable type
            out = out.reindex(columns=self.columns)
            import pandas as pd

            if self.late:
                out[LATE] = pd.Series(None, index=out.index, dtype=object)
            if self.counted:
                for name in COUNTED:
                    out[_COUNT + name] = pd.Series(pd.NA, index=out.index, dtype="Int64")
            _timed("output", now)
            yield out
        if kept:
            yield _side_rows(self.columns, len(kept), {LATE: kept})
        if self.counted:
            changes = _counters(meta)
            changes = {name: changes.get(name, 0) - before.get(name, 0) for name in COUNTED}
            if any(changes.values()):
                yield _side_rows(self.columns, 1, {_COUNT + name: [int(change)] for name, change in changes.items()})
        _write_phases()

    def close(self) -> None:
        pass


def stored_metas(spark, checkpoint: str, **options) -> list[dict]:
    """Every bucket's meta value in the state of a checkpoint's stateful operator, of either state layout
    (``options``: the ``statestore`` reader's, ``operatorId``, ``batchId``); a Spark job over the whole state."""
    from pyspark.sql import functions as F

    reader = spark.read.format("statestore").options(**{k: str(v) for k, v in options.items()})
    try:
        rows = (reader.option("stateVarName", SEGMENTS).load(checkpoint)
                .where(F.col("user_map_key.segment") == META_SEGMENT).select("user_map_value.value").collect())
    except Exception:  # noqa: BLE001 - state layout 1 (or no state yet)
        rows = reader.option("stateVarName", META).load(checkpoint).select("value.value").collect()
    return [pickle.loads(blob) for (blob,) in rows if blob is not None]


def _counters(meta) -> dict:
    """A meta value's counters, by ``COUNTED`` name."""
    if meta is None:
        return {}
    unknown = set(meta.get("dropped", {})) - set(COUNTED)
    if unknown:
        raise ValueError(f"counters {sorted(unknown)} are not among operators.state.COUNTED")
    return {STATE_ROWS: meta.get("rows", 0), **meta.get("dropped", {})}


def _side_rows(columns: list[str], n: int, values: dict) -> "pd.DataFrame":
    """``n`` output rows beside the operator's own: ``values`` (a counter row's changes, or the descriptions of
    dropped records) in their columns, every other column null."""
    import pandas as pd

    rows = pd.DataFrame({c: pd.Series([None] * n, dtype="Int64" if c.startswith(_COUNT) else object) for c in columns})
    for c, column in values.items():
        rows[c] = pd.Series(column, dtype="Int64" if c.startswith(_COUNT) else object)
    return rows


def run_segmented(df: "DataFrame", bucket: str, step: SegmentedStep, output_schema: StructType,
                  ctx: "LoweringContext", idle: Optional[Idle] = None) -> "DataFrame":
    """Apply ``step(meta, rows, segments) -> (output, meta)`` per state bucket (the column ``bucket``):
    ``meta`` is the bucket's small pickled value (None at first), ``segments`` its segment map
    (``Segments``). Rows arrive packed (``packed_by``). ``idle(meta, rows)``, given the rows as an Arrow
    table, says whether the step would return no output and ``meta`` unchanged (typically: the batch brings
    the bucket only a tick and nothing is due); the step is then not called at all. Most buckets of a
    time-driven operator are in that case in most micro-batches of a lightly loaded query, and a step costs
    milliseconds of pandas even on one row.

    ``ctx.observe_counts(rows, {name: column})``, when given, adds up columns per batch
    as Spark observed metrics: what each step changed in its meta value's counters then leaves the operator on
    one extra output row per bucket (``_COUNT`` columns, everything else null), is observed and filtered out
    here. The query's sink function adds the batch's changes to the checkpoint (``runtime.observed_counts``), so
    the counts are read without reading the state. ``ctx.late_records``: the records a step drops (``keep_dropped``)
    leave the same way, on rows of their own (``LATE``), collected into an observed metric for the query's
    late-records topic. ``ctx.meta_in_value_state``: the query's checkpoint is of state layout 1."""
    from pyspark.sql import functions as F

    schema, observe, late = output_schema, ctx.observe_counts, ctx.late_records
    if late is not None:
        schema = StructType(schema.fields + [StructField(LATE, StringType())])
    if observe is not None:
        schema = StructType(schema.fields + [StructField(_COUNT + name, LongType()) for name in COUNTED])
    processor = _SegmentedStateProcessor(step, df.columns, schema, idle, counted=observe is not None,
                                         meta_in_value_state=ctx.meta_in_value_state, late=late is not None)
    out = packed_by(df, bucket).groupBy(bucket).transformWithStateInPandas(processor, schema, "append", "None")
    if late is not None:
        out = late.observe(out, F.col(LATE)).where(F.col(LATE).isNull()).drop(LATE)
    if observe is None:
        return out
    out = observe(out, {name: F.col(_COUNT + name) for name in COUNTED})
    return out.where(F.col(_COUNT + STATE_ROWS).isNull()).drop(*(_COUNT + name for name in COUNTED))


# ------------------------------------------------------------------ rows packed into Arrow blobs per bucket

PACKED = "__rows"


def packed_by(df: "DataFrame", bucket: str) -> "DataFrame":
    """``df``'s rows as a few rows per bucket: (bucket, Arrow IPC stream of that bucket's rows of one input
    partition). ``transformWithStateInPandas`` hands each group's rows to Python row by row (a tuple per
    row, then a frame built from the tuples: ~25 us a row here); packed, a micro-batch of a bucket arrives
    as a handful of blobs that become one frame at Arrow's speed. (The output needs no packing: the worker
    turns the frames an operator yields into Arrow batches column by column.)"""
    from pyspark.sql.types import IntegerType

    schema = StructType([StructField(bucket, IntegerType()), StructField(PACKED, BinaryType())])

    def pack(batches):
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        batches = list(batches)
        if not batches or not sum(b.num_rows for b in batches):
            return
        started = time.perf_counter()
        table = pa.Table.from_batches(batches)
        table = table.take(pc.sort_indices(table[bucket]))  # stable: each bucket keeps the partition's order
        buckets = table[bucket].to_numpy()
        starts = [0, *(np.flatnonzero(np.diff(buckets)) + 1).tolist(), len(buckets)]
        blobs = [_ipc(table.slice(a, b - a)) for a, b in zip(starts, starts[1:])]
        _timed("pack", started)
        _write_phases()
        yield pa.RecordBatch.from_arrays([pa.array([int(buckets[a]) for a in starts[:-1]], pa.int32()),
                                          pa.array(blobs, pa.binary())], names=[bucket, PACKED])

    # An operator's input is a union of scans of the batch's slice (a clock-bearing slice is one partition
    # each): with more of them than cores, the last ones waited for a second wave of tasks. At most one task
    # per core instead: 0.1-0.2 s sooner a micro-batch for a windowed join here (``benchmarks/run.py latency``).
    df = df.coalesce(df.sparkSession.sparkContext.defaultParallelism)
    return df.mapInArrow(pack, schema)


def unpacked_table(blobs: list):
    """The rows of a bucket's blobs as one Arrow table."""
    import pyarrow as pa

    return pa.concat_tables([pa.ipc.open_stream(blob).read_all() for blob in blobs])


def as_frame(table, columns: list[str]) -> "pd.DataFrame":
    """A bucket's rows as one frame named ``columns``. An array value becomes a tuple and a struct or map value a
    ``Row``, so that any can be a join or grouping key (compared and hashed); the worker writes a tuple back
    as an array and a ``Row`` (a dict) as a struct or a map. A timestamp becomes a naive UTC ``datetime64`` (the session
    time zone is UTC, and the worker reads a naive one back in it): pandas keeps a zoned column as objects as
    soon as it leaves its frame (``to_numpy``, ``np.where``), and the operators' vectorised steps then ran
    several times slower on every query with a timestamp column."""
    import pandas as pd
    import pyarrow as pa

    frame = _naive_table(table).to_pandas(maps_as_pydicts="lossy").set_axis(columns, axis=1)
    for name, field, column in zip(columns, table.schema, table.columns):
        kind = field.type
        if pa.types.is_int64(kind) and column.null_count and not _exact_as_float(column):
            frame[name] = pd.Series(column.to_pylist(), index=frame.index, dtype=object)
        if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_struct(kind) or pa.types.is_map(kind):
            frame[name] = [hashable(v) for v in frame[name]]
    return frame


FLOAT_EXACT = 2 ** 53  # the largest magnitude below which every integer is a float64


def _exact_as_float(column) -> bool:
    """Whether an int64 column's values all survive pandas' float64, which holds a column with nulls: not a BIGINT
    beyond 2^53 (a snowflake id, ksqlDB's Long.MAX_VALUE), which then stays whole, in an object column."""
    import pyarrow.compute as pc

    low, high = pc.min_max(column).values()
    return low.as_py() is None or (-FLOAT_EXACT <= low.as_py() and high.as_py() <= FLOAT_EXACT)


def _naive_frame(frame):
    """A stored frame with zoned timestamp columns (written before ``as_frame`` made them naive) as naive UTC."""
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        return frame
    for c in [c for c, t in frame.dtypes.items() if isinstance(t, pd.DatetimeTZDtype)]:
        frame[c] = frame[c].dt.tz_convert(None)
    return frame


def _naive_table(table):
    """``table`` with its zoned timestamp columns as naive ones holding the same UTC wall-clock values."""
    import pyarrow as pa

    zoned = [i for i, f in enumerate(table.schema) if pa.types.is_timestamp(f.type) and f.type.tz is not None]
    for i in zoned:
        field = table.schema.field(i)
        table = table.set_column(i, field.with_type(pa.timestamp(field.type.unit)),
                                 table.column(i).cast(pa.timestamp(field.type.unit)))
    return table


class Row(dict):
    """A struct value that can be hashed (its fields are hashable: ``hashable``)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))


def hashable(value):
    """An array (a numpy array, nested ones too) as a tuple, a struct (a dict) as a ``Row``; None stays None."""
    if value is None or isinstance(value, (str, bytes)):
        return value
    if isinstance(value, dict):
        return Row((k, hashable(v)) for k, v in value.items())
    if hasattr(value, "__len__"):
        return tuple(hashable(v) for v in value)
    return value


def _ipc(table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


# ------------------------------------------------------------------ a keyed table as a log of change chunks

GONE = "__gone"  # in a change chunk: the change removed its key (a tombstone, or a row failing the ON filter)
MAX_CHUNKS = 16


def new_table_log(name: str = "table", first_segment: int = 0) -> dict:
    """The meta part of an empty table log: its chunks' segment numbers and row counts, the next number, rows
    logged, and its name (an operator keeping several logs in one bucket gives each a name and its own range of
    segment numbers)."""
    return {"chunks": [], "sizes": [], "next": first_segment, "logged": 0, "name": name}


def read_table(log: dict, segments: Segments, keys: list[str], columns: list[str]) -> "LiveTable":
    """The table a log holds, as a ``LiveTable`` (found by key, changed in place): the memo when it is still
    there, else the chunks replayed (``read_frame``)."""
    name = log.get("name", "table")
    table = segments.memo.get(name)
    if not isinstance(table, LiveTable):
        table = segments.memo[name] = LiveTable(keys, columns, read_frame(log, segments, keys, columns))
    return table


def read_frame(log: dict, segments: Segments, keys: list[str], columns: list[str]) -> "pd.DataFrame":
    """The table a log holds as one frame (one row per live key: ``keys + columns``, in the order of their last
    change): the memo when it is still there, else the chunks replayed in order (what ``read_table`` builds a
    cold worker's ``LiveTable`` from; every operator now reads its tables that way).

    Replayed in one pass when the chunks' column types agree: the last change of every key, in the order of
    those changes, less removals, is the table ``merge_changes`` builds chunk by chunk (rows and row order);
    a cold read (a bucket that comes to another Python worker) then costs the log once, not once per chunk
    (measured: 16 chunks over a 125k-row table, 230 ms chunk by chunk, 50 ms in one pass). Chunks whose
    types differ (a column holding nulls in one batch only) are merged one by one, as their types mix."""
    import pandas as pd

    name = log.get("name", "table")
    table = segments.memo.get(name)
    if isinstance(table, LiveTable):
        return table.frame()
    if table is None:
        # by position: see stream_stream's reading of its segments
        chunks = [segments.get(chunk).set_axis(keys + columns + [GONE], axis=1) for chunk in log["chunks"]]
        if chunks and len({tuple(chunk.dtypes) for chunk in chunks}) == 1:
            changes = pd.concat(chunks, ignore_index=True) if len(chunks) > 1 else chunks[0]
            last = changes[~key_index(changes, keys).duplicated(keep="last")]
            table = last[~last[GONE].to_numpy(dtype=bool)].reset_index(drop=True)
        else:
            table = pd.DataFrame(columns=keys + columns)
            for chunk in chunks:
                table = merge_changes(table, chunk, keys)
        table = segments.memo[name] = table[keys + columns]
    return table


def log_changes(log: dict, segments: Segments, changes: "pd.DataFrame", table, keys: list[str]) -> None:
    """Append a batch's changes (the last per key, ``keys`` first, ``GONE`` set on removals) as one chunk, and
    keep ``table`` (the table after them: a ``LiveTable`` or a frame) as the memo.

    The log is compacted size-tiered, as an LSM tree is: while the new chunk holds at least half as many rows
    as the chunk before it (or the log has ``MAX_CHUNKS``), the two are merged into one (the last change per key
    wins; a removal is dropped once nothing older is left under it). A row is merged O(log n) times in all, so
    a batch costs its changes, amortised, never a write of the whole table; the log keeps at most
    ``MAX_CHUNKS`` chunks, which a cold read replays."""
    segments.memo[log.get("name", "table")] = table
    if not len(changes):
        return
    sizes = log.setdefault("sizes", _old_sizes(log))
    number = log["next"]
    log["next"] += 1
    chunk = changes if log["chunks"] else _live(changes)
    while log["chunks"] and (2 * len(chunk) >= sizes[-1] or len(log["chunks"]) >= MAX_CHUNKS):
        older = log["chunks"].pop()
        sizes.pop()
        chunk = _merged(segments.get(older), chunk, len(keys), bottom=not log["chunks"])
        segments.remove(older)
    if not len(chunk) and not log["chunks"]:  # every row removed: an empty log
        sizes.clear()
        log["logged"] = 0
        return
    segments.put(number, chunk)
    log["chunks"].append(number)
    sizes.append(len(chunk))
    log["logged"] = sum(sizes)


def _old_sizes(log: dict) -> list:
    """Chunk sizes for a log written before they were kept: its rows spread evenly (they only steer merging)."""
    n = len(log["chunks"])
    return [log["logged"] // n] * n if n else []


def _live(chunk: "pd.DataFrame") -> "pd.DataFrame":
    """A chunk with nothing older under it: its removals say nothing."""
    gone = chunk[GONE].to_numpy(dtype=bool)
    return chunk[~gone].reset_index(drop=True) if gone.any() else chunk


def _merged(older: "pd.DataFrame", newer: "pd.DataFrame", n_keys: int, bottom: bool) -> "pd.DataFrame":
    """Two consecutive chunks as one: each key's last change, in the order of those changes."""
    import pandas as pd

    both = pd.concat([older.set_axis(newer.columns, axis=1), newer], ignore_index=True)
    last = both[~key_index(both, list(newer.columns[:n_keys])).duplicated(keep="last")].reset_index(drop=True)
    return _live(last) if bottom else last


def apply_changes(log: dict, segments: Segments, stored: "LiveTable", changes: "pd.DataFrame",
                  keys: list[str]) -> "LiveTable":
    """``stored`` (``read_table``'s) changed in place by ``changes`` (at most one per key), with the changes logged
    (``log_changes``)."""
    stored.apply(changes)
    log_changes(log, segments, changes, stored, keys)
    return stored


def remove_where(stored: "LiveTable", mask: "np.ndarray", changes: "pd.DataFrame", keys: list[str]):
    """Remove from ``stored`` its live rows where ``mask`` (over ``stored.column``'s positions) holds: what a
    batch expires or closes, found by one numpy pass. Returns the rows removed (``GONE`` set) and the batch's
    ``changes`` with those removals in, a removal replacing its key's change: what ``log_changes`` logs."""
    import pandas as pd

    gone = stored.frame_at(stored.positions_where(mask)).assign(**{GONE: True})
    if not len(gone):
        return gone, changes
    stored.apply(gone)
    kept = changes[~key_index(changes, keys).isin(key_index(gone, keys))] if len(changes) else changes
    return gone, pd.concat([kept, gone.reindex(columns=changes.columns)], ignore_index=True)


class LiveTable:
    """A keyed table as a Python worker keeps it between micro-batches: found by key and changed in place, so that
    a batch costs what it looks up and changes, not the table's size.

    Rows live at fixed positions in growable column arrays. Keys are found through a pandas index built once over
    the positions it covers (its hash table is kept with it), plus a dict of the keys added since; a removed
    row's position stays, dead, and takes its key back if it returns. Both are rebuilt, dead rows dropped, once
    the dict or the dead rows outgrow an eighth of the table: O(table) work after O(table) changes. ``frame()``
    gives the live rows in the order of their last change (a stamp per row), the order a replay of the log
    gives: an operator sees the same table however its worker came by it.

    A Python worker's cache may hand the same object to the group's next batch: ``valid_for`` names the state
    token it is valid for (``_keep`` sets it); a change clears it first, so a batch that fails half-way leaves
    an object the cache will not hand out again (``_cached``)."""

    def __init__(self, keys: list[str], columns: list[str], frame: "pd.DataFrame"):
        self.keys, self.columns = list(keys), list(columns)
        self.valid_for: Optional[str] = None
        self._rebuild({c: frame[c].to_numpy() for c in self.keys + self.columns}, len(frame))

    def _rebuild(self, values: dict, size: int) -> None:
        import numpy as np
        import pandas as pd

        self.values, self.size = values, size
        self.alive = np.ones(size, dtype=bool)
        self.stamp = np.arange(size, dtype=np.int64)
        self.next_stamp = size
        self.live = size
        self.index = key_index(pd.DataFrame({k: values[k][:size] for k in self.keys}), self.keys)
        self.added: dict = {}  # key -> position, for rows past the index
        self.groups: Optional[tuple] = None  # (columns, the positions under each of their values): ``rows_for``

    def __len__(self) -> int:
        return self.live

    def nbytes(self) -> int:
        """Its memory, roughly (strings count as their pointers; the index as its keys)."""
        return sum(v.nbytes for v in self.values.values()) * 2 + self.alive.nbytes + self.stamp.nbytes

    def column(self, name: str) -> "np.ndarray":
        """A column's values by position (``find``'s positions index it)."""
        return self.values[name][:self.size]

    def find(self, frame: "pd.DataFrame") -> "np.ndarray":
        """The position of the live row holding each row's key of ``frame`` (its columns named as the table's
        keys), or -1."""
        import numpy as np

        at = self._positions(frame)
        found = at >= 0
        found[found] = self.alive[at[found]]
        return np.where(found, at, -1)

    def rows_for(self, wanted: "pd.DataFrame", by: Optional[list[str]] = None) -> "pd.DataFrame":
        """The live rows whose values of ``by`` (the table's keys, or other columns of it: then any number of rows
        per wanted value) are among ``wanted``'s, in the order of their last change."""
        import numpy as np

        by = list(by or self.keys)
        if by == self.keys:
            at = np.unique(self.find(wanted))
            return self.frame_at(at[at >= 0])
        groups = self._groups(tuple(by))
        at = np.fromiter((p for value in set(_hashed([wanted[c].to_numpy() for c in by])) for p in groups.get(value, ())),
                         dtype=np.int64)
        return self.frame_at(at[self.alive[at]])

    def _groups(self, by: tuple) -> dict:
        """The positions of the rows under each value of the columns ``by`` (built on first use, kept up to date by
        ``apply``, dropped with the index)."""
        if self.groups is None or self.groups[0] != by:
            groups: dict = {}
            for position, value in enumerate(_hashed([self.values[c][:self.size] for c in by])):
                groups.setdefault(value, set()).add(position)
            self.groups = (by, groups)
        return self.groups[1]

    def positions(self) -> "np.ndarray":
        """The positions of the live rows."""
        import numpy as np

        return np.flatnonzero(self.alive[:self.size])

    def positions_where(self, mask: "np.ndarray") -> "np.ndarray":
        """The positions of the live rows where ``mask`` (over ``column``'s positions) holds."""
        import numpy as np

        return np.flatnonzero(mask & self.alive[:self.size])

    def frame(self) -> "pd.DataFrame":
        """The live rows (``keys + columns``), in the order of their last change."""
        return self.frame_at(self.positions())

    def frame_at(self, at: "np.ndarray") -> "pd.DataFrame":
        """The rows at positions ``at``, in the order of their last change."""
        import pandas as pd

        at = self._in_order(at)
        return pd.DataFrame({c: self.values[c][at] for c in self.keys + self.columns})

    def _in_order(self, at: "np.ndarray") -> "np.ndarray":
        """Positions ``at`` in the order of their rows' last change."""
        import numpy as np

        return at[np.argsort(self.stamp[at], kind="stable")]

    def apply(self, changes: "pd.DataFrame") -> None:
        """Apply a batch's changes (``keys + columns + [GONE]``, at most one per key, in the order they were made)."""
        import numpy as np

        if not len(changes):
            return
        self.valid_for = None
        gone = changes[GONE].to_numpy(dtype=bool)
        if not self.size:  # the first rows: the columns take their types
            stamp = self.next_stamp
            self._rebuild({c: changes[c].to_numpy()[~gone] for c in self.keys + self.columns}, int((~gone).sum()))
            self.stamp += stamp
            self.next_stamp = stamp + len(changes)
            return
        at = self._positions(changes)
        old = at >= 0
        was_alive = np.zeros(len(at), dtype=bool)
        was_alive[old] = self.alive[at[old]]
        new = ~old & ~gone
        first = self.size
        at[new] = first + np.arange(int(new.sum()))
        self._grow(first + int(new.sum()))
        kept = old | new
        if self.groups is not None:
            self._regroup(changes, at, old & ~gone, new)
        for c in self.keys + self.columns:
            self._assign(c, at[kept & ~gone], changes[c].to_numpy()[kept & ~gone])
        self.alive[at[kept]] = ~gone[kept]
        self.stamp[at[kept]] = self.next_stamp + np.flatnonzero(kept)
        self.next_stamp += len(changes)
        self.live += int((~gone & ~was_alive).sum() - (gone & was_alive).sum())
        if new.any():
            key_values = [changes[k].to_numpy()[new] for k in self.keys]
            self.added.update(zip(_hashed(key_values), at[new].tolist()))
        dead = self.size - self.live
        if len(self.added) > max(4096, self.live // 8) or dead > max(4096, self.live // 8):
            live = self._in_order(np.flatnonzero(self.alive))
            self._rebuild({c: self.values[c][live] for c in self.values}, len(live))

    def _regroup(self, changes: "pd.DataFrame", at: "np.ndarray", rewritten: "np.ndarray", new: "np.ndarray") -> None:
        """Keep ``_groups`` up to date before a change is written: a rewritten row whose grouped values change
        moves to its new group (a removed row keeps its values and its group, where ``alive`` hides it); a new
        row joins its group."""
        by, groups = self.groups
        moved = at[rewritten]
        before = _hashed([self.values[c][moved] for c in by])
        after = _hashed([changes[c].to_numpy()[rewritten] for c in by])
        for position, old_value, value in zip(moved.tolist(), before, after):
            if old_value != value:
                groups[old_value].discard(position)
                groups.setdefault(value, set()).add(position)
        for position, value in zip(at[new].tolist(), _hashed([changes[c].to_numpy()[new] for c in by])):
            groups.setdefault(value, set()).add(position)

    def _positions(self, frame: "pd.DataFrame") -> "np.ndarray":
        """Each row's key's position, live or dead, or -1."""
        import numpy as np

        at = self.index.get_indexer(key_index(frame, self.keys)) if len(self.index) else np.full(len(frame), -1)
        if self.added:
            missing = np.flatnonzero(at < 0)
            if len(missing):
                key_values = [frame[k].to_numpy()[missing] for k in self.keys]
                at[missing] = [self.added.get(key, -1) for key in _hashed(key_values)]
        return at

    def _grow(self, size: int) -> None:
        import numpy as np

        capacity = len(self.alive)
        if size > capacity:
            capacity = max(size, 2 * capacity, 64)
            for c, values in self.values.items():
                grown = np.empty(capacity, dtype=values.dtype)
                if values.dtype == object:
                    grown[:] = None
                grown[:self.size] = values[:self.size]
                self.values[c] = grown
            self.alive = np.concatenate([self.alive[:self.size], np.zeros(capacity - self.size, bool)])
            self.stamp = np.concatenate([self.stamp[:self.size], np.zeros(capacity - self.size, np.int64)])
        self.size = size

    def _assign(self, name: str, at: "np.ndarray", values: "np.ndarray") -> None:
        """Write ``values`` at positions ``at``, widening the column's type as ``pandas.concat`` would."""
        column = self.values[name]
        if values.dtype != column.dtype:
            common = _common_dtype(column.dtype, values.dtype)
            if column.dtype != common:
                column = self.values[name] = _as_dtype(column, common)
            values = _as_dtype(values, common)
        column[at] = values


def _hashed(key_values: list) -> list:
    """Key values (one array per key column) as dict keys: a value, or a tuple for a composite key; a missing
    value (None, NaN, NaT) as None, which equals itself."""
    import pandas as pd

    columns = []
    for values in key_values:
        listed = pd.Series(values).astype(object).where(pd.notna(values), None).tolist()
        columns.append(listed)
    return columns[0] if len(columns) == 1 else list(zip(*columns))


def _common_dtype(a, b):
    import numpy as np

    if a.kind in "iuf" and b.kind in "iuf" or a.kind == b.kind == "M":
        return np.result_type(a, b)
    return np.dtype(object)


def _as_dtype(values, dtype):
    import pandas as pd

    if dtype == object and values.dtype.kind in "mM":  # numpy would turn datetimes into integers
        return pd.Series(values).to_numpy(dtype=object)
    return values.astype(dtype)


def merge_changes(table: "pd.DataFrame", changes: "pd.DataFrame", keys: list[str]) -> "pd.DataFrame":
    """``table`` after ``changes`` (at most one per key): a changed key takes its new row, or leaves."""
    import pandas as pd

    if not len(changes):
        return table
    changed = key_index(changes, keys)
    kept = table[~key_index(table, keys).isin(changed)] if len(table) else table
    alive = changes[~changes[GONE].to_numpy(dtype=bool)][list(table.columns)]
    return pd.concat([kept, alive], ignore_index=True) if len(kept) else alive.reset_index(drop=True)


def key_index(frame: "pd.DataFrame", keys) -> "pd.Index":
    """The key of every row as one index (a MultiIndex for composite keys), for lookups."""
    import pandas as pd

    if len(keys) == 1:
        return pd.Index(frame[keys[0]].to_numpy())
    return pd.MultiIndex.from_arrays([frame[k].to_numpy() for k in keys])
