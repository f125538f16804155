"""Reading a whole topic (embedded store or broker) as a (batch) Spark DataFrame of decoded rows."""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..plan.catalog import SourceInfo
from .json_format import JSON_READ_OPTIONS


def read_topic_batch(spark: SparkSession, store, info: SourceInfo) -> DataFrame:
    """Every record of ``info``'s topic in ``store`` (a ``TopicStore`` or ``KafkaTopics``): its key (as text),
    its value columns, ROWTIME, in the store's order."""
    table = store.read_table(info.topic)
    df = spark.createDataFrame(table.to_pandas()) if table.num_rows else None
    schema = ", ".join(f"`{c.name}` {c.type}" for c in info.columns if c.origin == "value") or "`__none` string"
    if df is None:
        return spark.createDataFrame([], f"ROWKEY string, {schema}, ROWTIME bigint")
    parsed = F.from_json(F.col("value").cast("string"), schema, JSON_READ_OPTIONS)
    return df.orderBy("seq").select(
        F.col("key").cast("string").alias("ROWKEY"), parsed.alias("v"), F.col("timestamp").alias("ROWTIME")
    ).select("ROWKEY", "v.*", "ROWTIME")
