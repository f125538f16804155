"""The embedded topic store: Kafka-like topics in a local (or shared) directory, no broker needed.

Layout::

    root/_log.json                       committed state: global sequence, per-topic offsets, sink batches
    root/_lock                           advisory lock serialising writers
    root/_appending                      the topics an append is writing segments to, until it commits
    root/<topic>/seg-<first>-<last>.arrow  Arrow IPC segments, one per append, named by global sequence

Every record is ``(key, value, timestamp, partition, offset, headers)`` plus ``seq``: a store-wide sequence number
assigned at append time. ``seq`` is the ingestion order across all topics of the store, so a query
reading several topics sees them in the order they were produced (the conformance runner's input order).

An append names the topics it writes in ``_appending``, writes their segments, then replaces ``_log.json``
atomically: that replace is the commit. Readers never look past the committed sequence, so a writer that
dies mid-append leaves nothing visible; the next writer finds ``_appending`` and deletes the orphaned
segments of those topics. Sinks pass ``(writer_id, batch_id)``: a batch id at or below the last one committed
for that writer is skipped, which makes replayed micro-batches idempotent (exactly-once output after a restart).

A topic gains a segment file per append, so nothing here may cost what a topic's history costs: each process
keeps an index of every topic's committed segments (``_SegmentIndex``; a committed segment never changes)
and lists a topic's folder again only when it is asked for records past what the index covers, adding just
the names after its last; a read or a ``seq_after`` finds its segments by bisection. An append lists nothing.
"""
from __future__ import annotations

import bisect
import fcntl
import json
import os
import threading
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence

import pyarrow as pa
import pyarrow.ipc as ipc

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))  # Kafka record headers

RECORD_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", HEADERS_TYPE),
    ]
)

DEFAULT_PARTITIONS = 1
LOG = "_log.json"  # the committed state; each commit replaces the file
APPENDING = "_appending"
SEGMENT_PREFIX, SEGMENT_SUFFIX = "seg-", ".arrow"


@dataclass(frozen=True)
class Record:
    key: Optional[bytes]
    value: Optional[bytes]
    timestamp: int
    partition: int = -1  # -1: choose by key hash
    offset: int = -1
    seq: int = -1
    headers: tuple = ()  # (name, value bytes or None) pairs, in order; a name may repeat


def partition_for(key: Optional[bytes], partitions: int) -> int:
    """Stable partitioner: crc32 of the key bytes (keyless records go to partition 0)."""
    if key is None or partitions <= 1:
        return 0
    return zlib.crc32(key) % partitions


def _segment_range(name: str) -> tuple[int, int]:
    """(first, last) sequence number of the segment file ``name`` (``seg-<first>-<last>.arrow``)."""
    _, first, last = name[: -len(SEGMENT_SUFFIX)].split("-")
    return int(first), int(last)


def _is_segment(name: str) -> bool:
    return name.startswith(SEGMENT_PREFIX) and name.endswith(SEGMENT_SUFFIX)


@dataclass
class _SegmentIndex:
    """One topic's committed segments known to this process, in sequence order: every segment whose last
    sequence number is at most ``covered``. Names sort as their numbers do (fixed-width digits)."""

    names: list = field(default_factory=list)
    firsts: list = field(default_factory=list)
    lasts: list = field(default_factory=list)
    covered: int = -1

    def between(self, after_seq: int, upto_seq: int) -> range:
        """Positions of the segments holding records with ``after_seq < seq <= upto_seq``."""
        return range(bisect.bisect_right(self.lasts, after_seq), bisect.bisect_right(self.firsts, upto_seq))


# (store root, topic, the sequence number the topic was created at) -> its index; a topic deleted and created
# again is another key, so an index never lists files that were deleted
_INDEXES: dict[tuple[str, str, int], _SegmentIndex] = {}
_INDEXING = threading.Lock()


class TopicStore:
    """A directory of topics. Safe for several processes: writers take an exclusive file lock."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ committed state

    def _state(self) -> dict:
        try:
            return json.loads((self.root / LOG).read_text())
        except FileNotFoundError:
            return {"seq": 0, "topics": {}, "writers": {}}

    def _commit(self, state: dict) -> None:
        tmp = self.root / f"{LOG}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(state, sort_keys=True))
        os.replace(tmp, self.root / LOG)

    @contextmanager
    def _locked(self) -> Iterator[dict]:
        with open(self.root / "_lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                state = self._state()
                self._drop_uncommitted(state)
                yield state
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _drop_uncommitted(self, state: dict) -> None:
        """Delete the segments (and half-written files) an append left behind when it died before its commit:
        those of the topics ``_appending`` names (every topic's, if the name list itself was cut short)."""
        marker = self.root / APPENDING
        try:
            topics = json.loads(marker.read_text())
        except FileNotFoundError:
            return
        except ValueError:
            topics = list(state["topics"])
        for topic in topics:
            folder = self.root / topic
            for name in os.listdir(folder) if folder.is_dir() else ():
                if name.endswith(".tmp") or (_is_segment(name) and _segment_range(name)[1] > state["seq"]):
                    (folder / name).unlink(missing_ok=True)
        marker.unlink(missing_ok=True)

    # ------------------------------------------------------------------ topics

    def committed_seq(self) -> int:
        return self._state()["seq"]

    def topics(self) -> list[str]:
        return sorted(self._state()["topics"])

    def exists(self, topic: str) -> bool:
        return topic in self._state()["topics"]

    def partitions(self, topic: str) -> int:
        return self._state()["topics"].get(topic, {}).get("partitions", DEFAULT_PARTITIONS)

    def create(self, topic: str, partitions: int = DEFAULT_PARTITIONS) -> None:
        """Create a topic if it does not exist (an existing topic keeps its partition count)."""
        with self._locked() as state:
            if topic not in state["topics"]:
                self._add_topic(state, topic, partitions)
                self._commit(state)

    def _add_topic(self, state: dict, topic: str, partitions: int) -> dict:
        (self.root / topic).mkdir(parents=True, exist_ok=True)
        info = {"partitions": max(1, int(partitions)), "next_offset": [0] * max(1, int(partitions)),
                "created": state["seq"]}
        state["topics"][topic] = info
        return info

    def delete(self, topic: str) -> None:
        with self._locked() as state:
            if state["topics"].pop(topic, None) is not None:
                folder = self.root / topic
                for name in os.listdir(folder) if folder.is_dir() else ():
                    if _is_segment(name):
                        (folder / name).unlink(missing_ok=True)
                self._commit(state)

    def _index(self, topic: str, upto_seq: int, state: dict) -> _SegmentIndex:
        """``topic``'s segment index, covering at least ``upto_seq`` when that is committed (``state`` was read
        before this call, so every segment it commits is in place). Lists the folder only to extend it."""
        info = state["topics"].get(topic)
        if info is None:
            return _SegmentIndex()
        with _INDEXING:
            index = _INDEXES.setdefault((str(self.root), topic, info.get("created", 0)), _SegmentIndex())
            if upto_seq > index.covered:
                known = index.names[-1] if index.names else ""
                try:
                    names = sorted(n for n in os.listdir(self.root / topic) if n > known and _is_segment(n))
                except FileNotFoundError:
                    names = []
                for name in names:
                    first, last = _segment_range(name)
                    if last > state["seq"]:  # not committed: in flight, or left by a writer that died
                        break
                    index.names.append(name)
                    index.firsts.append(first)
                    index.lasts.append(last)
                index.covered = state["seq"]
            return index

    # ------------------------------------------------------------------ writing

    def append(
        self,
        batches: Sequence[tuple[str, Sequence[Record]]],
        *,
        writer: Optional[str] = None,
        batch_id: Optional[int] = None,
        partitions: int = DEFAULT_PARTITIONS,
    ) -> bool:
        """Append records to one or more topics as one atomic commit, in the order given.

        Returns False (and writes nothing) when ``writer``'s ``batch_id`` was already committed."""
        with self._locked() as state:
            if writer is not None and batch_id is not None:
                if batch_id <= state["writers"].get(writer, -1):
                    return False
            marker = self.root / APPENDING
            written = sorted({topic for topic, records in batches if records})
            if written:
                marker.write_text(json.dumps(written))
            seq = state["seq"]
            for topic, records in batches:
                info = state["topics"].get(topic) or self._add_topic(state, topic, partitions)
                if not records:
                    continue
                seq = self._write_segment(topic, info, records, seq)
            state["seq"] = seq
            if writer is not None and batch_id is not None:
                state["writers"][writer] = batch_id
            self._commit(state)
            marker.unlink(missing_ok=True)
            return True

    def _write_segment(self, topic: str, info: dict, records: Sequence[Record], seq: int) -> int:
        cols: dict[str, list] = {name: [] for name in RECORD_SCHEMA.names}
        for rec in records:
            seq += 1
            part = rec.partition if rec.partition >= 0 else partition_for(rec.key, info["partitions"])
            part = min(part, info["partitions"] - 1)
            cols["seq"].append(seq)
            cols["partition"].append(part)
            cols["offset"].append(info["next_offset"][part])
            info["next_offset"][part] += 1
            cols["timestamp"].append(int(rec.timestamp))
            cols["key"].append(rec.key)
            cols["value"].append(rec.value)
            cols["headers"].append([{"key": k, "value": v} for k, v in rec.headers])
        table = pa.table(cols, schema=RECORD_SCHEMA)
        first = cols["seq"][0]
        path = self.root / topic / f"{SEGMENT_PREFIX}{first:020d}-{seq:020d}{SEGMENT_SUFFIX}"
        tmp = path.with_suffix(".tmp")
        with ipc.new_file(tmp, RECORD_SCHEMA) as out:
            out.write_table(table)
        os.replace(tmp, path)
        return seq

    def writer_batch(self, writer: str) -> int:
        """The last batch id committed by ``writer`` (-1 if none)."""
        return self._state()["writers"].get(writer, -1)

    # ------------------------------------------------------------------ reading

    def read_table(self, topic: str, after_seq: int = 0, upto_seq: Optional[int] = None) -> pa.Table:
        """Records of ``topic`` with ``after_seq < seq <= upto_seq`` (default: committed), in seq order."""
        state = self._state()
        upto = state["seq"] if upto_seq is None else upto_seq
        index = self._index(topic, upto, state)
        parts = []
        for i in index.between(after_seq, upto):
            first, last = index.firsts[i], index.lasts[i]
            segment = pa.memory_map(str(self.root / topic / index.names[i]))  # no copy: segments never change
            with ipc.open_file(segment) as reader:
                table = reader.read_all()
            if "headers" not in table.column_names:  # a segment written before records had headers
                table = table.append_column("headers", pa.nulls(table.num_rows, HEADERS_TYPE))
            if first <= after_seq or last > upto:  # a segment's sequence numbers are first, first + 1, ..., last
                lo, hi = max(first, after_seq + 1) - first, min(last, upto) - first + 1
                table = table.slice(lo, hi - lo)
            parts.append(table)
        if not parts:
            return RECORD_SCHEMA.empty_table()
        return pa.concat_tables(parts)

    def seq_after(self, topics: Iterable[str], after_seq: int, count: int, upto_seq: int) -> int:
        """The sequence number of the ``count``-th record after ``after_seq`` in any of ``topics`` (or of
        their last record up to ``upto_seq`` if there are fewer; ``after_seq`` if there is none, so that
        records of other topics, such as a query's own output, start no batch). Reads no data: a
        segment's sequence numbers are contiguous and its name gives their range."""
        state = self._state()
        ranges = sorted((index.firsts[i], index.lasts[i]) for index in (self._index(t, upto_seq, state) for t in topics)
                        for i in index.between(after_seq, upto_seq))
        remaining, end = count, after_seq
        for first, last in ranges:
            first, last = max(first, after_seq + 1), min(last, upto_seq)
            size = last - first + 1
            if remaining <= size:
                return first + remaining - 1
            remaining -= size
            end = last
        return end

    def records(self, topic: str) -> list[Record]:
        return records_of(self.read_table(topic))

    def first_records(self, topic: str, n: int) -> list[Record]:
        """The first ``n`` records of ``topic`` (fewer if it holds fewer), reading only the segments they are in."""
        state = self._state()
        committed, taken, parts = state["seq"], 0, []
        index = self._index(topic, committed, state)
        for first, last in zip(index.firsts, index.lasts):
            if taken >= n:
                break
            part = self.read_table(topic, first - 1, last).slice(0, n - taken)
            parts.append(part)
            taken += part.num_rows
        return [r for part in parts for r in records_of(part)]


def records_of(table: pa.Table) -> list[Record]:
    """``Record``s of a table in ``RECORD_SCHEMA``."""
    return [Record(r["key"], r["value"], r["timestamp"], r["partition"], r["offset"], r["seq"],
                   tuple((h["key"], h["value"]) for h in r.get("headers") or ()))
            for r in table.to_pylist()]
