"""Keyed state for streamjoin's operators, on Spark's ``transformWithStateInPandas``, checkpointed with the
query in Spark's state store (RocksDB), restored exactly on restart and unchanged on a cluster.

Every operator keeps its state per bucket (a hash of the join or group key), **segmented** (``run_segmented``):
a small pickled *meta* value per bucket (counters, and an index of the bucket's segments) plus a map from
segment number to one pickled frame of stored rows. The operator reads only the segments its batch can
touch and writes back only those that changed; expiry removes whole segments by number without reading
them. Its cost per batch follows the batch. A segment is a slice of event time (the windowed joins), or a
chunk of a table's change log (``new_table_log``: the table joins and aggregates).

Measured here (``transformWithStateInPandas``, local[2]): a state call costs 0.3-0.5 ms, and a value moves
at ~12 ms per MB each way; so few calls, and bytes only for what a batch needs. Rows of a state bucket go
to the operator packed into Arrow blobs (``packed_by``), not row by row. A Python worker keeps the frames it
read or wrote (``_StoredSegments``), so a bucket that comes back to the same worker reads nothing.

The meta value holds the bucket's counters (``rows``: rows held, and ``dropped``: reason -> records
dropped), which is all ``runtime.metrics`` reads. ``transformWithStateInPandas`` is used rather than
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
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import DataFrame

SegmentedStep = Callable[[Any, "pd.DataFrame", "Segments"], "tuple[pd.DataFrame, Any]"]
Idle = Callable[[Any, "pa.Table"], bool]  # (meta, a bucket's rows) -> whether the step would change nothing
_STATE_SCHEMA = StructType([StructField("value", BinaryType())])
_SEGMENT_KEY = StructType([StructField("segment", LongType())])
META = "state"  # the state variable holding a group's counters (``rows``, ``dropped``), read by runtime.metrics


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


def _stored_bytes(value_state) -> bytes | None:
    """The pickled bytes a value state holds (one call to the state store), or None."""
    stored = value_state.get()
    return stored[0] if stored is not None else None


class Segments:
    """A group's segments as the operator sees them: numbered frames, read and written one at a time; and
    ``memo``, what the operator derived from them (a table built from its change log), which may survive
    to the group's next batch when the segments are still those it was derived from, and is empty else."""

    memo: dict

    def get(self, segment: int) -> "pd.DataFrame": ...
    def put(self, segment: int, frame: "pd.DataFrame") -> None: ...
    def remove(self, segment: int) -> None: ...


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
    return dict(cached[1]), dict(cached[2])


def _keep(entry: tuple, token: str, frames: dict, memo: dict) -> None:
    """Cache a group's frames and memo under ``token``, evicting the least recently used groups past
    ``CACHE_BYTES``."""
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
    return sum(int(f.memory_usage(index=False, deep=False).sum())
               for f in (*frames.values(), *memo.values()) if hasattr(f, "memory_usage"))


class _SegmentedStateProcessor(StatefulProcessor):
    """Spark also unpickles the processor in a fresh Python process on the driver, when a query plans its
    first batch, only to call ``init``; the step (and with it pandas and the operators) is therefore kept
    as bytes and loaded on first use, which saves most of a second per stateful operator and query start."""

    def __init__(self, step: SegmentedStep, input_columns: list[str], output_schema: StructType,
                 idle: Optional[Idle] = None):
        self.step_bytes = cloudpickle.dumps((step, idle))
        self.step = self.idle = None
        self.input_columns = input_columns
        self.columns = output_schema.fieldNames()
        self.identity = uuid.uuid4().hex  # made once on the driver: every task of this run shares it

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState(META, _STATE_SCHEMA)
        self.map = handle.getMapState("segments", _SEGMENT_KEY, _STATE_SCHEMA)

    def handleInputRows(self, key, rows: Iterator["pd.DataFrame"], timerValues) -> Iterator["pd.DataFrame"]:
        started = time.perf_counter()
        if self.step is None:
            self.step, self.idle = cloudpickle.loads(self.step_bytes)
        packed = unpacked_table([blob for frame in rows for blob in frame.iloc[:, -1]])  # ``packed_by``'s blobs
        now = _timed("input", started)
        stored = _stored_bytes(self.state)
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
        out, meta = self.step(meta, batch, segments)
        now = _timed("step", now, excluding=_in_state() - in_state)  # segments read or written in the step
        if segments.changed or TOKEN not in meta:
            meta[TOKEN] = uuid.uuid4().hex
        value = pickle.dumps(meta, protocol=5)
        if value != stored:  # a batch that changed nothing (a tick with nothing due) writes nothing
            self.state.update((value,))
        _keep(entry, meta[TOKEN], segments.frames, segments.memo)
        now = _timed("state_write", now)
        if len(out):  # an empty frame's columns may have no usable type
            out = out.reindex(columns=self.columns)
            _timed("output", now)
            yield out
        _write_phases()

    def close(self) -> None:
        pass


def run_segmented(df: "DataFrame", bucket: str, step: SegmentedStep, output_schema: StructType,
                  idle: Optional[Idle] = None) -> "DataFrame":
    """Apply ``step(meta, rows, segments) -> (output, meta)`` per state bucket (the column ``bucket``):
    ``meta`` is the bucket's small pickled value (None at first), ``segments`` its segment map
    (``Segments``). Rows arrive packed (``packed_by``). ``idle(meta, rows)``, given the rows as an Arrow
    table, says whether the step would return no output and ``meta`` unchanged (typically: the batch brings
    the bucket only a tick and nothing is due); the step is then not called at all. Most buckets of a
    time-driven operator are in that case in most micro-batches of a lightly loaded query, and a step costs
    milliseconds of pandas even on one row."""
    processor = _SegmentedStateProcessor(step, df.columns, output_schema, idle)
    return packed_by(df, bucket).groupBy(bucket).transformWithStateInPandas(processor, output_schema, "append", "None")


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
    """A bucket's rows as one frame named ``columns``. An array value becomes a tuple and a struct value a
    ``Row``, so that either can be a join or grouping key (compared and hashed); the worker writes a tuple back
    as an array and a ``Row`` (a dict) as a struct. A timestamp becomes a naive UTC ``datetime64`` (the session
    time zone is UTC, and the worker reads a naive one back in it): pandas keeps a zoned column as objects as
    soon as it leaves its frame (``to_numpy``, ``np.where``), and the operators' vectorised steps then ran
    several times slower on every query with a timestamp column."""
    import pyarrow as pa

    frame = _naive_table(table).to_pandas().set_axis(columns, axis=1)
    for name, field in zip(columns, table.schema):
        if pa.types.is_list(field.type) or pa.types.is_large_list(field.type) or pa.types.is_struct(field.type):
            frame[name] = [hashable(v) for v in frame[name]]
    return frame


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
    """The meta part of an empty table log: its chunks' segment numbers, the next number, rows logged, and
    its name (an operator keeping several logs in one bucket gives each a name and its own range of
    segment numbers)."""
    return {"chunks": [], "next": first_segment, "logged": 0, "name": name}


def read_table(log: dict, segments: Segments, keys: list[str], columns: list[str]) -> "pd.DataFrame":
    """The table a log holds (one row per live key: ``keys + columns``): the memo when it is still there,
    else the chunks replayed in order.

    Replayed in one pass when the chunks' column types agree: the last change of every key, in the order of
    those changes, less removals, is the table ``merge_changes`` builds chunk by chunk (rows and row order);
    a cold read (a bucket that comes to another Python worker) then costs the log once, not once per chunk
    (measured: 16 chunks over a 125k-row table, 230 ms chunk by chunk, 50 ms in one pass). Chunks whose
    types differ (a column holding nulls in one batch only) are merged one by one, as their types mix."""
    import pandas as pd

    name = log.get("name", "table")
    table = segments.memo.get(name)
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


def log_changes(log: dict, segments: Segments, changes: "pd.DataFrame", table: "pd.DataFrame") -> None:
    """Append a batch's changes (the last per key, ``GONE`` set on removals) as one chunk, given ``table``,
    the table after them. Past ``MAX_CHUNKS`` chunks, or when the log holds more than twice the table's
    rows, the log is replaced by one chunk of the table: an O(table) write every so many batches, so a
    batch costs its changes, amortised, and a cold read replays at most ``MAX_CHUNKS`` chunks."""
    segments.memo[log.get("name", "table")] = table
    if not len(changes):
        return
    number = log["next"]
    log["next"] += 1
    if len(log["chunks"]) < MAX_CHUNKS and log["logged"] + len(changes) <= 2 * len(table) + 10_000:
        segments.put(number, changes)
        log["chunks"].append(number)
        log["logged"] += len(changes)
        return
    segments.put(number, table.assign(**{GONE: False}))
    for chunk in log["chunks"]:
        segments.remove(chunk)
    log["chunks"], log["logged"] = [number], len(table)


def apply_changes(log: dict, segments: Segments, stored: "pd.DataFrame", changes: "pd.DataFrame",
                  keys: list[str]) -> "pd.DataFrame":
    """``stored`` after ``changes`` (``merge_changes``), with the changes logged (``log_changes``)."""
    table = merge_changes(stored, changes, keys)
    log_changes(log, segments, changes, table)
    return table


def rows_for(table: "pd.DataFrame", keys: list[str], wanted: "pd.DataFrame") -> "pd.DataFrame":
    """The rows of ``table`` whose ``keys`` (all its key columns, or the first of them) are among
    ``wanted``'s values of those columns."""
    if not len(table) or not len(wanted):
        return table.iloc[:0]
    return table[key_index(table, keys).isin(key_index(wanted, keys))]


def as_changes(current: dict, loaded, keys: list[str], columns: list[str]) -> "pd.DataFrame":
    """A batch's changes to a table read as a dict (key tuple -> tuple of ``columns``): every row of
    ``current``, and a removal of every ``loaded`` key no longer in it."""
    import pandas as pd

    gone = [key for key in loaded if key not in current]
    records = [(*key, *values, False) for key, values in current.items()]
    records += [(*key, *[None] * len(columns), True) for key in gone]
    return pd.DataFrame(records, columns=keys + columns + [GONE])


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
