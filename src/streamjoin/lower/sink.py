"""Encoding a query's result into topic records: key, value (JSON), timestamp, ingestion order."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..errors import NotYetSupported
from ..plan.nodes import ROWTIME, SEQ, SUB, TOMBSTONE, Sink

TO_JSON = {"ignoreNullFields": "false", "timestampFormat": "yyyy-MM-dd HH:mm:ss.SSS"}


def encode(sink: Sink, df: DataFrame) -> DataFrame:
    """``key, value, timestamp, seq, sub`` rows for the sink's topic."""
    target = sink.target
    if target.value_format != "JSON":
        raise NotYetSupported(f"value format {target.value_format} for a sink", issue=7)
    node = sink.input
    value = F.to_json(F.struct(*[F.col(fid).alias(node.field(fid).name) for fid in sink.value_fields]), TO_JSON)
    if TOMBSTONE in df.columns:
        value = F.when(F.col(TOMBSTONE), F.lit(None)).otherwise(value)
    return df.select(
        _key(sink, target.key_format).alias("key"),
        value.cast("binary").alias("value"),
        F.col(ROWTIME).cast("bigint").alias("timestamp"),
        F.col(SEQ).alias("seq"),
        F.col(SUB).alias("sub"),
    )


def _key(sink: Sink, key_format: str) -> Column:
    node = sink.input
    keys = list(sink.key)
    if not keys:
        return F.lit(None).cast("binary")
    if len(keys) == 1 and key_format == "KAFKA":
        return F.col(keys[0]).cast("string").cast("binary")
    return F.to_json(F.struct(*[F.col(k).alias(node.field(k).name) for k in keys]), TO_JSON).cast("binary")
