"""Spark streaming source over the embedded topic store (Python Data Source API).

``spark.readStream.format("streamjoin_topics").option("root", DIR).option("topics", "a,b")`` yields one
row per record of the named topics: ``topic, partition, offset, timestamp, seq, key, value,
stream_time, headers, topic_times`` (``headers`` is null unless the ``headers`` option is true). The offset of the
source is the store's global sequence, so one micro-batch covers a contiguous slice of the store's
ingestion order across all its topics.

With the ``eventTime`` option (JSON: topic -> value field holding the event time, or null for the record
timestamp), every record also carries ``stream_time``, the query's clock (``connectors.event_time``):
the largest event time read so far in ingestion order or, with the ``watermarks`` option as well (JSON:
topic -> delay in ms), the Flink watermark. The offset holds the clock's state at the batch's end, so
the clock continues exactly across batches and restarts. (Without ``eventTime``, ``stream_time`` is null.)
With ``sideTopics`` as well (JSON list of topics), ``topic_times`` holds each of those topics' own clock
(its largest event time read so far), in that order; else it is null.

With ``ticks`` = N as well, every batch ends with N *tick* rows (topic ``TICK_TOPIC``, ``partition`` =
0..N-1, ``seq`` and ``stream_time`` of the batch's last record, ``timestamp`` = the clock at the batch's
first record): time-driven operators bucket their state
N ways and use the ticks to see the batch-end stream time in every bucket, input or not. With ``clockSteps`` = G
(ms) as well, each tick row also holds ``clock_steps``: the clock values the batch's records reached, rising,
the largest in each span ``[n * G, (n + 1) * G)`` (a bucket sees when the clock passed a time, to that grid, not
only where it ended: a ksqlDB EMIT FINAL window needs it, ``operators.window_aggregate``). ``maxRecordsPerBatch`` caps a batch at N records (the
conformance runner's ``--records-per-batch``); ``startingOffsets`` is ``earliest`` (default) or
``latest``. Workers read the segment files directly, so ``root`` must be visible to every executor.
With ``decode``, the reader also decodes JSON values of the named topics (``connectors.json_decode``).
With ``readers`` = R, a large clocked batch is read by R tasks, each a run of consecutive records; an unclocked
batch is read by a task per topic. (Measured on 2 cores: one task reading a 200k-record batch already keeps both
busy, its Python reader and the JVM taking its rows; two tasks took 340 ms instead of 240.)
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from .event_time import NO_TIME, Clock
from .json_decode import decode_plan, decoded_fields, with_decoded
from .topic_store import HEADERS_TYPE, LOG, TopicStore

SOURCE_NAME = "streamjoin_topics"
IDLE_AFTER_S, IDLE_WAIT_S, IDLE_CHECK_S = 1.0, 0.05, 0.01  # ``EmbeddedTopicReader.latestOffset``
TOPIC_TIMES_TYPE = pa.list_(pa.int64())
TICK_TOPIC = "__tick__"

ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("seq", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("stream_time", pa.int64()),
        ("headers", HEADERS_TYPE),  # null unless the reader is asked for headers
        ("topic_times", TOPIC_TIMES_TYPE),  # null unless the reader is asked for ``sideTopics``
        ("clock_steps", TOPIC_TIMES_TYPE),  # on tick rows, when the reader is asked for ``clockSteps``; else null
    ]
)
SOURCE_SCHEMA = from_arrow_schema(ARROW_SCHEMA)


class _Slice(InputPartition):
    """Records of ``topics`` with ``after_seq < seq <= upto_seq``; ``clock_state``: the clock before them.

    A part of a clocked batch (``batch``: the batch's ``(after_seq, upto_seq, rows)``) starts ``row_offset``
    records into it; its clock is the batch's, cut at those rows, and only the ``last`` part brings the
    batch's tick rows."""

    def __init__(self, root: str, topics: list[str], after_seq: int, upto_seq: int, clock_state: Optional[dict],
                 batch: Optional[tuple] = None, row_offset: int = 0, last: bool = True):
        super().__init__((tuple(topics), after_seq, upto_seq))
        self.root, self.topics, self.after_seq, self.upto_seq = root, topics, after_seq, upto_seq
        self.clock_state = clock_state
        self.batch, self.row_offset, self.last = batch, row_offset, last


def topic_column(topic: str, rows: int) -> pa.Array:
    """The ``topic`` column of ``rows`` records of one topic (one repeat in C, not a Python list). Built from
    buffers: pyarrow's conversion of a Python value imports pandas (0.6 s of the source runner's first read)."""
    name = topic.encode()
    one = pa.StringArray.from_buffers(1, pa.py_buffer(np.array([0, len(name)], dtype=np.int32)), pa.py_buffer(name))
    return pa.repeat(one[0], rows)


def _read_slice(root: str, topics: list[str], after: int, upto: int) -> pa.Table:
    store = TopicStore(root)
    parts = []
    for topic in topics:
        table = store.read_table(topic, after, upto)
        if table.num_rows:
            parts.append(table.append_column("topic", topic_column(topic, table.num_rows)))
    if not parts:
        return None
    table = pa.concat_tables(parts)
    return table.sort_by("seq") if len(parts) > 1 else table


class EmbeddedTopicReader(DataSourceStreamReader):
    def __init__(self, options: dict):
        self.root = options["root"]
        self.topics = [t for t in options["topics"].split(",") if t]
        self.max_records = int(options.get("maxrecordsperbatch", "0") or 0)
        self.starting = options.get("startingoffsets", "earliest").lower()
        self.clock = reader_clock(options)
        self.ticks = int(options.get("ticks", "0") or 0)
        self.clock_steps = int(options.get("clocksteps", "0") or 0)
        self.headers = options.get("headers", "false").lower() == "true"
        # records with a null value, per topic, kept in the offset (``runtime.metrics``); a clock counts them too
        self.count_nulls = options.get("countnullvalues", "false").lower() == "true" or self.clock is not None
        self.decode = decode_plan(options.get("decode"))
        self.clock_cache = _ClockCache(self.root, self.topics, self.clock) if self.clock else None
        self.readers = int(options.get("readers", "1") or 1)
        self._planned: Optional[tuple] = None  # (after, upto, seq of every record) of the batch last planned
        self._news_at = time.monotonic()  # when a latestOffset last found input

    def _store(self) -> TopicStore:
        return TopicStore(self.root)

    def _committed(self) -> int:
        """The store's committed sequence number. Spark asks for the latest offset every 10 ms while a query
        waits for input: the store's log is parsed again only when its bytes changed, and an unchanged
        question gets the answer it got before, so a waiting query costs little (issue #35)."""
        try:
            with open(os.path.join(self.root, LOG), "rb") as log:
                text = log.read()
        except FileNotFoundError:
            return 0
        if text != getattr(self, "_log_text", None):
            self._log_text, self._log_seq = text, json.loads(text)["seq"]
        return self._log_seq

    def initialOffset(self) -> dict:
        if self.starting == "latest":
            return self._offset(self._store().committed_seq(), None)
        return self._offset(0, None)

    def _offset(self, seq: int, clock_state: Optional[dict], null_values: Optional[dict] = None) -> dict:
        offset = {"seq": seq}
        if self.clock is not None:
            offset.update(clock_state or {"streamTime": None})
        if self.count_nulls:
            offset["nullValues"] = null_values or {}
        return offset

    @staticmethod
    def _clock_state(offset: dict) -> dict:
        return clock_state(offset)

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.max_records) if self.max_records > 0 else ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        """Spark asks every 10 ms while there is no new input, at a JVM and a Python round trip a question; a
        reader that has found nothing new for ``IDLE_AFTER_S`` answers only when the store commits something,
        or after ``IDLE_WAIT_S``: an idle query asks ~20 times a second, and a record that arrives is still seen
        within ``IDLE_CHECK_S`` of its commit (issue #35: an idle script's cores)."""
        offset = self._latest_offset_now(start, limit)
        idle = offset["seq"] == start["seq"] and time.monotonic() - self._news_at > IDLE_AFTER_S
        if idle and self._await_commit():  # maybe input of ours: answer again, and ask no more
            offset = self._latest_offset_now(start, limit)
        if offset["seq"] != start["seq"]:
            self._news_at = time.monotonic()
        return offset

    def _await_commit(self) -> bool:
        """Whether the store commits within ``IDLE_WAIT_S``: each commit replaces its log file (a new inode), so
        a ``stat`` every ``IDLE_CHECK_S`` sees it."""
        def log_file():
            try:
                stat = os.stat(os.path.join(self.root, LOG))
            except FileNotFoundError:
                return None
            return stat.st_ino, stat.st_mtime_ns, stat.st_size

        log, deadline = log_file(), time.monotonic() + IDLE_WAIT_S
        while time.monotonic() < deadline:
            time.sleep(IDLE_CHECK_S)
            if log_file() != log:
                return True
        return False

    def _latest_offset_now(self, start: dict, limit) -> dict:
        committed = self._committed()
        question = (json.dumps(start, sort_keys=True), committed, getattr(limit, "max_rows", None))
        answered = getattr(self, "_answered", None)
        if answered is not None and answered[0] == question:
            return answered[1]
        offset = self._latest_offset(start, limit, committed)
        self._answered = (question, offset)
        return offset

    def _latest_offset(self, start: dict, limit, committed: int) -> dict:
        store = self._store()
        after = start["seq"]
        end = after
        if committed > after:
            most = limit.max_rows if isinstance(limit, ReadMaxRows) else committed - after
            end = store.seq_after(self.topics, after, most, committed)
        if end == after or not self.count_nulls:
            return self._offset(end, self._clock_state(start), start.get("nullValues"))
        if self.clock is None:  # the value columns' null counts alone: no parsing, no pass over the records
            counts = dict(start.get("nullValues") or {})
            for topic in self.topics:
                nulls = store.read_table(topic, after, end).column("value").null_count
                if nulls:
                    counts[topic] = counts.get(topic, 0) + nulls
            return self._offset(end, None, counts)
        table = _read_slice(self.root, self.topics, after, end)
        clock, clock_state = self.clock.run(table, self._clock_state(start))
        self.clock_cache.put(after, end, self._clock_state(start), clock)
        if table is not None:
            self._planned = (after, end, table.column("seq").to_numpy())
        return self._offset(end, clock_state, count_null_values(table, start.get("nullValues") or {}))

    def reportLatestOffset(self) -> dict:
        return {"seq": self._committed()}

    def partitions(self, start: dict, end: dict):
        if end["seq"] <= start["seq"]:
            return []
        if self.clock is not None:
            return self._clocked_parts(start["seq"], end["seq"], self._clock_state(start))
        return [_Slice(self.root, [t], start["seq"], end["seq"], None) for t in self.topics]

    def _clocked_parts(self, after: int, upto: int, state: dict) -> list:
        """A clocked batch as ``readers`` parts of consecutive records, read in parallel, when this reader
        planned the batch (it knows where its records are) and it is large; else as one part. The clock runs
        over every topic of the batch in one ordered pass, on the driver when it plans the batch (the
        ``_ClockCache``); each part takes its rows of it."""
        planned = self._planned
        if planned is None or planned[:2] != (after, upto) or self.readers < 2 or len(planned[2]) < SPLIT_ROWS:
            return [_Slice(self.root, self.topics, after, upto, state)]
        seqs = planned[2]
        cuts = [len(seqs) * k // self.readers for k in range(1, self.readers)]
        bounds = [after] + [int(seqs[c - 1]) for c in cuts] + [upto]
        batch = (after, upto, len(seqs))
        return [_Slice(self.root, self.topics, a, b, state, batch, offset, last=b == upto)
                for a, b, offset in zip(bounds, bounds[1:], [0] + cuts)]

    def _batch_clock(self, part: _Slice, table: pa.Table) -> np.ndarray:
        """The clock of every record of ``part``'s batch: cached, or run again over the batch."""
        after, upto, rows = part.batch or (part.after_seq, part.upto_seq, table.num_rows)
        clock = self.clock_cache.get(after, upto, part.clock_state, rows)
        if clock is None:
            whole = table if part.batch is None else _read_slice(part.root, part.topics, after, upto)
            clock, _ = self.clock.run(whole, part.clock_state)
        return clock

    def read(self, partition: _Slice) -> Iterator[pa.RecordBatch]:
        table = _read_slice(partition.root, partition.topics, partition.after_seq, partition.upto_seq)
        if table is None:
            return
        if self.clock is not None:
            batch_clock = self._batch_clock(partition, table)
            part_clock = batch_clock[partition.row_offset:partition.row_offset + table.num_rows]
            times, stream_time, topic_times = clock_columns(part_clock)
        else:
            stream_time, topic_times = pa.nulls(table.num_rows, pa.int64()), None
        out = pa.table(
            [table.column("topic")]
            + [table.column(n) for n in ("partition", "offset", "timestamp", "seq", "key", "value")]
            + [stream_time, table.column("headers") if self.headers else pa.nulls(table.num_rows, HEADERS_TYPE),
               topic_times if topic_times is not None else pa.nulls(table.num_rows, TOPIC_TIMES_TYPE),
               pa.nulls(table.num_rows, TOPIC_TIMES_TYPE)],
            schema=ARROW_SCHEMA,
        )
        yield from with_decoded(out, self.decode)
        if self.ticks and self.clock is not None and partition.last:
            if len(part_clock) < len(batch_clock):  # the ticks close the whole batch
                times, stream_time, topic_times = clock_columns(batch_clock)
            known = times[times != NO_TIME]
            start = int(known[0]) if len(known) else None
            ticks = tick_rows(self.ticks, partition.upto_seq, stream_time[-1].as_py(), start,
                              topic_times[-1].as_py() if topic_times is not None else None,
                              clock_steps(stream_time, self.clock_steps) if self.clock_steps else None)
            yield from with_decoded(ticks, self.decode)

    def commit(self, end: dict) -> None:
        if self.clock_cache is not None:
            self.clock_cache.drop_upto(end["seq"])


SPLIT_ROWS = 20_000  # a clocked batch of fewer records is read by one task: a task costs more than it saves


class _ClockCache:
    """The clock of each planned batch, as the driver computed it when it planned the batch, so the worker
    that reads the batch need not parse every event time again. Files under ``<root>/.clock/<config>``, one
    per batch, named by the batch's slice of ingestion order *and* the clock state it starts from: a file holds
    the only clock that slice can have from that state (topics only grow, so a slice never changes), whichever
    query wrote it — queries over the same topics share files, a restarted query finds the file of the batch it
    replays, and nothing is ever cleared for correctness. Removed once a batch commits. It is a cache: a file
    missing, half-written or removed by another query meanwhile is simply recomputed, and a failure to write
    one never fails the batch."""

    def __init__(self, root: str, topics: list[str], clock: Clock):
        config = [sorted(topics), clock.fields, clock.delays, list(clock.sides)]
        digest = hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
        self.dir = os.path.join(root, ".clock", digest)

    def _path(self, after: int, upto: int, state: dict) -> str:
        tag = hashlib.sha1(json.dumps(state, sort_keys=True).encode()).hexdigest()[:16]
        return os.path.join(self.dir, f"{after}-{upto}-{tag}.npy")

    def put(self, after: int, upto: int, state: dict, clock: np.ndarray) -> None:
        path = self._path(after, upto, state)
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(self.dir, exist_ok=True)
            with open(tmp, "wb") as out:
                np.save(out, clock)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.remove(tmp)

    def get(self, after: int, upto: int, state: dict, rows: int) -> Optional[np.ndarray]:
        try:
            clock = np.load(self._path(after, upto, state))
        except (OSError, ValueError, EOFError):
            return None
        return clock if len(clock) == rows else None  # the query's clock, and its sides' (``Clock.run``)

    def drop_upto(self, seq: int) -> None:
        try:
            names = os.listdir(self.dir)
        except OSError:
            return
        for name in names:
            if name.endswith(".npy") and int(name.split("-")[1]) <= seq:
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(self.dir, name))


def count_null_values(table: Optional[pa.Table], counts: dict) -> dict:
    """Running count, per topic, of records with a null value (ignored by streams; counted, not lost)."""
    counts = dict(counts)
    if table is not None:
        nulls = table.filter(pc.is_null(table.column("value"))).column("topic").to_pylist()
        for topic in nulls:
            counts[topic] = counts.get(topic, 0) + 1
    return counts


def reader_clock(options: dict) -> Optional[Clock]:
    """The clock a source reader computes, from its options: ``eventTime`` (topic -> time field; with
    ``eventTimeFormats``, topic -> the pattern of a field holding text),
    ``watermarks`` (topic -> delay) and ``sideTopics`` (topics whose own clocks records carry)."""
    event_time = options.get("eventtime")
    if not event_time:
        return None
    watermarks, sides, patterns = options.get("watermarks"), options.get("sidetopics"), options.get("eventtimeformats")
    return Clock(json.loads(event_time), json.loads(watermarks) if watermarks else None,
                 tuple(json.loads(sides)) if sides else (), json.loads(patterns) if patterns else None)


def clock_state(offset: dict) -> dict:
    """The part of a source offset the clock continues from."""
    return {k: v for k, v in offset.items() if k in Clock.STATE_KEYS}


def clock_columns(clock: np.ndarray):
    """``Clock.run``'s output as the query's clock (numpy and Arrow) and, with sides, ``topic_times``."""
    if clock.ndim == 1:
        return clock, pa.array(clock, pa.int64(), mask=clock == NO_TIME), None
    times = clock[:, 0]
    sides = clock[:, 1:]
    values = pa.array(sides.reshape(-1), pa.int64(), mask=sides.reshape(-1) == NO_TIME)
    offsets = pa.array(np.arange(0, sides.size + 1, sides.shape[1], dtype=np.int32))
    return times, pa.array(times, pa.int64(), mask=times == NO_TIME), pa.ListArray.from_arrays(offsets, values)


def tick_rows(count: int, seq: int, stream_time: Optional[int], start: Optional[int],
              topic_times: Optional[list] = None, steps: Optional[list] = None) -> pa.Table:
    """``count`` tick rows: ``stream_time`` is the clock at the batch's end, ``timestamp`` at its first record,
    ``topic_times`` the side topics' clocks at its end, ``steps`` the clock values the batch reached."""
    return pa.table(
        [
            pa.array([TICK_TOPIC] * count, pa.string()), pa.array(range(count), pa.int32()),
            pa.array([-1] * count, pa.int64()), pa.array([start] * count, pa.int64()), pa.array([seq] * count, pa.int64()),
            pa.nulls(count, pa.binary()), pa.nulls(count, pa.binary()), pa.array([stream_time] * count, pa.int64()),
            pa.nulls(count, HEADERS_TYPE), pa.array([topic_times] * count, TOPIC_TIMES_TYPE),
            pa.array([steps] * count, TOPIC_TIMES_TYPE),
        ],
        schema=ARROW_SCHEMA,
    )


def clock_steps(stream_time: pa.Array, grid: int) -> list:
    """The clock values of a batch's records (its ``stream_time``), rising: the largest in each ``grid`` ms."""
    values = np.sort(pc.unique(pc.drop_null(stream_time)).to_numpy(zero_copy_only=False))
    cells = np.floor_divide(values, grid)
    return values[np.append(cells[1:] != cells[:-1], True)].tolist() if len(values) else []


def source_schema(decode: Optional[str]) -> StructType:
    """The source's rows, with the columns the reader decodes (``connectors.json_decode``) when asked."""
    fields = decoded_fields(decode_plan(decode))
    return from_arrow_schema(pa.schema(list(ARROW_SCHEMA) + fields)) if fields else SOURCE_SCHEMA


class EmbeddedTopicSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return source_schema(self.options.get("decode"))

    def streamReader(self, schema: StructType) -> EmbeddedTopicReader:
        return EmbeddedTopicReader(dict(self.options))
