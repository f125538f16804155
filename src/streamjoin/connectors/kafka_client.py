"""Talking to a Kafka-protocol broker (confluent-kafka): topics, end offsets, fetching ranges, producing.

``KafkaTopics`` offers the embedded ``TopicStore``'s interface (``create``, ``exists``, ``partitions``,
``append``, ``read_table``, ``records``, ``committed_seq``) over a broker, so the engine, the
conformance runner and the ``topic`` commands use either one alike.

End offsets are taken from a fetch response's high watermark, not from ListOffsets: a fetch at a
partition's next offset answers at once, with either its first new record or end-of-partition, and
carries the high watermark either way. (Tansu, the test broker, answers ListOffsets "latest" wrongly.)

A record timestamp of 0 cannot be produced through librdkafka (it means "now"); streamjoin's producers
mark such records with ``ZERO_TIME_HEADER`` and its readers restore the 0.

Records that streamjoin's own producers write (the conformance runner, ``streamjoin topic produce``)
carry their producer sequence in the header ``ORDER_HEADER``; a query can be told to order its inputs by
it (``streamjoin.ingestion.order`` = ``produced``) instead of by timestamp.

Every client streamjoin makes (consumers, producers, admin clients; on the driver and in the source's Python
workers) also takes the deployment's *client properties*: security settings above all (``security.protocol``,
``sasl.*``, ``ssl.*``), in librdkafka's names, Java clients' names translated (``client_properties``). A process
registers them for a broker (``use_client_properties``) before it makes a client for it: the engine for the
driver, the source reader from its options for its Python workers. Values of secret properties are shown
as ``***`` (``masked``) wherever a setting is shown.
"""
from __future__ import annotations

import bisect
import contextlib
import re
import time
from typing import Iterable, Optional, Sequence

import numpy as np
import pyarrow as pa

from ..errors import StreamjoinError
from .topic_store import HEADERS_TYPE, RECORD_SCHEMA, Record, records_of

BOOTSTRAP_PROPERTY = "bootstrap.servers"
BOOTSTRAP_ENV = "STREAMJOIN_BOOTSTRAP_SERVERS"
ORDER_HEADER = "streamjoin.seq"
# librdkafka sends a timestamp of 0 as "now": streamjoin's producers send such a record with this header
# and the time 1, and readers restore the 0.
ZERO_TIME_HEADER = "streamjoin.zero-time"
INTERNAL_HEADER_PREFIX = "streamjoin."  # headers streamjoin itself adds: not shown to queries
FETCH_TIMEOUT_S = 30.0
# Tansu's fetch reads nothing once finding the start offset in a long partition outlasts the fetch wait: it answers
# with the high watermark and no record, again and again (at 2,000 records/s, after ~40k records per partition and a
# 1 ms wait). ``high_watermarks`` waits this long for a record or end-of-partition, then takes the watermark of such
# an answer.
SILENT_FETCH_S = 0.05

FETCHED_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("order", pa.int64()),  # the ORDER_HEADER value, or null
        ("headers", HEADERS_TYPE),  # the record's own headers (without streamjoin's), when asked for
    ]
)


class BrokerError(StreamjoinError):
    """The broker could not be reached, or did not answer as expected."""


# ------------------------------------------------------------------ client properties

SECRET = re.compile(r"(?i)password|secret|jaas|token|credential|key\.pem")  # properties whose values are never shown
# chosen by streamjoin for what it does (offsets in the checkpoint, exactly-once writes, the broker to use), so a
# deployment's value is left out; serializers are Java clients' own
OWNED = frozenset({"bootstrap.servers", "group.id", "enable.auto.commit", "enable.auto.offset.store",
                   "enable.partition.eof", "auto.offset.reset", "enable.idempotence", "key.serializer",
                   "value.serializer", "key.deserializer", "value.deserializer"})
_JAAS_VALUE = r'"(?:[^"\\]|\\.)*"|[^\s;"]+'  # a login option's value: quoted (with \\ escapes), or a word
_JAAS = re.compile(r'\s*([\w.$]+)\s+(?:required|requisite|sufficient|optional)((?:\s+[\w.]+\s*=\s*(?:' + _JAAS_VALUE + r'))*)\s*;?\s*')
_JAAS_OPTION = re.compile(r'([\w.]+)\s*=\s*(' + _JAAS_VALUE + ')')
_PASSWORD_LOGINS = ("PlainLoginModule", "ScramLoginModule")
_CLIENT_PROPERTIES: dict[str, dict] = {}  # broker (bootstrap list) -> the client properties this process uses for it


def client_properties(given: dict) -> dict:
    """``given`` client properties (Java clients' or librdkafka's names) as librdkafka takes them: a
    ``sasl.jaas.config`` with a PLAIN or SCRAM login module becomes ``sasl.username`` and ``sasl.password``,
    Java's empty ``ssl.endpoint.identification.algorithm`` is librdkafka's ``none``, a PKCS#12 keystore's type is
    dropped (librdkafka's ``ssl.keystore.location`` is PKCS#12); ``OWNED`` ones are left out. Raises ValueError
    for what librdkafka cannot take (a Java truststore, another login module), naming the property."""
    out: dict = {}
    for name, value in given.items():
        name, value = name.strip(), str(value)
        lowered = name.lower()
        if lowered in OWNED:
            continue
        if lowered == "sasl.jaas.config":
            out.update(_jaas_credentials(value))
        elif lowered.startswith("ssl.truststore."):
            raise ValueError(f"'{name}': a Java truststore cannot be read here (librdkafka); give the CA certificates "
                             "as a PEM file in 'ssl.ca.location'")
        elif lowered == "ssl.keystore.type":
            if value.upper() != "PKCS12":
                raise ValueError(f"'{name}' = '{value}': only a PKCS12 keystore can be read here (librdkafka's "
                                 "'ssl.keystore.location'); or give 'ssl.certificate.location' and 'ssl.key.location'")
        elif lowered == "ssl.endpoint.identification.algorithm" and not value:
            out[name] = "none"
        else:
            out[name] = value
    return out


def _jaas_credentials(config: str) -> dict:
    """The user name and password of a Java client's JAAS login (``sasl.jaas.config``)."""
    login = _JAAS.fullmatch(config)
    module = login.group(1).rsplit(".", 1)[-1] if login else None
    if module not in _PASSWORD_LOGINS:
        raise ValueError(f"'sasl.jaas.config': only a PlainLoginModule or ScramLoginModule login (user name and "
                         f"password) can be used here, not {module or 'this text'}; for other SASL mechanisms give "
                         "librdkafka's own properties ('sasl.oauthbearer.*', 'sasl.kerberos.*')")
    options = {k: re.sub(r"\\(.)", r"\1", v[1:-1]) if v.startswith('"') else v
               for k, v in _JAAS_OPTION.findall(login.group(2))}
    missing = [k for k in ("username", "password") if k not in options]
    if missing:
        raise ValueError(f"'sasl.jaas.config' names no {' and no '.join(missing)}")
    return {"sasl.username": options["username"], "sasl.password": options["password"]}


def read_properties_file(path: str) -> dict:
    """A Java properties file (``key=value``, ``key: value`` or ``key value`` lines; ``#`` and ``!`` comments; a
    line ending in a backslash goes on on the next), as Kafka's tools take client settings (``--command-config``)."""
    properties, pending = {}, ""
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            line = pending + line.strip()
            pending = ""
            if line.endswith("\\") and not line.endswith("\\\\"):
                pending = line[:-1]
                continue
            if not line or line[0] in "#!":
                continue
            name, value = re.match(r"((?:[^\\=:\s]|\\.)*)\s*[=:\s]?\s*(.*)", line).groups()
            properties[_unescaped(name)] = _unescaped(value)
    return properties


def _unescaped(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(m.group(1), m.group(1)), text)


def masked(name: str, value) -> str:
    """A setting's value as it may be shown: ``***`` for a secret one."""
    return "***" if SECRET.search(name) else str(value)


def masked_text(statement: str) -> str:
    """A statement's text as it may be shown or stored: every ``'name' = 'value'`` (a WITH option, a SET) of a
    secret name with ``'***'`` as its value."""
    def mask(m: re.Match) -> str:
        return m.group(1) + m.group(2) + "'***'" if SECRET.search(m.group(1)) else m.group(0)

    return re.sub(r"('(?:[^']|'')*')(\s*=\s*)'(?:[^']|'')*'", mask, statement)


def use_client_properties(bootstrap: str, properties: dict) -> None:
    """The client properties (``client_properties``' output) every client this process makes for ``bootstrap``
    takes from now on."""
    _CLIENT_PROPERTIES[bootstrap] = dict(properties)


def registered_properties(bootstrap: str) -> dict:
    """The client properties this process uses for ``bootstrap`` (to hand to the executors' clients)."""
    return dict(_CLIENT_PROPERTIES.get(bootstrap, {}))


def _configured(bootstrap: str, defaults: dict, extra: dict) -> dict:
    """A client's configuration: streamjoin's defaults, the broker's client properties, then the call's own."""
    return {**defaults, **_CLIENT_PROPERTIES.get(bootstrap, {}), **extra, "bootstrap.servers": bootstrap}


def consumer(bootstrap: str, **extra):
    from confluent_kafka import Consumer

    return Consumer(_configured(bootstrap, {
        "group.id": "streamjoin",  # required by the client; offsets live in Spark's checkpoint, not the group
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",  # an offset the broker no longer has is reported, never skipped
        "fetch.wait.max.ms": 10,
        "log_level": 3,
    }, extra))


_IDLE_READERS: dict[str, list] = {}  # bootstrap -> [(consumer, {topic: id} it has read)] not in use


@contextlib.contextmanager
def reading_consumer(bootstrap: str, topic_ids: dict):
    """A consumer for bulk fetches from topics ``topic_ids`` (name -> topic id), lent for one task and kept
    for this process's next one (Spark reuses its Python workers): a new consumer costs ~35 ms to connect
    and ~5-50 ms to close, per task and micro-batch. One that has read a topic under another id (since
    deleted and recreated) is closed instead: the client's cached partition state would be stale (a
    Python worker was seen to crash). ``fetch_ranges`` leaves it unassigned; one that failed is closed."""
    idle = _IDLE_READERS.setdefault(bootstrap, [])
    client, seen = idle.pop() if idle else (None, {})
    if client is not None and any(seen.get(topic, id_) != id_ for topic, id_ in topic_ids.items()):
        client.close()
        client, seen = None, {}
    if client is None:
        # - the fetch queue's backoff (1 s by default) would outlive unassign() and stall the next task's fetch;
        # - what the client fetches past a range's end is thrown away: 1 MB per partition and fetch, 20k
        #   records queued ahead read 1M records at 206-273k rows/s, against 177-255k with 8 MB and 200k
        client = consumer(bootstrap, **{"queued.min.messages": 20000, "max.partition.fetch.bytes": 1 << 20,
                                        "fetch.queue.backoff.ms": 10})
    try:
        yield client
    except BaseException:
        client.close()
        raise
    idle.append((client, {**seen, **topic_ids}))


def close_idle_readers(bootstrap: str) -> None:
    """Close this process's idle reading consumers of ``bootstrap`` (its broker is going away: they would
    keep trying to reconnect). Spark's Python workers close theirs when Spark ends an idle worker."""
    for client, _ in _IDLE_READERS.pop(bootstrap, []):
        client.close()


def probe(bootstrap: str):
    """A consumer of its own for ``high_watermarks``, so probing does not disturb a reading consumer. A probe
    at the end of a partition waits out the broker's fetch wait: at 1 ms rather than 10, a probe of two
    partitions took ~4 ms instead of ~23 ms against Tansu (0 gets no answer from it at all). The fetch queue's
    backoff is cut as for ``reading_consumer``: the probe is used again and again."""
    return consumer(bootstrap, **{"fetch.wait.max.ms": 1, "fetch.queue.backoff.ms": 10})


def producer(bootstrap: str, **extra):
    from confluent_kafka import Producer

    return Producer(_configured(bootstrap, {
        "enable.idempotence": True,  # per partition: in order, no duplicates from retries
        "partitioner": "murmur2_random",  # what Java clients (Kafka Streams, ksqlDB) pick for a key
        "linger.ms": 20,
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": 1_000_000,
        "log_level": 3,
    }, extra))


def admin(bootstrap: str, **extra):
    from confluent_kafka.admin import AdminClient

    return AdminClient(_configured(bootstrap, {"log_level": 3}, extra))


LOST = -1  # high_watermarks: the start offset is past the partition's end (its records are gone)


def _check(err) -> None:
    if err is not None and err.code() != _partition_eof():
        raise BrokerError(f"Kafka: {err.str()}")


def _partition_eof() -> int:
    from confluent_kafka import KafkaError

    return KafkaError._PARTITION_EOF


def _out_of_range(err) -> bool:
    from confluent_kafka import KafkaError

    return err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)


def high_watermarks(client, starts: dict[tuple[str, int], int], timeout: float = FETCH_TIMEOUT_S) -> dict:
    """The high watermark of each ``(topic, partition)``: a fetch at ``starts[tp]`` reports it (``LOST`` when
    ``starts[tp]`` is past the end: the topic was recreated or truncated). A partition is paused once its mark is
    known, so the client drops the rest of what it fetched there instead of handing it over record by record
    (a first probe at offset 0 of two partitions took 276 ms, now 45).

    Where the broker hands over neither a record nor end-of-partition (see ``SILENT_FETCH_S``), the last mark the
    client saw is taken if it lies past the start: a partition's mark never goes back, so it is a true end, though
    perhaps not the newest. That holds only within one life of a topic: a client that may have seen a deleted
    topic's marks is not to be used for the topic created again under its name."""
    from confluent_kafka import TopicPartition

    if not starts:
        return {}
    client.assign([TopicPartition(t, p, max(0, o)) for (t, p), o in starts.items()])
    pending, marks = set(starts), {}
    deadline, beyond_checked = time.monotonic() + timeout, False
    try:
        while pending:
            if time.monotonic() > deadline - timeout + SILENT_FETCH_S:
                # answers that carry a mark but no record (see SILENT_FETCH_S)
                for tp, mark in [(tp, _cached_mark(client, tp)) for tp in pending]:
                    if mark > starts[tp]:
                        pending.discard(tp)
                        marks[tp] = mark
                if not pending:
                    break
            if not beyond_checked and time.monotonic() > deadline - timeout + 1.0 and any(starts[tp] > 0 for tp in pending):
                # no answer at all: the start may lie past the end (some brokers then answer nothing)
                beyond_checked = True
                client.unassign()
                ends = high_watermarks(client, {tp: 0 for tp in pending}, timeout)
                for tp in [tp for tp in pending if ends[tp] < starts[tp]]:
                    pending.discard(tp)
                    marks[tp] = LOST
                client.assign([TopicPartition(t, p, max(0, starts[(t, p)])) for (t, p) in pending])
                continue
            if time.monotonic() > deadline:
                raise BrokerError(f"the broker did not report end offsets of {sorted(pending)} within {timeout:.0f} s")
            for msg in client.consume(len(pending), SILENT_FETCH_S):
                tp, err = (msg.topic(), msg.partition()), msg.error()
                if err is not None and _out_of_range(err):
                    pending.discard(tp)
                    marks[tp] = LOST
                    continue
                _check(err)
                if tp in pending:
                    pending.discard(tp)
                    marks[tp] = None if err is None else msg.offset()
                    client.pause([TopicPartition(*tp)])
            for tp in [tp for tp in list(marks) if marks[tp] is None]:
                marks[tp] = _cached_mark(client, tp)
    finally:
        client.resume([TopicPartition(*tp) for tp in starts])
        client.unassign()
    return marks


def _cached_mark(client, tp: tuple[str, int]) -> int:
    """The high watermark of the last fetch answer the client had for ``tp`` (negative: none yet)."""
    from confluent_kafka import TopicPartition

    return client.get_watermark_offsets(TopicPartition(*tp), cached=True)[1]


def fetch_ranges(client, ranges: dict[tuple[str, int], tuple[int, int]], *, with_order: bool = True,
                 with_headers: bool = False, timeout: float = FETCH_TIMEOUT_S) -> dict[tuple[str, int], pa.Table]:
    """Records of each ``(topic, partition)`` with ``start <= offset < end``, in offset order; with
    ``with_order``, the ``ORDER_HEADER`` of each (else null); with ``with_headers``, their own headers
    (else null)."""
    from confluent_kafka import TopicPartition

    wanted = {tp: r for tp, r in ranges.items() if r[1] > r[0]}
    fetched = {tp: _Fetched(tp[1], start, end, with_headers) for tp, (start, end) in wanted.items()}
    if wanted:
        client.assign([TopicPartition(t, p, start) for (t, p), (start, _) in wanted.items()])
    pending = dict(fetched)  # the partitions still short of their end
    deadline = time.monotonic() + timeout
    only = next(iter(wanted)) if len(wanted) == 1 else None  # one partition: no need to ask each record
    # one partition and no headers wanted: records are taken a consumed list at a time (``take_plain``)
    plain = fetched[only] if only is not None and not (with_order or with_headers) else None
    try:
        while pending:
            # consume() waits until it has this many events or the timeout: ask for what is still due
            due = sum(f.end - f.start - len(f.offsets) for f in pending.values())
            messages = client.consume(max(1, min(10000, due)), 0.5)
            if not messages and time.monotonic() > deadline:
                raise BrokerError(f"the broker returned no records of {sorted(pending)} within {timeout:.0f} s")
            if plain is not None and only in pending and plain.take_plain(messages):
                if plain.done:
                    del pending[only]
            else:
                _take_each(messages, pending, only, with_order, with_headers)
            if messages:
                deadline = time.monotonic() + timeout
    finally:
        if wanted:
            client.unassign()
    return {tp: f.table() for tp, f in fetched.items()}


def _take_each(messages: list, pending: dict, only, with_order: bool, with_headers: bool) -> None:
    """Take consumed records one by one into their partition's ``_Fetched`` (``only``: the one partition);
    a partition leaves ``pending`` once it reaches its end."""
    for msg in messages:
        tp = only or (msg.topic(), msg.partition())
        into = pending.get(tp)
        if into is None:
            continue
        offset = msg.offset()
        if msg.error() is not None:
            _check(msg.error())
            if offset < into.end:  # end of partition before the planned end: the records are gone
                raise BrokerError(f"{tp[0]}[{tp[1]}] ends at offset {offset}, before {into.end}")
            del pending[tp]
            continue
        if offset >= into.end:
            del pending[tp]
            continue
        stamp = msg.timestamp()[1]
        into.offsets.append(offset)
        into.keys.append(msg.key())
        into.values.append(msg.value())
        into.stamps.append(stamp)
        if with_order or with_headers or stamp == 1:  # a call per record: only when they matter
            into.add_headers(msg.headers() or (), with_headers)
        if offset >= into.end - 1:
            del pending[tp]


class _Fetched:
    """The records of one partition fetched so far, column by column, from offset ``start`` up to ``end``."""

    def __init__(self, partition: int, start: int, end: int, with_headers: bool):
        self.partition, self.start, self.end = partition, start, end
        self.offsets, self.stamps, self.keys, self.values = [], [], [], []
        self.orders: list[tuple[int, Optional[int]]] = []  # (position, ORDER_HEADER), where read
        self.headers: Optional[list] = [] if with_headers else None
        self.done = False  # set by ``take_plain``: the partition's records are all taken

    def take_plain(self, messages: list) -> bool:
        """Take a consumed list of this partition's records column by column (a C call per column, not a
        Python step per record), up to ``end``. False, taking nothing, if one of them needs a look at its
        headers (a zero time) or is an event (end of partition, an error)."""
        from confluent_kafka import Message

        errors = list(map(Message.error, messages))
        if errors.count(None) != len(errors):
            return False
        stamps = [stamp for _, stamp in map(Message.timestamp, messages)]
        if 1 in stamps:  # perhaps a zero time (ZERO_TIME_HEADER)
            return False
        offsets = list(map(Message.offset, messages))
        taken = bisect.bisect_left(offsets, self.end)
        self.done = taken < len(offsets) or (bool(offsets) and offsets[-1] >= self.end - 1)
        if taken < len(offsets):
            messages, offsets, stamps = messages[:taken], offsets[:taken], stamps[:taken]
        self.offsets += offsets
        self.stamps += stamps
        self.keys += map(Message.key, messages)
        self.values += map(Message.value, messages)
        return True

    def add_headers(self, headers, own: bool) -> None:
        """Read the last record's headers: its order, a zero time, and (with ``own``) the record's own."""
        order, zero_time = _read_headers(headers)
        self.orders.append((len(self.offsets) - 1, order))
        if zero_time:
            self.stamps[-1] = 0
        if own:
            self.headers.append([{"key": k, "value": v} for k, v in headers if not k.startswith(INTERNAL_HEADER_PREFIX)])

    def table(self) -> pa.Table:
        n = len(self.offsets)
        if self.orders:
            orders = [None] * n
            for position, order in self.orders:
                orders[position] = order
            orders = pa.array(orders, pa.int64())
        else:
            orders = pa.nulls(n, pa.int64())
        headers = pa.nulls(n, HEADERS_TYPE) if self.headers is None else pa.array(self.headers, HEADERS_TYPE)
        return pa.table(
            [pa.array(np.full(n, self.partition, np.int32)), pa.array(self.offsets, pa.int64()),
             pa.array(self.stamps, pa.int64()), pa.array(self.keys, pa.binary()), pa.array(self.values, pa.binary()),
             orders, headers],
            schema=FETCHED_SCHEMA,
        )


def _read_headers(headers) -> tuple[Optional[int], bool]:
    order, zero_time = None, False
    for name, value in headers:
        if name == ORDER_HEADER and value is not None:
            try:
                order = int(value)
            except ValueError:
                pass
        elif name == ZERO_TIME_HEADER:
            zero_time = True
    return order, zero_time


def stamp_headers(timestamp: int, headers: list) -> tuple[int, list]:
    """The timestamp and headers to produce a record with (a 0 is sent as 1 plus ``ZERO_TIME_HEADER``)."""
    if timestamp == 0:
        return 1, headers + [(ZERO_TIME_HEADER, b"")]
    return timestamp, headers


class KafkaTopics:
    """Topics on a broker, with the embedded store's interface (see the module docstring)."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self._errors: list = []  # what the admin client reported on its own (a failed login, a TLS handshake)
        self._admin = admin(bootstrap, error_cb=self._errors.append)
        self._consumer = None
        self._probe = None
        self._sequence = 0

    def _client(self):
        if self._consumer is None:
            self._consumer = consumer(self.bootstrap)
        return self._consumer

    def _metadata(self, topic: Optional[str] = None):
        try:
            return self._admin.list_topics(topic=topic, timeout=10)
        except Exception as err:  # noqa: BLE001 - confluent raises KafkaException
            self._errors.clear()
            self._admin.poll(0.5)  # the client's own reports say why: a refused login is only "transport failure" here
            refused = [e.str() for e in self._errors if e.name() in ("_AUTHENTICATION", "_SSL")]
            if refused:
                raise BrokerError(f"the Kafka broker at {self.bootstrap} refused the connection: {refused[0]} (see the "
                                  "client properties: security.protocol, sasl.*, ssl.*)") from None
            raise BrokerError(f"cannot reach the Kafka broker at {self.bootstrap}: {err}") from None

    def topics(self) -> list[str]:
        return sorted(t for t in self._metadata().topics if not t.startswith("__"))

    def exists(self, topic: str) -> bool:
        meta = self._metadata().topics.get(topic)
        return meta is not None and meta.error is None and bool(meta.partitions)

    def partitions(self, topic: str) -> int:
        meta = self._metadata().topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise BrokerError(f"topic {topic} does not exist on {self.bootstrap}")
        return len(meta.partitions)

    def create(self, topic: str, partitions: int = 1) -> None:
        """Create a topic if it does not exist (an existing topic keeps its partition count)."""
        from confluent_kafka import KafkaError
        from confluent_kafka.admin import NewTopic

        if self.exists(topic):
            return
        future = self._admin.create_topics([NewTopic(topic, max(1, int(partitions)), 1)])[topic]
        try:
            future.result(10)
        except Exception as err:  # noqa: BLE001
            code = err.args[0].code() if err.args and hasattr(err.args[0], "code") else None
            if code != KafkaError.TOPIC_ALREADY_EXISTS:
                raise BrokerError(f"cannot create topic {topic}: {err}") from None
        deadline = time.monotonic() + 10
        while not self.exists(topic) and time.monotonic() < deadline:
            time.sleep(0.05)

    def delete(self, topic: str) -> None:
        if self._probe is not None:  # its marks of this topic's old life must not answer for the new one
            self._probe.close()
            self._probe = None
        if self.exists(topic):
            self._admin.delete_topics([topic])[topic].result(10)

    def append(self, batches: Sequence[tuple[str, Sequence[Record]]], partitions: int = 1, **_ignored) -> bool:
        """Produce records in the order given; each carries the next producer sequence (``ORDER_HEADER``)."""
        out = producer(self.bootstrap)
        failures: list[str] = []

        def delivered(err, _msg):
            if err is not None:
                failures.append(err.str())

        for topic, records in batches:
            self.create(topic, partitions)
            for rec in records:
                self._sequence += 1
                extra = {"partition": rec.partition} if rec.partition >= 0 else {}
                stamp, headers = stamp_headers(int(rec.timestamp),
                                               list(rec.headers) + [(ORDER_HEADER, str(self._sequence).encode())])
                out.produce(topic, key=rec.key, value=rec.value, timestamp=stamp, headers=headers,
                            on_delivery=delivered, **extra)
                out.poll(0)
        if out.flush(60) or failures:
            raise BrokerError(f"records not delivered: {failures[:3] or 'flush timed out'}")
        return True

    def end_offsets(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        starts = {(t, p): 0 for t in topics for p in range(self.partitions(t))}
        if self._probe is None:
            self._probe = probe(self.bootstrap)
        return high_watermarks(self._probe, starts)

    def committed_seq(self) -> int:
        """The number of offsets on the broker: it grows whenever anything is written."""
        return sum(self.end_offsets(self.topics()).values())

    def read_table(self, topic: str) -> pa.Table:
        """Every record of ``topic``, partition after partition, as the store's record schema."""
        ends = self.end_offsets([topic])
        fetched = fetch_ranges(self._client(), {tp: (0, end) for tp, end in ends.items()}, with_headers=True)
        parts = [fetched[tp] for tp in sorted(fetched)]
        table = pa.concat_tables(parts) if parts else FETCHED_SCHEMA.empty_table()
        seq = pa.array(np.arange(1, table.num_rows + 1, dtype=np.int64))
        return pa.table([seq] + [table.column(n) for n in RECORD_SCHEMA.names[1:]], schema=RECORD_SCHEMA)

    def records(self, topic: str) -> list[Record]:
        return records_of(self.read_table(topic))

    def first_records(self, topic: str, n: int) -> list[Record]:
        """Up to ``n`` of ``topic``'s first records, partition after partition."""
        ends = self.end_offsets([topic])
        fetched = fetch_ranges(self._client(), {tp: (0, min(end, n)) for tp, end in ends.items()}, with_headers=True)
        table = pa.concat_tables([fetched[tp] for tp in sorted(fetched)]) if fetched else FETCHED_SCHEMA.empty_table()
        return [Record(r["key"], r["value"], r["timestamp"]) for r in table.slice(0, n).to_pylist()]

    def close(self) -> None:
        for client in (self._consumer, self._probe):
            if client is not None:
                client.close()
        self._consumer = self._probe = None
