"""The embedded topic store: Kafka-like topics in a local (or shared) directory, no broker needed.

Layout::

    root/_log.json                       committed state: global sequence, per-topic offsets, sink batches
    root/_lock                           advisory lock serialising writers
    root/<topic>/seg-<first>-<last>.arrow  Arrow IPC segments, one per append, named by global sequence

Every record is ``(key, value, timestamp, partition, offset, headers)`` plus ``seq``: a store-wide sequence number
assigned at append time. ``seq`` is the ingestion order across all topics of the store, so a query
reading several topics sees them in the order they were produced (the conformance runner's input order).

An append writes its segments first and then replaces ``_log.json`` atomically: that replace is the
commit. Readers never look past the committed sequence, so a writer that dies mid-append leaves nothing
visible; the next writer deletes the orphaned segments. Sinks pass ``(writer_id, batch_id)``: a batch id
at or below the last one committed for that writer is skipped, which makes replayed micro-batches
idempotent (exactly-once output after a restart).
"""
from __future__ import annotations

import fcntl
import json
import os
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
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


def _segment_range(path: Path) -> tuple[int, int]:
    _, first, last = path.stem.split("-")
    return int(first), int(last)


class TopicStore:
    """A directory of topics. Safe for several processes: writers take an exclusive file lock."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ committed state

    def _state(self) -> dict:
        try:
            return json.loads((self.root / "_log.json").read_text())
        except FileNotFoundError:
            return {"seq": 0, "topics": {}, "writers": {}}

    def _commit(self, state: dict) -> None:
        tmp = self.root / f"_log.json.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(state, sort_keys=True))
        os.replace(tmp, self.root / "_log.json")

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
        for topic in state["topics"]:
            for seg in self._segments(topic):
                if _segment_range(seg)[1] > state["seq"]:
                    seg.unlink(missing_ok=True)

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
        info = {"partitions": max(1, int(partitions)), "next_offset": [0] * max(1, int(partitions))}
        state["topics"][topic] = info
        return info

    def delete(self, topic: str) -> None:
        with self._locked() as state:
            if state["topics"].pop(topic, None) is not None:
                for seg in self._segments(topic):
                    seg.unlink(missing_ok=True)
                self._commit(state)

    def _segments(self, topic: str) -> list[Path]:
        folder = self.root / topic
        if not folder.is_dir():
            return []
        return sorted(folder.glob("seg-*.arrow"))

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
        path = self.root / topic / f"seg-{first:020d}-{seq:020d}.arrow"
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
        upto = self.committed_seq() if upto_seq is None else upto_seq
        parts = []
        for seg in self._segments(topic):
            first, last = _segment_range(seg)
            if last <= after_seq or first > upto:
                continue
            with ipc.open_file(pa.memory_map(str(seg))) as reader:  # no copy: segments never change
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
        ranges = sorted(
            r for topic in topics for r in map(_segment_range, self._segments(topic))
            if r[1] > after_seq and r[0] <= upto_seq
        )
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
        committed, taken, parts = self.committed_seq(), 0, []
        for seg in self._segments(topic):
            if taken >= n or _segment_range(seg)[0] > committed:
                break
            first, last = _segment_range(seg)
            part = self.read_table(topic, first - 1, min(last, committed)).slice(0, n - taken)
            parts.append(part)
            taken += part.num_rows
        return [r for part in parts for r in records_of(part)]


def records_of(table: pa.Table) -> list[Record]:
    """``Record``s of a table in ``RECORD_SCHEMA``."""
    return [Record(r["key"], r["value"], r["timestamp"], r["partition"], r["offset"], r["seq"],
                   tuple((h["key"], h["value"]) for h in r.get("headers") or ()))
            for r in table.to_pylist()]
