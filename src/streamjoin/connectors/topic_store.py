"""The embedded topic store: Kafka-like topics in a local (or shared) directory, no broker needed.

Layout::

    root/_log.json                       committed state: global sequence, per-topic offsets, sink batches
    root/_lock                           advisory lock serialising writers
    root/_appending                      the topics an append is writing segments to, until it has ended
    root/<topic>/seg-<first>-<last>.arrow  Arrow IPC segments, one per append, named by global sequence
    root/<topic>/seg-<first>-<last>-<level>-<rows>.arrow  a merge of MERGE_FANOUT consecutive segments

Every record is ``(key, value, timestamp, partition, offset, headers)`` plus ``seq``: a store-wide sequence number
assigned at append time. ``seq`` is the ingestion order across all topics of the store, so a query
reading several topics sees them in the order they were produced (the conformance runner's input order).

An append names the topics it writes in ``_appending``, writes their segments, then replaces ``_log.json``
atomically: that replace is the commit. Readers never look past the committed sequence, so a writer that
dies mid-append leaves nothing visible; the next writer finds ``_appending`` and deletes the orphaned
segments of those topics. Sinks pass ``(writer_id, batch_id)``: a batch id at or below the last one committed
for that writer is skipped, which makes replayed micro-batches idempotent (exactly-once output after a restart).

Nothing here may cost what a topic's history costs. An append writes a segment, so after its commit the
append merges a topic's last MERGE_FANOUT segments of one level into one segment of the next level (up to
MERGED_ROWS_MAX records): a topic of a million one-record appends keeps a few dozen files, not a million.
Each process keeps an index of every topic's committed segments (``_SegmentIndex``) and lists a topic's folder
again only when the index lacks some of the topic's committed records (``_log.json`` counts them), adding
just the names after its last; a read or a ``seq_after`` finds its segments by bisection. A reader that finds
a segment gone (merged since it listed it) lists the folder again.
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

import numpy as np
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


def _segment_name(first: int, last: int, level: int = 0, rows: int = 0) -> str:
    """A segment's file name: ``seg-<first>-<last>.arrow`` for one append's records (sequence numbers first,
    first + 1, ..., last), ``seg-<first>-<last>-<level>-<rows>.arrow`` for a merge of segments."""
    merged = f"-{level}-{rows}" if level else ""
    return f"{SEGMENT_PREFIX}{first:020d}-{last:020d}{merged}{SEGMENT_SUFFIX}"


def _is_segment(name: str) -> bool:
    return name.startswith(SEGMENT_PREFIX) and name.endswith(SEGMENT_SUFFIX)


@dataclass(frozen=True)
class _Segment:
    name: str
    first: int
    last: int
    level: int  # 0: one append's records; n + 1: MERGE_FANOUT segments of level n merged
    rows: int

    @staticmethod
    def of(name: str) -> "_Segment":
        numbers = [int(n) for n in name[len(SEGMENT_PREFIX): -len(SEGMENT_SUFFIX)].split("-")]
        first, last = numbers[:2]
        level, rows = numbers[2:] or (0, last - first + 1)
        return _Segment(name, first, last, level, rows)

    @property
    def contiguous(self) -> bool:
        """Whether it holds every sequence number from first to last (one append's segment does)."""
        return self.rows == self.last - self.first + 1


def _held(segments: Iterable[_Segment]) -> list:
    """The segments another of ``segments`` holds: parts a merge that died before deleting them left behind."""
    outer, held = None, []
    for segment in sorted(segments, key=lambda s: (s.first, -s.last)):
        if outer is not None and segment.last <= outer.last:
            held.append(segment)
        else:
            outer = segment
    return held


@dataclass
class _SegmentIndex:
    """One topic's committed segments known to this process, in sequence order: every segment whose last
    sequence number is at most ``covered``, holding ``rows`` records in all."""

    segments: list = field(default_factory=list)
    firsts: list = field(default_factory=list)
    lasts: list = field(default_factory=list)
    covered: int = -1
    rows: int = 0

    def add(self, segment: _Segment) -> None:
        """Add a segment past the known ones, or a merge of the latest known ones (it replaces them)."""
        while self.segments and self.firsts[-1] >= segment.first:
            self.rows -= self.segments.pop().rows
            self.firsts.pop(), self.lasts.pop()
        if self.segments and self.lasts[-1] >= segment.first:
            return  # held by a merge already known
        self.segments.append(segment)
        self.firsts.append(segment.first)
        self.lasts.append(segment.last)
        self.rows += segment.rows

    def between(self, after_seq: int, upto_seq: int) -> list:
        """The segments holding records with ``after_seq < seq <= upto_seq``."""
        return self.segments[bisect.bisect_right(self.lasts, after_seq): bisect.bisect_right(self.firsts, upto_seq)]


# (store root, topic, the sequence number the topic was created at) -> its index; a topic deleted and created
# again is another key, so an index never lists files that were deleted
_INDEXES: dict[tuple[str, str, int], _SegmentIndex] = {}
_INDEXING = threading.Lock()
MERGE_FANOUT = 16  # a topic's last MERGE_FANOUT segments of one level are merged into one of the next level
MERGED_ROWS_MAX = 1 << 18  # ... unless they hold more records than this in all (they are large enough)
READ_ATTEMPTS = 8  # a read that finds segments gone lists the folder again, this many times at most


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
        """Delete what an append left behind when it died before its end: the segments (and half-written files)
        past the commit, of the topics ``_appending`` names (every topic's, if the name list itself was cut
        short), and the segments a merge it had written holds."""
        marker = self.root / APPENDING
        try:
            topics = json.loads(marker.read_text())
        except FileNotFoundError:
            return
        except ValueError:
            topics = list(state["topics"])
        for topic in topics:
            folder = self.root / topic
            names = os.listdir(folder) if folder.is_dir() else []
            segments = [_Segment.of(name) for name in names if _is_segment(name)]
            doomed = [n for n in names if n.endswith(".tmp")] + [s.name for s in segments if s.last > state["seq"]]
            for name in doomed + [s.name for s in _held(s for s in segments if s.last <= state["seq"])]:
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

    def _index(self, topic: str, upto_seq: int, state: dict, *, afresh: bool = False) -> _SegmentIndex:
        """``topic``'s segment index, covering at least ``upto_seq`` when that is committed (``state`` was read
        before this call, so every segment it commits is in place). It lists the folder only to extend the
        index, and not when the index already holds all of the topic's committed records (``afresh``: it lists
        it all again). An index that then falls short of that count missed segments a merge made (the folder
        is listed from past its last segment, and a merge names its segment after its first part): it is
        listed whole again, against the store's state read afresh, since a merge made after ``state`` was read
        may hold segments that ``state`` committed together with later ones it does not."""
        info = state["topics"].get(topic)
        if info is None:
            return _SegmentIndex()
        key, total = (str(self.root), topic, info.get("created", 0)), sum(info["next_offset"])
        with _INDEXING:
            index = _INDEXES.get(key) if not afresh else None
            index = index or _SegmentIndex()
            if upto_seq > index.covered and index.rows != total:
                self._list(topic, index, state)
                for _ in range(READ_ATTEMPTS):
                    if index.rows == total:
                        break
                    state = self._state()
                    info = state["topics"].get(topic)
                    if info is None or info.get("created", 0) != key[2]:  # deleted meanwhile: nothing to read
                        return _SegmentIndex()
                    total = sum(info["next_offset"])
                    index = self._list(topic, _SegmentIndex(), state)
                else:
                    raise RuntimeError(f"topic {topic!r} in {self.root} holds {index.rows} committed records in "
                                       f"its segments, but {total} were committed")
            index.covered = max(index.covered, state["seq"])
            _INDEXES[key] = index
            return index

    def _list(self, topic: str, index: _SegmentIndex, state: dict) -> _SegmentIndex:
        """Add to ``index`` the committed segments in the topic's folder past its last one."""
        known = index.segments[-1].name if index.segments else ""
        try:
            names = sorted(n for n in os.listdir(self.root / topic) if n > known and _is_segment(n))
        except FileNotFoundError:
            names = []
        for name in names:
            segment = _Segment.of(name)
            if segment.last > state["seq"]:  # not committed: in flight, or left by a writer that died
                break
            index.add(segment)
        return index

    def _segments(self, topic: str, after_seq: int, upto_seq: int, state: dict, afresh: bool = False) -> list:
        """The committed segments of ``topic`` holding records with ``after_seq < seq <= upto_seq``."""
        index = self._index(topic, upto_seq, state, afresh=afresh)
        with _INDEXING:
            return index.between(after_seq, upto_seq)

    # ------------------------------------------------------------------ writing

    def append(
        self,
        batches: Sequence[tuple[str, Sequence[Record]]],
        *,
        writer: Optional[str] = None,
        batch_id: Optional[int] = None,
        partitions: int = DEFAULT_PARTITIONS,
    ) -> bool:
        """Append records to one or more topics as one atomic commit, in the order given; then merge each
        written topic's latest segments where they are many and small (``_merge``).

        Returns False (and writes nothing) when ``writer``'s ``batch_id`` was already committed."""
        with self._locked() as state:
            if writer is not None and batch_id is not None:
                if batch_id <= state["writers"].get(writer, -1):
                    return False
            marker = self.root / APPENDING
            written = sorted({topic for topic, records in batches if records})
            if written:
                marker.write_text(json.dumps(written))
            indexes = {topic: self._index(topic, state["seq"], state) for topic in written if topic in state["topics"]}
            seq, segments = state["seq"], {topic: [] for topic in written}
            for topic, records in batches:
                info = state["topics"].get(topic) or self._add_topic(state, topic, partitions)
                if records:
                    segments[topic].append(self._write_segment(topic, info, records, seq))
                    seq = segments[topic][-1].last
            state["seq"] = seq
            if writer is not None and batch_id is not None:
                state["writers"][writer] = batch_id
            self._commit(state)
            for topic, new in segments.items():
                index = indexes.get(topic) or self._index(topic, seq, state)
                with _INDEXING:
                    for segment in new:
                        index.add(segment)
                    index.covered = seq
                self._merge(topic, index)
            marker.unlink(missing_ok=True)
            return True

    def _write_segment(self, topic: str, info: dict, records: Sequence[Record], seq: int) -> _Segment:
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
        return self._write(topic, pa.table(cols, schema=RECORD_SCHEMA))

    def _write(self, topic: str, table: pa.Table, level: int = 0) -> _Segment:
        seqs = table.column("seq")
        segment = _Segment.of(_segment_name(seqs[0].as_py(), seqs[-1].as_py(), level, table.num_rows))
        path = self.root / topic / segment.name
        tmp = path.with_suffix(".tmp")
        with ipc.new_file(tmp, RECORD_SCHEMA) as out:
            out.write_table(table)
        os.replace(tmp, path)
        return segment

    def _merge(self, topic: str, index: _SegmentIndex) -> None:
        """Merge the topic's last MERGE_FANOUT segments into one while they are all of one level and small, so
        that a topic holds a few segments per level however many appends it had (a segment per append would
        make its folder, and every process's index of it, grow with its history). Each record is rewritten
        once per level. The merged segment is in place before its parts go: a reader that finds a part gone
        lists the folder again (``read_table``); a merge that dies between the two leaves parts that the
        merged segment holds, which readers skip and the next append deletes (``_drop_uncommitted``)."""
        while True:
            with _INDEXING:
                parts = index.segments[-MERGE_FANOUT:]
            if (len(parts) < MERGE_FANOUT or len({p.level for p in parts}) > 1
                    or sum(p.rows for p in parts) > MERGED_ROWS_MAX):
                return
            table = pa.concat_tables(self._open(topic, p) for p in parts).combine_chunks()
            merged = self._write(topic, table, parts[0].level + 1)
            with _INDEXING:
                index.add(merged)
            for part in parts:
                (self.root / topic / part.name).unlink(missing_ok=True)

    def _open(self, topic: str, segment: _Segment) -> pa.Table:
        source = pa.memory_map(str(self.root / topic / segment.name))  # no copy: a segment never changes
        with ipc.open_file(source) as reader:
            table = reader.read_all()
        if "headers" not in table.column_names:  # a segment written before records had headers
            table = table.append_column("headers", pa.nulls(table.num_rows, HEADERS_TYPE))
        return table

    def writer_batch(self, writer: str) -> int:
        """The last batch id committed by ``writer`` (-1 if none)."""
        return self._state()["writers"].get(writer, -1)

    # ------------------------------------------------------------------ reading

    def read_table(self, topic: str, after_seq: int = 0, upto_seq: Optional[int] = None) -> pa.Table:
        """Records of ``topic`` with ``after_seq < seq <= upto_seq`` (default: committed), in seq order."""
        state = self._state()
        upto = state["seq"] if upto_seq is None else upto_seq
        parts = self._each_segment([topic], after_seq, upto, state,
                                   lambda t, segment: _slice(self._open(t, segment), segment, after_seq, upto))
        return pa.concat_tables(parts) if parts else RECORD_SCHEMA.empty_table()

    def seq_after(self, topics: Iterable[str], after_seq: int, count: int, upto_seq: int) -> int:
        """The sequence number of the ``count``-th record after ``after_seq`` in any of ``topics`` (or of
        their last record up to ``upto_seq`` if there are fewer; ``after_seq`` if there is none, so that
        records of other topics, such as a query's own output, start no batch). Reads no records: an append's
        segment holds consecutive numbers, which its name gives; of a merged one the range cuts, the numbers."""

        def numbers(topic: str, segment: _Segment):  # a (first, last) span, or the numbers themselves
            if segment.contiguous:
                return max(segment.first, after_seq + 1), min(segment.last, upto_seq)
            seqs = self._open(topic, segment).column("seq").to_numpy()
            return seqs[(seqs > after_seq) & (seqs <= upto_seq)]

        found = self._each_segment(topics, after_seq, upto_seq, self._state(), numbers)
        spans = np.array([f for f in found if isinstance(f, tuple)], dtype=np.int64).reshape(-1, 2)
        merged = [f for f in found if not isinstance(f, tuple)]

        def reached(seq: int) -> int:  # how many records have after_seq < their number <= seq
            return (int(np.clip(np.minimum(spans[:, 1], seq) - spans[:, 0] + 1, 0, None).sum())
                    + sum(int(np.searchsorted(m, seq, "right")) for m in merged))

        if reached(upto_seq) <= count:  # all of them: the last one's number
            lasts = [int(spans[:, 1].max())] if len(spans) else []
            return max([after_seq, *lasts, *(int(m[-1]) for m in merged if len(m))])
        lo, hi = after_seq + 1, upto_seq  # the smallest number with ``count`` records up to it
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if reached(mid) >= count else (mid + 1, hi)
        return lo

    def _each_segment(self, topics: Iterable[str], after_seq: int, upto_seq: int, state: dict, read) -> list:
        """``read(topic, segment)`` for each segment of ``topics`` holding records in the range; listed again
        when a segment is gone (merged since this process listed it)."""
        for attempt in range(READ_ATTEMPTS):
            try:
                return [read(topic, segment) for topic in topics
                        for segment in self._segments(topic, after_seq, upto_seq, state, afresh=attempt > 0)]
            except FileNotFoundError:
                continue
        raise RuntimeError(f"the segments of {', '.join(topics)} in {self.root} kept changing while read")

    def records(self, topic: str) -> list[Record]:
        return records_of(self.read_table(topic))

    def first_records(self, topic: str, n: int) -> list[Record]:
        """The first ``n`` records of ``topic`` (fewer if it holds fewer), reading only the segments they are in."""
        state = self._state()
        committed, taken, parts = state["seq"], 0, []
        for segment in self._segments(topic, 0, committed, state):
            if taken >= n:
                break
            part = self.read_table(topic, segment.first - 1, segment.last).slice(0, n - taken)
            parts.append(part)
            taken += part.num_rows
        return [r for part in parts for r in records_of(part)]


def _slice(table: pa.Table, segment: _Segment, after_seq: int, upto_seq: int) -> pa.Table:
    """The records of a segment's ``table`` with ``after_seq < seq <= upto_seq``."""
    if segment.first > after_seq and segment.last <= upto_seq:
        return table
    if segment.contiguous:
        lo, hi = max(segment.first, after_seq + 1) - segment.first, min(segment.last, upto_seq) - segment.first + 1
    else:
        seqs = table.column("seq").to_numpy()
        lo, hi = (int(np.searchsorted(seqs, bound, "right")) for bound in (after_seq, upto_seq))
    return table.slice(lo, max(hi - lo, 0))


def records_of(table: pa.Table) -> list[Record]:
    """``Record``s of a table in ``RECORD_SCHEMA``."""
    return [Record(r["key"], r["value"], r["timestamp"], r["partition"], r["offset"], r["seq"],
                   tuple((h["key"], h["value"]) for h in r.get("headers") or ()))
            for r in table.to_pylist()]
