"""Settings a script chooses with ``SET name = value``: the one list of those streamjoin reads, what each
means here, and those of the four systems it accepts and ignores. A bad value of a setting it reads is refused
when the SET statement is planned, before any query starts; EXPLAIN says what every SET of a script does
(``setting_notes``).
"""
from __future__ import annotations

import re
from typing import Iterable, Optional

from ..connectors.kafka_client import OWNED, client_properties, masked

TRIGGER_INTERVAL = "streamjoin.trigger.interval"  # how often a query starts a micro-batch (like commit.interval.ms)
COMMIT_INTERVAL = "commit.interval.ms"  # ksqlDB's and Lenses' own setting: the same cadence, in ms
REMATCH_RETENTION = "streamjoin.lenses.rematch.retention"  # how long a Lenses padded record waits for its table row
BUCKETS = "streamjoin.buckets"  # how many hash buckets a query's operator state is split into
INGESTION_ORDER = "streamjoin.ingestion.order"  # Kafka: merge partitions by 'timestamp' (default) or 'produced'
DATA_LOSS = "failOnDataLoss"  # 'false': a Kafka partition whose checkpointed records are gone is read again
OFFSET_RESET = "auto.offset.reset"  # where a query without a checkpoint starts: 'earliest' (default) or 'latest'
STATE_TTL = "table.exec.state.ttl"  # Flink: how long a regular join keeps an idle key's rows
DEFAULT_KEY_FORMAT = "ksql.persistence.default.format.key"  # ksqlDB: the key format of a keyed result over a NONE key
DEFAULT_VALUE_FORMAT = "ksql.persistence.default.format.value"  # ksqlDB: the value format of a declaration naming none
WRAP_SINGLE_VALUES = "ksql.persistence.wrap.single.values"  # ksqlDB: WRAP_SINGLE_VALUE of those that name none
WRAPPABLE = ("JSON", "JSON_SR", "AVRO")  # the value formats whose single value may be wrapped or not
OUTPUT_TOPIC_PREFIX = "ksql.output.topic.name.prefix"  # ksqlDB: put before the topic name a result is given by default
RESULT_MODE = "sql-client.execution.result-mode"  # Flink's SQL client: how a bare SELECT shows its rows
RESULT_MODES = ("tableau", "changelog", "table")
BOOTSTRAP = "bootstrap.servers"  # the Kafka broker a script's topics are on (``connectors.kafka_client``)
COLLECT_LIMITS = {"COLLECT_LIST": "ksql.functions.collect_list.limit",  # ksqlDB: at most this many values collected
                  "COLLECT_SET": "ksql.functions.collect_set.limit"}
SINK_PARTITIONS = ("defaults.topic.partitions", "partitions")  # Lenses (4.x+, 2.x): partitions of a topic it creates
KAFKA_CLIENT = "kafka."  # SET 'kafka.<client property>': a property every Kafka client of the script takes
TABLE_CLIENT = "properties."  # a Flink Kafka table's 'properties.<client property>' option: the same

READ = {  # what each setting streamjoin reads does here
    TRIGGER_INTERVAL: "the micro-batch cadence",
    COMMIT_INTERVAL: "the micro-batch cadence (ms)",
    REMATCH_RETENTION: "how long a Lenses LEFT join's padded record waits for its table row",
    BUCKETS: "the number of hash buckets operator state is split into (kept in each query's checkpoint)",
    INGESTION_ORDER: "how a Kafka source merges its partitions: by record timestamp or produce order",
    DATA_LOSS: "whether a Kafka query stops when records its checkpoint expects were deleted",
    OFFSET_RESET: "where a query without a checkpoint starts reading its inputs: earliest or latest",
    STATE_TTL: "how long a Flink regular join keeps the rows of a key with no change",
    DEFAULT_KEY_FORMAT: "the key format of a result with key columns whose source's key format is NONE",
    DEFAULT_VALUE_FORMAT: "the value format of a ksqlDB CREATE STREAM or TABLE that names none",
    WRAP_SINGLE_VALUES: "whether a ksqlDB stream or table of one value column that names no WRAP_SINGLE_VALUE wraps it",
    OUTPUT_TOPIC_PREFIX: "what the topic of a ksqlDB result without KAFKA_TOPIC is prefixed with",
    RESULT_MODE: "how a bare SELECT shows its rows: tableau, changelog or table",
    "streamjoin.dead.letter.topic": "the topic records that cannot be decoded are written to",
    "streamjoin.late.topic": "the topic records a query drops as late or for a null key are written to",
    BOOTSTRAP: "the Kafka broker the script's topics are on",
    **{name: f"how many values {fn} keeps (later ones are left out); negative: no limit"
       for fn, name in COLLECT_LIMITS.items()},
    **{name: "the partition count of a topic an INSERT INTO creates" for name in SINK_PARTITIONS},
}

IGNORED = (  # (name, or prefix ending in '.'; why it changes nothing here)
    ("defaults.topic.autocreate", "a topic an INSERT INTO writes is always created when missing"),
    ("autocreate", "a topic an INSERT INTO writes is always created when missing"),
    ("defaults.topic.replication", "topics are created with the broker's default replication"),
    ("replication", "topics are created with the broker's default replication"),
    ("defaults.topic.", "topic configurations are left to the broker"),
    ("topic.", "topic configurations are left to the broker"),
    ("processing.guarantee", "every query writes exactly once per micro-batch"),
    ("enable.auto.commit", "offsets are kept in each query's checkpoint, not committed to Kafka"),
    ("cache.max.bytes.buffering", "no record cache: every update is written"),
    ("ksql.streams.", "Kafka Streams settings: queries run on Spark"),
    ("ksql.", "ksqlDB server settings"),
    ("execution.", "Flink job settings: queries run on Spark"),
    ("parallelism.default", "Spark's parallelism applies"),
    ("pipeline.", "Flink job settings: queries run on Spark"),
    ("table.", "Flink planner settings"),
    ("sql-client.", "Flink SQL client settings"),
)


_UNITS = {"ms": 1, "millisecond": 1, "milliseconds": 1, "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000,
          "min": 60_000, "minute": 60_000, "minutes": 60_000, "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
          "d": 86_400_000, "day": 86_400_000, "days": 86_400_000}
_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


def interval_ms(text: str) -> int:
    """``'2 seconds'``, ``'500 ms'``, ``'1 minute'`` or a bare number of milliseconds, as milliseconds."""
    match = _INTERVAL.match(str(text).lower())
    if not match or match.group(2) not in ("", *_UNITS):
        raise ValueError(f"'{text}' is not an interval such as '2 seconds', '500 milliseconds' or '1 minute'")
    return round(float(match.group(1)) * _UNITS.get(match.group(2), 1))


def check_setting(name: str, value: str) -> None:
    """Raise ValueError when ``value`` is not a valid value of the setting ``name``."""
    name = name.lower()
    if name in (TRIGGER_INTERVAL, COMMIT_INTERVAL, REMATCH_RETENTION):
        interval_ms(value)
    if name == OFFSET_RESET and str(value).lower() not in ("earliest", "latest"):
        raise ValueError(f"'{value}' is not 'earliest' or 'latest'")
    if name == RESULT_MODE and str(value).lower() not in RESULT_MODES:
        raise ValueError(f"'{value}' is not one of {', '.join(RESULT_MODES)}")
    if name in ("streamjoin.dead.letter.topic", "streamjoin.late.topic") and not str(value).strip():
        raise ValueError("a topic name cannot be empty")
    if name in SINK_PARTITIONS + (BUCKETS,) and not (str(value).isdigit() and int(value) >= 1):
        raise ValueError(f"'{value}' is not a positive whole number")
    if name in COLLECT_LIMITS.values() and not re.fullmatch(r"\s*-?\d+\s*", str(value)):
        raise ValueError(f"'{value}' is not a whole number")
    if name.startswith(KAFKA_CLIENT):
        client_properties({name[len(KAFKA_CLIENT):]: value})


def table_client_properties(properties: Iterable[tuple[str, object]]) -> dict:
    """A Kafka table's client properties: its ``properties.*`` options, without the prefix (and without those
    streamjoin sets itself: a Flink table's ``properties.group.id``, ``properties.bootstrap.servers``)."""
    return {k[len(TABLE_CLIENT):]: v for k, v in properties
            if k.lower().startswith(TABLE_CLIENT) and k[len(TABLE_CLIENT):].lower() not in OWNED}


def kafka_client_properties(settings: dict, tables: Iterable[dict], deployment: dict) -> dict:
    """The client properties of a script's broker, as librdkafka takes them (``connectors.kafka_client``): the
    deployment's (``streamjoin run --kafka-properties``), then its Kafka tables' (``table_client_properties``),
    then its ``SET 'kafka.*'`` settings, each over the ones before."""
    given = dict(deployment)
    for table in tables:
        given.update(table)
    given.update({k[len(KAFKA_CLIENT):]: v for k, v in settings.items() if k.lower().startswith(KAFKA_CLIENT)})
    return client_properties(given)


def setting_note(name: str) -> str:
    """What ``SET name = ...`` does here: what streamjoin reads it for, or why it is ignored."""
    lowered = name.lower()
    read = {known.lower(): meaning for known, meaning in READ.items()}
    if lowered in read:
        return read[lowered]
    if lowered.startswith(KAFKA_CLIENT):
        if lowered[len(KAFKA_CLIENT):] in OWNED:
            return "ignored: streamjoin sets this Kafka client property itself"
        return "a Kafka client property: every consumer, producer and admin client of the script takes it"
    for known, why in IGNORED:
        if lowered == known or (known.endswith(".") and lowered.startswith(known)):
            return f"ignored: {why}"
    return "ignored: not a setting streamjoin reads"


def setting_notes(properties: dict) -> list[str]:
    """One line per setting a script SET: its value and what it does here."""
    return [f"{name} = {masked(name, value)}: {setting_note(name)}" for name, value in properties.items()]


def collect_limit(properties: dict, function: str) -> Optional[int]:
    """How many values ksqlDB's COLLECT_LIST (COLLECT_SET) keeps under the script's settings; None: all of them."""
    value = next((v for k, v in properties.items() if k.lower() == COLLECT_LIMITS.get(function)), None)
    limit = None if value is None else int(str(value).strip())
    return None if limit is None or limit < 0 else limit


def single_value_wrapping(props: dict, value_format: str, value_columns: int, properties: dict) -> dict:
    """``props`` (a ksqlDB declaration's or result's WITH) with the script's ``ksql.persistence.wrap.single.values``
    as its ``WRAP_SINGLE_VALUE`` when it names none, has one value column and a format that can be either (JSON,
    JSON_SR, AVRO; ksqlDB's ``SerdeFeaturesFactory`` leaves the others as their format has them)."""
    default = properties.get(WRAP_SINGLE_VALUES)
    if default is None or "wrap_single_value" in props or value_columns != 1 or value_format.upper() not in WRAPPABLE:
        return props
    return {**props, "wrap_single_value": str(default).strip().lower()}


def sink_partitions(properties: dict) -> Optional[int]:
    """The partition count a Lenses script sets for the topics its INSERT INTO statements create, if any."""
    value = next((properties[name] for name in SINK_PARTITIONS if name in properties), None)
    return int(value) if value is not None else None


def trigger_interval(properties: dict) -> "str | None":
    """The script's micro-batch cadence: ``streamjoin.trigger.interval``, else ``commit.interval.ms``."""
    return properties.get(TRIGGER_INTERVAL, properties.get(COMMIT_INTERVAL))
