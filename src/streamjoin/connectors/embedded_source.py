"""Spark streaming source over the embedded topic store (Python Data Source API).

``spark.readStream.format("streamjoin_topics").option("root", DIR).option("topics", "a,b")`` yields one
row per record of the named topics: ``topic, partition, offset, timestamp, seq, key, value``. The offset
of the source is the store's global sequence, so one micro-batch covers a contiguous slice of the
store's ingestion order across all its topics. ``maxRecordsPerBatch`` caps a batch at N records (the
conformance runner's ``--records-per-batch``); ``startingOffsets`` is ``earliest`` (default) or
``latest``. Workers read the segment files directly, so ``root`` must be visible to every executor.
"""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from .topic_store import TopicStore

SOURCE_NAME = "streamjoin_topics"

SOURCE_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", LongType()),
        StructField("seq", LongType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
    ]
)

_ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("seq", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
    ]
)


class _TopicSlice(InputPartition):
    def __init__(self, root: str, topic: str, after_seq: int, upto_seq: int):
        super().__init__((topic, after_seq, upto_seq))
        self.root, self.topic, self.after_seq, self.upto_seq = root, topic, after_seq, upto_seq


class EmbeddedTopicReader(DataSourceStreamReader):
    def __init__(self, options: dict):
        self.root = options["root"]
        self.topics = [t for t in options["topics"].split(",") if t]
        self.max_records = int(options.get("maxrecordsperbatch", "0") or 0)
        self.starting = options.get("startingoffsets", "earliest").lower()

    def _store(self) -> TopicStore:
        return TopicStore(self.root)

    def initialOffset(self) -> dict:
        if self.starting == "latest":
            return {"seq": self._store().committed_seq()}
        return {"seq": 0}

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.max_records) if self.max_records > 0 else ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        store = self._store()
        committed = store.committed_seq()
        after = start["seq"]
        if isinstance(limit, ReadMaxRows) and committed > after:
            return {"seq": store.seq_after(self.topics, after, limit.max_rows, committed)}
        return {"seq": committed}

    def reportLatestOffset(self) -> dict:
        return {"seq": self._store().committed_seq()}

    def partitions(self, start: dict, end: dict):
        if end["seq"] <= start["seq"]:
            return []
        return [_TopicSlice(self.root, t, start["seq"], end["seq"]) for t in self.topics]

    def read(self, partition: _TopicSlice) -> Iterator[pa.RecordBatch]:
        table = TopicStore(partition.root).read_table(partition.topic, partition.after_seq, partition.upto_seq)
        if table.num_rows == 0:
            return
        topic = pa.array([partition.topic] * table.num_rows, pa.string())
        out = pa.table(
            [topic] + [table.column(n) for n in ("partition", "offset", "timestamp", "seq", "key", "value")],
            schema=_ARROW_SCHEMA,
        )
        yield from out.to_batches()

    def commit(self, end: dict) -> None:
        pass


class EmbeddedTopicSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def streamReader(self, schema: StructType) -> EmbeddedTopicReader:
        return EmbeddedTopicReader(dict(self.options))
