"""Late records: what a query's operators drop as late, or for a null join (or group) key, written to a topic.

Only with ``SET 'streamjoin.late.topic' = '<topic>'`` before the query's statement; without it those records
are only counted (``runtime.metrics``). Each late record is one JSON value, keyed by nothing, with the record's
event time as its timestamp: ``query``, ``reason`` (``late`` or ``null_key``), ``rowtime`` (the record's event
time, ms), ``stream_time`` (the query's stream time when the record was read: the watermark of a Flink query),
and the record's ``topic``, ``partition`` and ``offset`` (absent for a row an earlier join produced).

How they travel: the source's records carry their position (``ORIGIN``, a JSON text) when the setting is on; an
operator step that drops records keeps their descriptions (``operators.state``'s ``drop_records``), and they
leave the operator as extra rows that are collected into a Spark observed metric, as dead letters are
(``connectors.dead_letters``), then filtered out. The query's sink function writes a batch's late records
after its sink, before Spark commits the batch, under the writer ``<sink writer>|late`` with the batch id: a
batch run again after a crash writes nothing twice (the embedded store skips a batch its writer wrote; on a
broker, the records already there are found by their batch and index headers, as the Kafka sink does).
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Optional

TOPIC_PROPERTY = "streamjoin.late.topic"
ORIGIN = "_origin"  # a decoded record's topic, partition and offset, as JSON (only when late records are kept)
LATE = "__late"  # an operator's output column on the rows that describe dropped records (every other null)


def described(reason: str, rowtime, stream_time, origin: Optional[str]) -> str:
    """One dropped record as an operator hands it over: the JSON the observed metric collects."""
    return json.dumps({"reason": reason, "rowtime": rowtime, "stream_time": stream_time, "origin": origin})


def described_column(reason: str, rowtime, stream_time, origin):
    """``described``'s JSON as a Spark column, of the columns given (for a step that drops records in Spark)."""
    from pyspark.sql import functions as F

    return F.to_json(F.struct(F.lit(reason).alias("reason"), rowtime.alias("rowtime"),
                              stream_time.alias("stream_time"), origin.alias("origin")))


@dataclass(frozen=True)
class LateRecords:
    query_id: str
    topic: str  # the late-records topic
    root: Optional[str] = None  # embedded store
    bootstrap: Optional[str] = None  # or a broker
    prefix: str = field(default_factory=lambda: f"late:{uuid.uuid4().hex}:")
    metrics: list = field(default_factory=list)  # the observed metrics' names, one per dropping step

    def observe(self, df, described_column):
        """``df`` with ``described_column`` (``described``'s JSON, null on rows that drop nothing) collected per
        batch into an observed metric of its own."""
        from pyspark.sql import functions as F

        name = f"{self.prefix}{len(self.metrics)}"
        self.metrics.append(name)
        return df.observe(name, F.collect_list(described_column).alias("late"))

    def create_topic(self) -> None:
        """The topic exists from the query's start (``streamjoin topic cat`` reads it, empty or not)."""
        if self.bootstrap:
            from .kafka_client import KafkaTopics

            KafkaTopics(self.bootstrap).create(self.topic, 1)
        else:
            from .topic_store import TopicStore

            TopicStore(self.root).create(self.topic, 1)

    def write_observed(self, observed, batch_id: int, writer: str) -> int:
        """Write the records the batch's operators dropped (``observed``: the Scala map of the batch's observed
        metrics) exactly once; how many there were."""
        items = []
        for name in self.metrics:
            row = observed.get(name)
            if row.isDefined():
                values = row.get().getList(0)
                items += [values.get(i) for i in range(values.size())]  # by index: see DeadLetters.write_observed
        if not items:
            return 0
        records = sorted((self._record(json.loads(text)) for text in items), key=lambda r: r[0])
        letters = [(None, json.dumps(value).encode(), value.get("rowtime") or 0) for _, value in records]
        if self.bootstrap:
            _write_kafka(self.bootstrap, self.topic, f"{writer}|late", batch_id, letters)
        else:
            from .topic_store import Record, TopicStore

            TopicStore(self.root).append([(self.topic, [Record(k, v, t) for k, v, t in letters])],
                                         writer=f"{writer}|late", batch_id=batch_id, partitions=1)
        return len(letters)

    def _record(self, item: dict) -> tuple:
        origin = json.loads(item["origin"]) if item.get("origin") else {}
        value = {"query": self.query_id, "reason": item["reason"], "rowtime": item.get("rowtime"),
                 "stream_time": item.get("stream_time"), **origin}
        # one order however the batch's tasks ran: a re-run batch's records get the same indices
        order = (origin.get("topic", ""), origin.get("partition", -1), origin.get("offset", -1), json.dumps(value))
        return order, value


def _write_kafka(bootstrap: str, topic: str, writer: str, batch_id: int, letters: list) -> None:
    from .kafka_client import BrokerError, producer, stamp_headers
    from .kafka_sink import BATCH_HEADER, INDEX_HEADER, WRITER_HEADER, WrittenSoFar

    written = WrittenSoFar(bootstrap, topic, writer)
    written.load()
    if batch_id < written.batch:
        return
    present = written.indices if batch_id == written.batch else set()
    out = producer(bootstrap)
    for index, (key, value, stamp) in enumerate(letters):
        if index in present:
            continue
        stamp, headers = stamp_headers(stamp, [(WRITER_HEADER, writer.encode()), (BATCH_HEADER, str(batch_id).encode()),
                                               (INDEX_HEADER, str(index).encode())])
        out.produce(topic, key=key, value=value, timestamp=stamp, headers=headers)
    if out.flush(60):
        raise BrokerError(f"late records of micro-batch {batch_id} not delivered to {topic}")
