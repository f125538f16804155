"""Spark streaming source over Kafka topics (Python Data Source API, confluent-kafka client).

``spark.readStream.format("streamjoin_kafka").option("bootstrap", "host:port").option("topics", "a,b")``
yields the same rows as the embedded source (``embedded_source.SOURCE_SCHEMA``): ``topic, partition,
offset, timestamp, seq, key, value, stream_time, headers``, plus the tick rows, so everything downstream is
the same (with ``decode``, the decoded JSON columns too: ``connectors.json_decode``). ``headers`` (the
record's own, without those streamjoin adds) is read only with the ``headers`` option, as asking a
record for its headers costs a call per record.

**Ingestion order** (DIALECT §2). Within a partition, offset order. Across the query's partitions, a
merge of their heads: the head with the smallest *order value* goes first, ties by topic (in the order
given), partition, offset. The order value is the record timestamp (``order`` = ``timestamp``, the default,
as Kafka Streams does) or the producer sequence in the ``streamjoin.seq`` header (``order`` = ``produced``:
the conformance runner's input order; a record without the header goes after every one with it). A
head merge equals a sort by ``(running maximum of the order value within the partition, topic,
partition, offset)``, so one micro-batch is computed in one vectorised sort; each partition's running
maximum is kept in the offset, so the merge goes on exactly across batches and restarts, and a prefix
of it — ``maxRecordsPerBatch`` — gives the same order as all of it. ``seq`` counts records in that order.

With ``ordered`` = ``true`` (queries with joins or aggregates) a micro-batch is read and merged in one
task, and the driver reads it first to find the cut and the clock's end state (as the embedded source
does). Otherwise each partition is read by its own task, in parallel, and ``seq`` is the record's offset:
output keeps each input partition's order, which is all Kafka itself promises.

**Offsets** (checkpointed by Spark): per topic and partition ``[next offset, running maximum]``, the
topic's id, the record count, the clock state and null-value counts. A partition whose checkpointed
offset the broker no longer has, or a topic whose id changed (recreated), stops the query with an error
naming it; with ``failOnDataLoss`` = ``false`` the partition is read again from its earliest offset.
"""
from __future__ import annotations

import json
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from pyspark.sql.types import StructType

from .embedded_source import (
    ARROW_SCHEMA, TOPIC_TIMES_TYPE, clock_columns, clock_state, clock_steps, count_null_values, reader_clock, source_schema,
    tick_rows, topic_column,
)
from .event_time import NO_TIME, Clock
from .json_decode import decode_plan, with_decoded
from .kafka_client import (FETCHED_SCHEMA, LOST, BrokerError, admin, consumer, fetch_ranges, high_watermarks, probe,
                           reading_consumer, use_client_properties)

SOURCE_NAME = "streamjoin_kafka"
NO_KEY = int(np.iinfo(np.int64).min)
LAST = int(np.iinfo(np.int64).max)
ORDERED_BATCH = 200_000  # default cap of an ordered micro-batch


class DataLossError(BrokerError):
    """Records the checkpoint expected are gone from the broker."""


class _Ranges(InputPartition):
    """``ranges``: ``(topic, partition) -> (first offset, end offset)``; ``state``: the batch's start offset;
    ``topic_ids``: topic name -> id."""

    def __init__(self, ranges: dict, state: Optional[dict], topic_ids: dict):
        super().__init__(sorted(ranges.items()))
        self.ranges, self.state, self.topic_ids = ranges, state, topic_ids


def _tp_key(tp: tuple[str, int]) -> str:
    return f"{tp[0]}/{tp[1]}"


def tp_of(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition("/")
    return topic, int(partition)


CLIENT_OPTION = "kafkaSecretProperties"  # the client properties (JSON); Spark shows an option named so as *** in plans


class KafkaTopicReader(DataSourceStreamReader):
    def __init__(self, options: dict):
        self.bootstrap = options["bootstrap"]
        self.client_properties = json.loads(options.get(CLIENT_OPTION.lower()) or "{}")
        use_client_properties(self.bootstrap, self.client_properties)  # this process's clients: the driver's side
        self.topics = [t for t in options["topics"].split(",") if t]
        self.topic_index = {t: i for i, t in enumerate(self.topics)}
        self.max_records = int(options.get("maxrecordsperbatch", "0") or 0)
        self.starting = options.get("startingoffsets", "earliest").lower()
        self.by_header = options.get("order", "timestamp").lower() == "produced"
        self.headers = options.get("headers", "false").lower() == "true"  # read each record's headers
        self.ordered = options.get("ordered", "true").lower() == "true"
        self.fail_on_loss = options.get("failondataloss", "true").lower() != "false"
        self.clock: Optional[Clock] = reader_clock(options)
        self.ticks = int(options.get("ticks", "0") or 0)
        self.clock_steps = int(options.get("clocksteps", "0") or 0)
        # records with a null value, per topic, kept in the offset (``runtime.metrics``); a clock counts them too
        self.count_nulls = options.get("countnullvalues", "false").lower() == "true" or self.clock is not None
        self.decode = decode_plan(options.get("decode"))
        self._client = None
        self._probe = None
        self._known_ends: dict = {}
        self._admin = None

    # ------------------------------------------------------------------ driver

    def _consumer(self):
        if self._client is None:
            self._client = consumer(self.bootstrap)
        return self._client

    def _prober(self):
        if self._probe is None:
            self._probe = probe(self.bootstrap)
        return self._probe

    def _layout(self) -> tuple[list[tuple[str, int]], dict]:
        from confluent_kafka import TopicCollection

        if self._admin is None:
            self._admin = admin(self.bootstrap)
        client = self._admin
        meta = client.list_topics(timeout=10).topics
        missing = [t for t in self.topics if t not in meta or not meta[t].partitions]
        if missing:
            raise BrokerError(f"topic {', '.join(missing)} does not exist on {self.bootstrap}")
        ids = {}
        for topic, future in client.describe_topics(TopicCollection(self.topics)).items():
            ids[topic] = str(future.result(10).topic_id)
        return [(t, p) for t in self.topics for p in sorted(meta[t].partitions)], ids

    def initialOffset(self) -> dict:
        from confluent_kafka import TopicPartition

        tps, ids = self._layout()
        client = self._consumer()
        lows = {tp: client.get_watermark_offsets(TopicPartition(*tp), timeout=10)[0] for tp in tps}
        starts = high_watermarks(self._prober(), lows) if self.starting == "latest" else lows
        offset = {"partitions": {_tp_key(tp): [int(starts[tp]), NO_KEY] for tp in tps}, "topicIds": ids, "count": 0}
        if self.clock is not None:
            offset["streamTime"] = None
        if self.count_nulls:
            offset["nullValues"] = {}
        return offset

    def getDefaultReadLimit(self):
        # an ordered batch is read by the driver too: a backlog is taken ORDERED_BATCH records at a time
        limit = self.max_records or (ORDERED_BATCH if self.ordered else 0)
        return ReadMaxRows(limit) if limit > 0 else ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        nexts = {tp_of(k): v[0] for k, v in start["partitions"].items()}
        ends, ids = self._ends(start, nexts)
        restarts = {tp: ends.pop(tp + ("from",)) for tp in list(nexts) if tp + ("from",) in ends}
        firsts = {tp: restarts.get(tp, nexts[tp]) for tp in nexts}
        if all(ends[tp] <= firsts[tp] for tp in nexts) and not restarts:
            return start
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = {**start, "partitions": dict(start["partitions"]), "topicIds": ids}
        if not self.ordered:
            counts = _share(cap, {tp: max(0, ends[tp] - firsts[tp]) for tp in nexts})
            for tp in nexts:
                end["partitions"][_tp_key(tp)] = [firsts[tp] + counts[tp], NO_KEY] + ([firsts[tp]] if tp in restarts else [])
            return end
        ranges = {tp: (firsts[tp], ends[tp] if cap is None else min(ends[tp], firsts[tp] + cap)) for tp in nexts}
        batch, last = self._merged(fetch_ranges(self._consumer(), ranges, with_order=self.by_header), start, cap)
        for tp in nexts:
            offset, running = last.get(tp, (firsts[tp] - 1, start["partitions"][_tp_key(tp)][1]))
            end["partitions"][_tp_key(tp)] = [offset + 1, running] + ([firsts[tp]] if tp in restarts else [])
        end["count"] = start["count"] + batch.num_rows
        if self.clock is not None:
            _, ended = self.clock.run(batch if batch.num_rows else None, clock_state(start))
            end.update(ended)
        if self.count_nulls:
            end["nullValues"] = count_null_values(batch, start.get("nullValues") or {})
        return end

    def _ends(self, start: dict, nexts: dict) -> tuple[dict, dict]:
        """High watermarks, checked against the checkpoint; a lost partition to re-read is ``(t, p, "from")``."""
        tps, ids = self._layout()
        if set(tps) != set(nexts):
            raise DataLossError(f"the partitions of {', '.join(self.topics)} changed: the checkpoint has "
                                f"{sorted(nexts)}, the broker {sorted(tps)}")
        recreated = {tp for tp in nexts if ids[tp[0]] != start.get("topicIds", {}).get(tp[0], ids[tp[0]])}
        ends = self._high_watermarks({tp: o for tp, o in nexts.items() if tp not in recreated})
        lost = [tp for tp in nexts if tp in recreated or ends[tp] == LOST]
        if lost and self.fail_on_loss:
            raise DataLossError(
                f"records the checkpoint expected are gone from {', '.join(f'{t}[{p}]' for t, p in lost)} (the topic "
                f"was deleted, recreated or truncated); set 'failOnDataLoss'='false' to read it again from its start"
            )
        for tp in lost:
            from confluent_kafka import TopicPartition

            low = self._consumer().get_watermark_offsets(TopicPartition(*tp), timeout=10)[0]
            ends[tp + ("from",)] = low
            fresh = probe(self.bootstrap)  # the kept probe may hold marks of the topic's earlier life
            try:
                ends[tp] = high_watermarks(fresh, {tp: low})[tp]
            finally:
                fresh.close()
        return ends, ids

    def _high_watermarks(self, nexts: dict) -> dict:
        """End offsets, probed at the end seen last time (a fetch there returns only new records, if any);
        where that is past the end, probed again at the checkpointed offset."""
        froms = {tp: max(o, self._known_ends.get(tp, 0)) for tp, o in nexts.items()}
        ends = high_watermarks(self._prober(), froms)
        again = {tp: nexts[tp] for tp, end in ends.items() if end == LOST and froms[tp] > nexts[tp]}
        if again:
            ends.update(high_watermarks(self._prober(), again))
        self._known_ends.update({tp: end for tp, end in ends.items() if end != LOST})
        return ends

    def _merged(self, fetched: dict, start: dict, cap: Optional[int]) -> tuple[pa.Table, dict]:
        """The first ``cap`` records in ingestion order, and each partition's last offset and running
        maximum among them (both only grow along a partition, so they are its maxima)."""
        keys = {tp_of(k): v[1] for k, v in start["partitions"].items()}
        batch, _ = merge(fetched, keys, self.topic_index, by_header=self.by_header)
        if cap is not None and batch.num_rows > cap:
            batch = batch.slice(0, cap)
        last = {}
        if batch.num_rows:
            ends = batch.group_by(["topic", "partition"]).aggregate([("offset", "max"), ("order_key", "max")])
            columns = (ends.column(c).to_pylist() for c in ("topic", "partition", "offset_max", "order_key_max"))
            last = {(t, p): (o, k) for t, p, o, k in zip(*columns)}
        return batch.drop_columns(["order_key"]), last

    def partitions(self, start: dict, end: dict):
        ranges = {}
        for key, (upto, _, *restart) in end["partitions"].items():
            first = restart[0] if restart else start["partitions"][key][0]
            if upto > first:
                ranges[tp_of(key)] = (first, upto)
        if not ranges:
            return []
        ids = end.get("topicIds", {})
        if self.ordered:
            return [_Ranges(ranges, start, ids)]
        return [_Ranges({tp: r}, None, {tp[0]: ids.get(tp[0])}) for tp, r in ranges.items()]

    # ------------------------------------------------------------------ worker

    def read(self, partition: _Ranges) -> Iterator[pa.RecordBatch]:
        use_client_properties(self.bootstrap, self.client_properties)  # a worker's process
        with reading_consumer(self.bootstrap, partition.topic_ids) as client:
            fetched = fetch_ranges(client, partition.ranges, with_order=self.ordered and self.by_header,
                                   with_headers=self.headers)
        if not self.ordered:
            for (topic, _), table in fetched.items():
                yield from _rows(table, topic, table.column("offset"), pa.nulls(table.num_rows, pa.int64()), self.decode)
            return
        state = partition.state
        batch, _ = merge(fetched, {tp_of(k): v[1] for k, v in state["partitions"].items()}, self.topic_index,
                         by_header=self.by_header)
        seq = pa.array(np.arange(state["count"] + 1, state["count"] + 1 + batch.num_rows, dtype=np.int64))
        if self.clock is not None:
            clock, _ = self.clock.run(batch, clock_state(state))
            times, stream_time, topic_times = clock_columns(clock)
        else:
            stream_time, topic_times = pa.nulls(batch.num_rows, pa.int64()), None
        yield from _rows(batch, batch.column("topic"), seq, stream_time, self.decode, topic_times)
        if self.ticks and self.clock is not None and batch.num_rows:
            known = times[times != NO_TIME]
            first = int(known[0]) if len(known) else None
            ticks = tick_rows(self.ticks, state["count"] + batch.num_rows, stream_time[-1].as_py(), first,
                              topic_times[-1].as_py() if topic_times is not None else None,
                              clock_steps(stream_time, self.clock_steps) if self.clock_steps else None)
            yield from with_decoded(ticks, self.decode)

    def commit(self, end: dict) -> None:
        pass

    def stop(self) -> None:
        for client in (self._client, self._probe):
            if client is not None:
                client.close()
        self._client = self._probe = self._admin = None


def _share(cap: Optional[int], available: dict) -> dict:
    """How many records each partition gives a batch of at most ``cap``: equal shares, and what a
    partition cannot use goes to the others (so partitions are read in parallel)."""
    if cap is None or sum(available.values()) <= cap:
        return dict(available)
    counts, left, open_ = {tp: 0 for tp in available}, cap, [tp for tp in available if available[tp]]
    while left > 0 and open_:
        share = max(1, left // len(open_))
        for tp in list(open_):
            take = min(share, available[tp] - counts[tp], left)
            counts[tp] += take
            left -= take
            if counts[tp] == available[tp]:
                open_.remove(tp)
            if left == 0:
                break
    return counts


def merge(fetched: dict, keys: dict, topic_index: dict, *, by_header: bool) -> tuple[pa.Table, dict]:
    """The records of every partition in ingestion order (module docstring), with a ``topic`` and an
    ``order_key`` column, and each partition's running maximum after them."""
    parts, new_keys = [], {}
    for (topic, partition), table in fetched.items():
        if not table.num_rows:
            continue
        if by_header:
            values = pc.fill_null(table.column("order"), LAST).to_numpy().astype(np.int64)
        else:
            values = table.column("timestamp").to_numpy(zero_copy_only=False).astype(np.int64)
        running = np.maximum.accumulate(np.maximum(values, keys.get((topic, partition), NO_KEY)))
        new_keys[(topic, partition)] = int(running[-1])
        parts.append(table.drop_columns(["order"])
                     .append_column("topic", topic_column(topic, table.num_rows))
                     .append_column("topic_index", pa.array(np.full(table.num_rows, topic_index[topic], np.int32)))
                     .append_column("order_key", pa.array(running)))
    if not parts:
        fields = [f for f in FETCHED_SCHEMA if f.name != "order"] + [("topic", pa.string()), ("order_key", pa.int64())]
        return pa.schema(fields).empty_table(), new_keys
    table = pa.concat_tables(parts)
    table = table.sort_by([("order_key", "ascending"), ("topic_index", "ascending"),
                           ("partition", "ascending"), ("offset", "ascending")])
    return table.drop_columns(["topic_index"]), new_keys


def _rows(table: pa.Table, topic, seq, stream_time, decode, topic_times=None) -> Iterator[pa.RecordBatch]:
    if not table.num_rows:
        return
    if isinstance(topic, str):
        topic = topic_column(topic, table.num_rows)
    if topic_times is None:
        topic_times = pa.nulls(table.num_rows, TOPIC_TIMES_TYPE)
    out = pa.table(
        [topic] + [table.column(n) for n in ("partition", "offset", "timestamp")] + [seq]
        + [table.column("key"), table.column("value"), stream_time, table.column("headers"), topic_times,
           pa.nulls(table.num_rows, TOPIC_TIMES_TYPE)],
        schema=ARROW_SCHEMA,
    )
    yield from with_decoded(out, decode)


class KafkaTopicSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return source_schema(self.options.get("decode"))

    def streamReader(self, schema: StructType) -> KafkaTopicReader:
        return KafkaTopicReader(dict(self.options))
