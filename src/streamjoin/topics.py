"""Feeding and reading topics from Python: the embedded store under a home, or a Kafka broker.

    from streamjoin import Topics
    with Topics(".streamjoin") as topics:             # or Topics("127.0.0.1:9092"): a broker
        topics.produce("orders", [{"key": 1, "value": {"ITEM": "a"}, "timestamp": 10}])
        topics.produce([{"topic": "orders", "key": 2, "value": {"ITEM": "b"}},   # several topics, in this
                        {"topic": "shipments", "key": 2, "value": {"AT": 5}}])   # ingestion order
        topics.read("orders")    # [{"partition": 0, "offset": 0, "timestamp": 10, "key": "1", "value": {...}}, ...]

A record is a dict: ``key`` (a scalar is written as its text, an object or array as JSON), ``value`` (written as
JSON; bytes as they are, for DELIMITED or Avro values; None: a tombstone), ``timestamp`` in ms (default: now)
and, with several topics in one call, ``topic``. ``streamjoin topic produce|cat|list`` are this module's commands.
"""
from __future__ import annotations

import json
import re
import time
from typing import Any, Iterable, Optional, Union

BROKER = re.compile(r"[\w.-]+:\d+(,[\w.-]+:\d+)*")  # host:port[,host:port...]: a Kafka bootstrap list


class Topics:
    """The topics of a home's embedded store (``where``: the home, as ``--home``: a path or ``file://`` URI) or of
    a Kafka broker (``where`` of the form host:port, or ``bootstrap_servers``), reached with ``kafka_properties``
    (client properties: security settings, in librdkafka's or Java clients' names)."""

    def __init__(self, where: str = ".streamjoin", *, bootstrap_servers: Optional[str] = None,
                 kafka_properties: Optional[dict] = None):
        if bootstrap_servers is None and BROKER.fullmatch(where):
            bootstrap_servers = where
        if bootstrap_servers:
            from .connectors.kafka_client import KafkaTopics, client_properties, use_client_properties

            use_client_properties(bootstrap_servers, client_properties(kafka_properties or {}))
            self.store: Any = KafkaTopics(bootstrap_servers)
        else:
            from .connectors.topic_store import TopicStore
            from .runtime.storage import embedded_root

            self.store = TopicStore(embedded_root(where))

    def list(self) -> list[str]:
        return self.store.topics()

    def create(self, topic: str, partitions: int = 1) -> None:
        """Create ``topic`` if it does not exist (an existing one keeps its partitions)."""
        self.store.create(topic, partitions)

    def produce(self, topic: Union[str, Iterable[dict]], records: Optional[Iterable[dict]] = None, *,
                partitions: int = 1) -> int:
        """Append ``records`` to ``topic``, or (``produce(records)``) each record to its own ``topic``, in the order
        given: that order is the ingestion order. Topics that do not exist are created with ``partitions``.
        Returns the number of records appended."""
        if records is None:
            records, topic = topic, None
        runs: list[tuple[str, list]] = []  # a run of one topic's records is one append
        for number, record in enumerate(records, 1):
            name = record.get("topic") or topic
            if not name:
                raise ValueError(f"record {number} names no topic (give one, or a \"topic\" field)")
            if runs and runs[-1][0] == name:
                runs[-1][1].append(as_record(record))
            else:
                runs.append((name, [as_record(record)]))
        for name in dict.fromkeys(t for t, _ in runs):
            self.store.create(name, partitions)
        self.store.append(runs, partitions=partitions)
        return sum(len(r) for _, r in runs)

    def read(self, topic: str) -> list[dict]:
        """Every record of ``topic``, partition after partition: its key as text, its value as JSON when it is
        JSON, else as text, else ``{"base64": ...}``."""
        return [{"partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
                 "key": r.key.decode("utf-8", "replace") if r.key is not None else None, "value": value_text(r.value)}
                for r in self.store.records(topic)]

    def close(self) -> None:
        if hasattr(self.store, "close"):
            self.store.close()

    def __enter__(self) -> "Topics":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


def as_record(record: dict):
    """A record dict (see the module) as the stores take it."""
    from .connectors.formats import encode_key
    from .connectors.topic_store import Record

    value = record.get("value")
    if value is not None and not isinstance(value, (bytes, bytearray)):
        value = json.dumps(value).encode()
    timestamp = record.get("timestamp")
    return Record(encode_key(record.get("key")), value, int(time.time() * 1000 if timestamp is None else timestamp))


def value_text(value: Optional[bytes]) -> object:
    """A value as JSON when it is JSON, else its text (DELIMITED), else base64 (Avro)."""
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        pass
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        import base64

        return {"base64": base64.b64encode(value).decode()}
