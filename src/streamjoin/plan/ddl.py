"""DDL: KSQL and Flink ``CREATE STREAM|TABLE`` statements become catalog entries."""
from __future__ import annotations

from typing import Optional

from ..errors import StatementError
from ..sql import ast
from .catalog import ColumnInfo, SourceInfo, display_name
from .types import spark_type

UPSERT_CONNECTORS = {"upsert-kafka"}
CHANGELOG_FORMATS = {"debezium-json", "canal-json", "maxwell-json"}


def properties_dict(props: tuple[ast.Property, ...]) -> dict[str, object]:
    """WITH (...) properties, names lower-cased."""
    return {p.name.lower(): p.value for p in props}


def source_from_ddl(stmt: ast.CreateSource) -> SourceInfo:
    style = stmt.style
    props = properties_dict(stmt.properties)
    name = display_name(stmt.name, style)
    columns: list[ColumnInfo] = []
    key_columns: list[str] = []
    proctime = None
    for col in stmt.columns:
        col_name = display_name(col.name, style)
        if col.computed is not None:
            if isinstance(col.computed, ast.Call) and col.computed.name == "PROCTIME":
                proctime = col_name
                columns.append(ColumnInfo(col_name, "timestamp", "computed", col.computed))
            else:
                columns.append(ColumnInfo(col_name, "string", "computed", col.computed))
            continue
        if col.metadata is not None:
            columns.append(_metadata_column(col, col_name))
            continue
        is_key = col.key or col.primary_key
        columns.append(ColumnInfo(col_name, spark_type(col.type), "key" if is_key else "value"))
        if is_key:
            key_columns.append(col_name)
    for pk in stmt.primary_key:  # Flink table-level PRIMARY KEY: key columns stay in the value
        col = _find(columns, pk.text)
        if col is None:
            raise StatementError(f"PRIMARY KEY column {pk.text} is not a column of {name}", rule="unknown-column", pos=pk.pos)
        key_columns.append(col.name)
    old_key = props.get("key")
    if old_key is not None and not key_columns:  # KSQL's old KEY='col': a value column that equals the key
        col = _find(columns, str(old_key))
        if col is None:
            raise StatementError(f"KEY property names {old_key}, which is not a column of {name}", rule="unknown-column", pos=stmt.pos)
        key_columns.append(col.name)

    connector = str(props.get("connector", "kafka")).lower()
    value_format = value_format_of(props, stmt.pos)
    changelog = value_format.lower() if value_format.lower() in CHANGELOG_FORMATS else None
    kind = _kind(stmt, style, connector, changelog, key_columns)
    if changelog and not key_columns:
        raise StatementError(f"{name} reads a {changelog} changelog: declare its PRIMARY KEY (...) NOT ENFORCED, "
                             "so updates and deletes know the row they replace", rule="changelog-needs-key", pos=stmt.pos)
    if kind == "TABLE" and not key_columns:
        raise StatementError(
            f"TABLE {name} needs a PRIMARY KEY column (or the KEY property)", rule="table-needs-key", pos=stmt.pos
        )
    timestamp_column, watermark_delay = _event_time(stmt, props, columns, style)
    topic = props.get("kafka_topic") or props.get("topic")
    # a file path instead of a topic: a bounded source, loaded once at query start (a static table)
    path = props.get("path") if connector == "filesystem" or topic is None else None
    if topic is None and path is None:
        topic = name
    return SourceInfo(
        name=name,
        kind=kind,
        topic=str(topic) if topic is not None else "",
        columns=tuple(columns),
        key_columns=tuple(key_columns),
        style=style,
        value_format=value_format,
        key_format=key_format_of(props, style),
        timestamp_column=timestamp_column,
        watermark_column=stmt.watermark and display_name(stmt.watermark.column, style),
        watermark_delay_ms=watermark_delay,
        proctime_column=proctime,
        partitions=int(props.get("partitions", 1) or 1),
        bounded_path=str(path) if path else None,
        changelog_format=changelog,
        properties=tuple(sorted((k, v) for k, v in props.items())),
    )


# the record fields a metadata column may read, and the types (Spark's, as declared) it may have
_HEADERS = {"array<struct<`key`:string,`value`:binary>>": "ARRAY<STRUCT<KEY STRING, VALUE BYTES>>"}
_BYTES = {"binary": "BYTES"}
FLINK_METADATA = {"headers": {"map<string,binary>": "MAP<STRING, BYTES>"}, "timestamp": {"timestamp": "TIMESTAMP"},
                  "partition": {"int": "INT", "bigint": "BIGINT"}, "offset": {"bigint": "BIGINT"},
                  "topic": {"string": "STRING"}}


def _metadata_column(col: ast.ColumnDef, name: str) -> ColumnInfo:
    """A column read from the record instead of its value: KSQL ``HEADERS`` / ``HEADER('k')``, Flink
    ``METADATA [FROM 'key'] [VIRTUAL]``. Its declared type must be the one the field has."""
    kind, field = col.metadata
    if kind == "headers":
        key, allowed = "headers", _HEADERS
    elif kind == "header":
        key, allowed = f"header:{field}", _BYTES
    else:
        key = (field or col.name.text).lower()
        if key not in FLINK_METADATA:
            raise StatementError(f"METADATA key '{key}' of column {name} is not one of {', '.join(FLINK_METADATA)}",
                                 rule="metadata-key", pos=col.pos)
        allowed = FLINK_METADATA[key]
    declared = spark_type(col.type)
    what = key.split(":")[0]
    if declared.lower() not in allowed:
        raise StatementError(f"column {name} reads the record's {what}, so its type must be {' or '.join(allowed.values())}",
                             rule="metadata-type", pos=col.pos)
    if col.key or col.primary_key:
        raise StatementError(f"column {name} reads the record's {what} and cannot be a key column",
                             rule="metadata-type", pos=col.pos)
    return ColumnInfo(name, declared, "metadata", metadata=key)


def key_format_of(props: dict, style: str, default: str | None = None) -> str:
    """The declared key format: KEY_FORMAT (Flink: 'key.format'); ksqlDB's FORMAT sets key and value. Else
    ``default``, else KAFKA (Flink: JSON)."""
    declared = props.get("key_format") or props.get("key.format")
    if declared is None and style != "flink":
        declared = props.get("format")
    return str(declared or default or ("JSON" if style == "flink" else "KAFKA")).upper()


def value_format_of(props: dict, pos, default: str = "JSON") -> str:
    """The declared value format (else ``default``), normalised (``connectors.formats``); an unknown one is
    refused."""
    from ..connectors.formats import VALUE_FORMATS, normalise_format

    declared = str(props.get("value_format") or props.get("value.format") or props.get("format") or default)
    fmt = normalise_format(declared)
    if fmt is None:
        known = ", ".join(sorted({f for f in VALUE_FORMATS}))
        raise StatementError(f"value format {declared} is not supported (use one of {known})", rule="value-format", pos=pos)
    return fmt


def _find(columns: list[ColumnInfo], name: str) -> Optional[ColumnInfo]:
    return next((c for c in columns if c.name.casefold() == name.casefold()), None)


def _kind(stmt: ast.CreateSource, style: str, connector: str, changelog: Optional[str], keys: list[str]) -> str:
    if style != "flink":
        return stmt.kind
    # Flink: a table with a primary key on an upsert/changelog connector is a TABLE, anything else a STREAM.
    if keys and (connector in UPSERT_CONNECTORS or changelog or connector == "filesystem"):
        return "TABLE"
    return "STREAM"


def _event_time(stmt: ast.CreateSource, props: dict, columns: list[ColumnInfo], style: str):
    if stmt.watermark is not None:
        col = _find(columns, stmt.watermark.column.text)
        if col is None:
            raise StatementError(
                f"WATERMARK FOR names {stmt.watermark.column.text}, which is not a column",
                rule="unknown-column", pos=stmt.watermark.pos,
            )
        return col.name, watermark_delay_ms(stmt.watermark.expr)
    ts = props.get("timestamp")
    if ts is not None:
        col = _find(columns, str(ts))
        if col is None:
            raise StatementError(f"TIMESTAMP property names {ts}, which is not a column", rule="unknown-column", pos=stmt.pos)
        return col.name, None
    return None, None


def watermark_delay_ms(expr: ast.Expr) -> int:
    """``col`` -> 0, ``col - INTERVAL 'n' UNIT`` -> n in ms."""
    if isinstance(expr, ast.BinaryOp) and expr.op == "-" and isinstance(expr.right, ast.Interval):
        return expr.right.millis
    if isinstance(expr, ast.Column):
        return 0
    raise StatementError(
        "WATERMARK FOR supports `col` or `col - INTERVAL ...`", rule="watermark-expression", pos=getattr(expr, "pos", None)
    )
