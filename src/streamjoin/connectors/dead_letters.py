"""Dead letters: input records a query cannot decode are counted and written, with the error, to a topic.

The topic is ``streamjoin_dead_letters`` (``SET 'streamjoin.dead.letter.topic'`` names another), on the
broker or in the embedded store. Each dead letter keeps the record's key; its value is JSON: ``query``,
``source`` (the declared stream or table), ``topic``, ``partition``, ``offset``, ``timestamp``, ``error``,
and the undecodable ``value`` as text (``value_base64`` when it is not UTF-8). A key or value longer than
``KEPT_BYTES`` (256 KiB) is kept cut to that: the letter then also holds the value's whole length
(``value_bytes``), and the record itself stays where its topic, partition and offset say. So one huge record
neither fills the driver's memory nor exceeds a broker's record size limit (1 MB by default).

A scan that cannot decode a record drops it and, in the same pass, collects the record and its error as
JSON into a Spark observed metric (``DeadLetters.metric``, one per scan; ``lower.decode``): that costs
nothing per record that passes, where a Python UDF would ship every record to Python and back. The
query's sink function (``runtime.batch_sink``) writes the sink's batch, then the batch's dead letters from
those metrics, before Spark commits the batch. A batch can run again (after a crash), so writes are
idempotent: the dead letters of one source partition are written in offset order by the writer
``query|topic|partition``, and a write whose last offset is not past what that writer already wrote is
skipped (the embedded store's writer batches; on a broker, the writer reads back its last dead letter).
The failures of one batch are held in the driver's memory while they are written; their number is added to
the query's counts (``runtime.observed_counts``).
"""
from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from typing import Callable, Optional

DEFAULT_TOPIC = "streamjoin_dead_letters"
TOPIC_PROPERTY = "streamjoin.dead.letter.topic"
ERROR = "__error"
KEPT_BYTES = 256 * 1024  # of a dead letter's key and value
VALUE_BYTES = "__value_bytes"  # the whole value's length


@dataclass(frozen=True)
class DeadLetters:
    query_id: str
    source: str
    topic: str  # the dead-letter topic
    root: Optional[str] = None  # embedded store
    bootstrap: Optional[str] = None  # or a broker
    metric: str = field(default_factory=lambda: f"dead_letters:{uuid.uuid4().hex}")  # the scan's observed metric
    # the failures' errors said more exactly (the scan's, from its records: ``lower.decode.failure_explainer``)
    explain: Optional[Callable[[list[dict]], list[str]]] = field(default=None, compare=False)

    def write_observed(self, observed) -> int:
        """Write the failed records its scan observed in a batch (``observed``: the Scala map of the batch's
        execution; each failure the JSON of a record and its error) as dead letters; how many there were."""
        row = observed.get(self.metric)
        if not row.isDefined():
            return 0
        # by index: iterating a py4j list ends in a Java exception that PySpark inspects in several more
        # round trips (~50 ms a batch)
        items = row.get().getList(0)
        failures = [items.get(i) for i in range(items.size())]
        if failures:
            rows = [_failed_record(text) for text in failures]
            if self.explain is not None:
                for row, error in zip(rows, self.explain(rows)):
                    row[ERROR] = error
            self._write(rows)
        return len(failures)

    def _write(self, rows: list) -> None:
        groups: dict = {}
        for row in rows:
            groups.setdefault((row["topic"], row["partition"]), []).append(row)
        for (topic, partition), group in groups.items():
            group.sort(key=lambda r: r["offset"])
            writer = f"{self.query_id}|{topic}|{partition}"
            letters = [(r["key"], self._letter(r), r["timestamp"], r["offset"]) for r in group]
            if self.bootstrap:
                _write_kafka(self.bootstrap, self.topic, writer, letters)
            else:
                _write_embedded(self.root, self.topic, writer, letters)

    def _letter(self, row: dict) -> bytes:
        letter = {"query": self.query_id, "source": self.source, "topic": row["topic"], "partition": row["partition"],
                  "offset": row["offset"], "timestamp": row["timestamp"], "error": row[ERROR]}
        value, length = row["value"], row.get(VALUE_BYTES)
        cut = value is not None and length is not None and length > len(value)
        text = None if value is None else _utf8(value, cut)
        if text is None and value is not None:
            letter["value_base64"] = base64.b64encode(value).decode()
        else:
            letter["value"] = text
        if cut:
            letter["value_bytes"] = length
        return json.dumps(letter).encode()


def _utf8(value: bytes, cut: bool) -> Optional[str]:
    """``value`` as UTF-8 text, or None; a ``cut`` value may end inside a character, which is left out."""
    for end in range(len(value), len(value) - (4 if cut else 1), -1):
        try:
            return value[:end].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def _failed_record(text: str) -> dict:
    """A failed record from its JSON (key and value in base64)."""
    row = json.loads(text)
    for name in ("key", "value"):
        row[name] = None if row.get(name) is None else base64.b64decode(row[name])  # to_json leaves nulls out
    return row


def _write_embedded(root: str, topic: str, writer: str, letters: list) -> None:
    from .topic_store import Record, TopicStore

    records = [Record(key, value, stamp or 0) for key, value, stamp, _ in letters]
    TopicStore(root).append([(topic, records)], writer=writer, batch_id=letters[-1][3])


def _write_kafka(bootstrap: str, topic: str, writer: str, letters: list) -> None:
    from .kafka_client import KafkaTopics, producer, stamp_headers
    from .kafka_sink import BATCH_HEADER, INDEX_HEADER, WRITER_HEADER, WrittenSoFar

    KafkaTopics(bootstrap).create(topic, 1)
    written = WrittenSoFar(bootstrap, topic, writer)
    written.load()
    out = producer(bootstrap)
    for key, value, stamp, offset in letters:
        if offset <= written.batch:
            continue
        stamp, headers = stamp_headers(stamp or 0, [(WRITER_HEADER, writer.encode()), (BATCH_HEADER, str(offset).encode()),
                                                    (INDEX_HEADER, b"0")])
        out.produce(topic, key=key, value=value, timestamp=stamp, headers=headers)
    if out.flush(60):
        from .kafka_client import BrokerError

        raise BrokerError(f"dead letters not delivered to {topic}")

