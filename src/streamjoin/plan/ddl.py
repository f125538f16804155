"""DDL: KSQL and Flink ``CREATE STREAM|TABLE`` statements become catalog entries."""
from __future__ import annotations

from typing import Optional

from ..errors import StatementError
from ..sql import ast
from ..connectors.database import describe_failure, parse_url, table_columns
from ..connectors.formats import infers_columns
from ..connectors.time_formats import check_pattern
from .catalog import ColumnInfo, DatabaseTable, SourceInfo, display_name
from .ksql_projection import SYSTEM_COLUMNS
from .settings import DEFAULT_VALUE_FORMAT, interval_ms, single_value_wrapping
from .types import ksql_type_name, spark_type

UPSERT_CONNECTORS = {"upsert-kafka"}
CHANGELOG_FORMATS = {"debezium-json", "canal-json", "maxwell-json"}


def properties_dict(props: tuple[ast.Property, ...]) -> dict[str, object]:
    """WITH (...) properties, names lower-cased."""
    return {p.name.lower(): p.value for p in props}


def _check_ksql_elements(stmt: ast.CreateSource, kind: str, value_format: str, props: dict, key_columns) -> None:
    """ksqlDB's refusals of a declaration's columns, in its words: none at all in a format that cannot infer them,
    a stream's PRIMARY KEY or a table's KEY, a table without a PRIMARY KEY, a windowed source without a key; and no
    value columns in a format whose columns ksqlDB would read from a Schema Registry, which streamjoin does not."""
    if not stmt.columns and not infers_columns(value_format, props):
        raise StatementError("No columns supplied.", rule="no-columns", pos=stmt.pos)
    for col in stmt.columns:
        if col.key and kind == "TABLE" or col.primary_key and kind == "STREAM":
            given, wanted = ("KEY", "PRIMARY KEY") if col.key else ("PRIMARY KEY", "KEY")
            raise StatementError(f"Column `{display_name(col.name, 'ksql')}` is a '{given}' column: please use "
                                 f"'{wanted}' for {kind.lower()}s.", rule="key-kind", pos=col.name.pos)
    if kind == "TABLE" and not key_columns:
        raise StatementError("Tables require a PRIMARY KEY. Please define the PRIMARY KEY.", rule="table-needs-key",
                             pos=stmt.pos)
    if props.get("window_type") is not None and not key_columns:
        raise StatementError("Windowed sources require a key column.", rule="windowed-source-key", pos=stmt.pos)
    value_columns = [c for c in stmt.columns if not (c.key or c.primary_key) and c.metadata is None]
    if not value_columns and infers_columns(value_format, props):
        topic = props.get("kafka_topic", stmt.name.text)
        raise StatementError(f"{display_name(stmt.name, 'ksql')} declares no value columns. ksqlDB takes them from a "
                             f"Schema Registry (the schema of the {value_format} values on topic '{topic}'); streamjoin "
                             "reads none: declare the value columns.", rule="schema-registry", pos=stmt.pos)


def source_from_ddl(stmt: ast.CreateSource, name: Optional[str] = None, servers: Optional[dict] = None,
                    settings: Optional[dict] = None) -> SourceInfo:
    """The catalog entry a CREATE STREAM|TABLE declares; ``name``: the name it is shown with (schema-qualified
    where the script says so), else its own name as the dialect shows it.

    KSQL and Flink DDL (``WITH (...)``) name the topic and formats. A SQLstream native object (no WITH) is
    the topic of its own name, JSON valued, every column in the value (a PRIMARY KEY column too, so a table's
    rows carry their key). Lenses DDL (``FORMAT (key, value)``): see ``_lenses_source``."""
    if stmt.dialect == "lenses":
        return _lenses_source(stmt, name or stmt.name.text)
    style = stmt.style
    native = stmt.dialect == "sqlstream"
    props = properties_dict(stmt.properties)
    settings = settings or {}
    if stmt.dialect == "ksql":
        check_format_properties(props, stmt.pos)
        check_ksql_formats(props, stmt.pos)
        default_value_format = settings.get(DEFAULT_VALUE_FORMAT)
        if not any(k in props for k in ("value_format", "format")):  # ksqlDB names no default of its own
            if default_value_format is None:
                raise StatementError("Statement is missing the 'VALUE_FORMAT' property from the WITH clause. Either "
                                     "provide one or set a default via the 'ksql.persistence.default.format.value' "
                                     "config.", rule="value-format", pos=stmt.pos)
            props = {**props, "value_format": default_value_format}
    name = name or display_name(stmt.name, style)
    columns: list[ColumnInfo] = []
    key_columns: list[str] = []
    proctime = None
    if native and stmt.kind == "TABLE" and "server" in props:
        return _foreign_table(stmt, name, props, servers or {})
    for col in stmt.columns:
        col_name = display_name(col.name, style)
        if stmt.dialect == "ksql" and col_name.upper() in SYSTEM_COLUMNS:
            raise StatementError(f"'{col_name}' is a reserved column name. You cannot use it as a name for a column.",
                                 rule="reserved-name", pos=col.name.pos)
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
        columns.append(ColumnInfo(col_name, spark_type(col.type, stmt.dialect == "ksql"), "key" if is_key and not native else "value",
                                  nullable=not col.not_null))
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

    _refuse_duplicates(columns, name, stmt.pos)
    connector = str(props.get("connector", "kafka")).lower()
    if stmt.dialect == "ksql":
        check_none_value_format(props, [(c.name, c.type) for c in columns if c.origin == "value"], stmt.pos)
    value_format = value_format_of(props, stmt.pos)
    if stmt.dialect == "ksql":
        props = single_value_wrapping(props, value_format, len([c for c in columns if c.origin == "value"]), settings)
    check_value_columns(value_format, [(c.name, c.type) for c in columns if c.origin == "value"], name, stmt.pos,
                        ksql=stmt.dialect == "ksql", properties=props)
    if stmt.dialect == "ksql":
        check_ksql_key_format(key_format_of(props, style), stmt.pos)
        check_key_columns(key_format_of(props, style), [(c.name, c.type) for c in columns if c.origin == "key"], stmt.pos)
    changelog = value_format.lower() if value_format.lower() in CHANGELOG_FORMATS else None
    kind = _kind(stmt, style, connector, changelog, key_columns)
    if changelog and not key_columns:
        raise StatementError(f"{name} reads a {changelog} changelog: declare its PRIMARY KEY (...) NOT ENFORCED, "
                             "so updates and deletes know the row they replace", rule="changelog-needs-key", pos=stmt.pos)
    if stmt.dialect == "ksql":
        _check_ksql_elements(stmt, kind, value_format, props, key_columns)
    if kind == "TABLE" and not key_columns and connector != "jdbc":  # a database table's rows need no key
        raise StatementError(
            f"TABLE {name} needs a PRIMARY KEY column (or the KEY property)", rule="table-needs-key", pos=stmt.pos
        )
    timestamp_column, watermark_delay = _event_time(stmt, props, columns, style)
    window = _declared_window(props, stmt.pos)
    database = database_table(props, name, stmt.pos) if connector == "jdbc" else None
    topic = props.get("kafka_topic") or props.get("topic")
    # a file path instead of a topic: a bounded source, loaded once at query start (a static table)
    path = props.get("path") if connector == "filesystem" or topic is None else None
    if database is not None:
        topic, path = "", None
        props = {k: v for k, v in props.items() if k not in SECRET_OPTIONS}
    elif topic is None and path is None:
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
        partitions=partitions_of(props, stmt.pos),
        bounded_path=str(path) if path else None,
        changelog_format=changelog,
        properties=tuple(sorted((k, v) for k, v in props.items())),
        dialect=stmt.dialect,
        window=window,
        database=database,
    )


def _foreign_table(stmt: ast.CreateSource, name: str, props: dict, servers: dict) -> SourceInfo:
    """SQLstream's ``CREATE FOREIGN TABLE t [(cols)] SERVER s OPTIONS (SCHEMA_NAME .., TABLE_NAME ..)`` over a
    ``SYS_JDBC`` server (options URL or URI, USER_NAME, PASSWORD, DRIVER_CLASS or DRIVER; SCHEMA_NAME and
    TABLE_NAME may be the server's too): a table in a database, read when a query starts. Without a column list
    its columns, types and primary key are the database's own (read from its catalog now)."""
    server = servers.get(str(props["server"]).casefold())
    if server is None:
        raise StatementError(f"unknown server {props['server']} (declare it with CREATE SERVER ... FOREIGN DATA "
                             "WRAPPER SYS_JDBC)", rule="unknown-server", pos=stmt.pos)
    if server.wrapper != "SYS_JDBC":
        raise StatementError(f"foreign table {name}: server {server.name} is a {server.wrapper} server; a foreign "
                             "table is read through a SYS_JDBC one", rule="foreign-table-server", pos=stmt.pos)
    options = {**server.options, **{k.upper(): str(v) for k, v in props.items() if k != "server"}}
    url = options.get("URL") or options.get("URI")
    if not url:
        raise StatementError(f"server {server.name} names no URL", rule="jdbc-options", pos=stmt.pos)
    try:
        parse_url(url)
    except ValueError as err:
        raise StatementError(f"foreign table {name}: {err}", rule="jdbc-url", pos=stmt.pos) from None
    table = options.get("TABLE_NAME") or stmt.name.text
    if options.get("SCHEMA_NAME"):
        table = f"{options['SCHEMA_NAME']}.{table}"
    database = DatabaseTable(url=url, table=table, username=options.get("USER_NAME"), password=options.get("PASSWORD"))
    if stmt.columns:
        columns = [ColumnInfo(display_name(c.name, "ksql"), spark_type(c.type), nullable=not c.not_null)
                   for c in stmt.columns]
        keys = [display_name(c.name, "ksql") for c in stmt.columns if c.primary_key or c.key]
        for pk in stmt.primary_key:
            col = _find(columns, pk.text)
            if col is None:
                raise StatementError(f"PRIMARY KEY column {pk.text} is not a column of {name}", rule="unknown-column", pos=pk.pos)
            keys.append(col.name)
    else:
        try:
            found = table_columns(parse_url(url, database.username, database.password), table)
        except Exception as err:  # noqa: BLE001 - whatever the driver raises, named and masked
            raise StatementError(describe_failure(err, table, url, database.password), rule="database-table",
                                 pos=stmt.pos) from None
        columns = [ColumnInfo(n, t) for n, t, _ in found]
        keys = [n for n, _, key in found if key]
    if not keys:
        raise StatementError(f"TABLE {name} needs a PRIMARY KEY column: declare it, or give the database table one",
                             rule="table-needs-key", pos=stmt.pos)
    return SourceInfo(name=name, kind="TABLE", topic="", columns=tuple(columns), key_columns=tuple(keys),
                      properties=(("server", server.name),), dialect="sqlstream", database=database)


SECRET_OPTIONS = {"password"}
JDBC_OPTIONS = {
    "connector", "url", "table-name", "driver", "username", "password", "connection.max-retry-timeout",
    "scan.partition.column", "scan.partition.num", "scan.partition.lower-bound", "scan.partition.upper-bound",
    "scan.fetch-size", "scan.auto-commit", "lookup.cache", "lookup.partial-cache.max-rows",
    "lookup.partial-cache.expire-after-write", "lookup.partial-cache.expire-after-access",
    "lookup.partial-cache.cache-missing-key", "lookup.max-retries", "lookup.cache.max-rows", "lookup.cache.ttl",
    "lookup.cache.caching-missing-key", "sink.buffer-flush.max-rows", "sink.buffer-flush.interval",
    "sink.max-retries", "sink.parallelism",
}


def database_table(props: dict, name: str, pos) -> DatabaseTable:
    """A Flink 'jdbc' table's options, checked as Flink's JDBC connector checks them: 'url' and 'table-name'
    required, no option it does not know, 'lookup.cache' NONE or PARTIAL (the legacy 'lookup.cache.max-rows'
    and 'lookup.cache.ttl' ask for PARTIAL), a partial cache bounded by rows or by time."""
    unknown = sorted(k for k in props if k not in JDBC_OPTIONS)
    if unknown:
        raise StatementError(f"Unsupported options found for 'jdbc' in {name}: {', '.join(unknown)}",
                             rule="jdbc-options", pos=pos)
    missing = [k for k in ("url", "table-name") if not props.get(k)]
    if missing:
        raise StatementError(f"'jdbc' table {name} needs the option(s) {', '.join(repr(k) for k in missing)}",
                             rule="jdbc-options", pos=pos)
    url = str(props["url"])
    try:
        parse_url(url)
    except ValueError as err:
        raise StatementError(f"'jdbc' table {name}: {err}", rule="jdbc-url", pos=pos) from None
    for both in (("username", "password"), ("lookup.cache.max-rows", "lookup.cache.ttl")):
        if (props.get(both[0]) is None) != (props.get(both[1]) is None):
            raise StatementError(f"'jdbc' table {name}: either all or none of the options {', '.join(both)} should "
                                 "be provided", rule="jdbc-options", pos=pos)

    def option(key: str, read):
        value = props.get(key)
        if value is None or str(value).strip() == "":
            return None
        try:
            return read(str(value).strip())
        except ValueError:
            raise StatementError(f"'jdbc' table {name}: '{key}' = '{value}' is not valid", rule="jdbc-options",
                                 pos=pos) from None

    def flag(text: str) -> bool:
        if text.lower() not in ("true", "false"):
            raise ValueError(text)
        return text.lower() == "true"

    def count(text: str) -> int:
        if int(text) < 0:
            raise ValueError(text)
        return int(text)

    retries, sink_retries = option("lookup.max-retries", count), option("sink.max-retries", count)
    common = dict(url=url, table=str(props["table-name"]), username=props.get("username") and str(props["username"]),
                  password=props.get("password") and str(props["password"]),
                  max_retries=3 if retries is None else retries, sink_max_retries=3 if sink_retries is None else sink_retries)
    cache = str(props.get("lookup.cache") or "NONE").upper()
    if cache not in ("NONE", "PARTIAL", "FULL"):
        raise StatementError(f"'jdbc' table {name}: 'lookup.cache' = '{props.get('lookup.cache')}' is not NONE, "
                             "PARTIAL or FULL", rule="jdbc-options", pos=pos)
    if cache == "PARTIAL":
        table = DatabaseTable(**common, cache="PARTIAL",
                              cache_max_rows=option("lookup.partial-cache.max-rows", count),
                              expire_after_write_ms=option("lookup.partial-cache.expire-after-write", interval_ms),
                              expire_after_access_ms=option("lookup.partial-cache.expire-after-access", interval_ms),
                              cache_missing_key=option("lookup.partial-cache.cache-missing-key", flag) is not False)
        if (table.cache_max_rows, table.expire_after_write_ms, table.expire_after_access_ms) == (None, None, None):
            raise StatementError(
                f"'jdbc' table {name}: missing 'lookup.partial-cache.expire-after-access', 'lookup.partial-cache."
                "expire-after-write' or 'lookup.partial-cache.max-rows': the cache would never evict",
                rule="jdbc-options", pos=pos)
        return table
    legacy_rows, legacy_ttl = option("lookup.cache.max-rows", int), option("lookup.cache.ttl", interval_ms)
    if legacy_rows is not None and legacy_rows > 0 and legacy_ttl:  # Flink's deprecated options: a partial cache
        return DatabaseTable(**common, cache="PARTIAL", cache_max_rows=legacy_rows, expire_after_write_ms=legacy_ttl,
                             cache_missing_key=option("lookup.cache.caching-missing-key", flag) is not False)
    # 'FULL' is accepted as Flink's JDBC connector accepts it: it then caches nothing
    return DatabaseTable(**common)


LENSES_KEY_FORMATS = {"STRING": "KAFKA", "INT": "KAFKA", "LONG": "KAFKA", "DOUBLE": "KAFKA", "FLOAT": "KAFKA",
                      "BYTES": "KAFKA", "JSON": "JSON", "AVRO": "AVRO"}
LENSES_VALUE_FORMATS = {"JSON": "JSON", "AVRO": "AVRO", "STRING": "KAFKA", "INT": "KAFKA", "LONG": "KAFKA",
                        "DOUBLE": "KAFKA", "FLOAT": "KAFKA"}


def _lenses_source(stmt: ast.CreateSource, name: str) -> SourceInfo:
    """Lenses ``CREATE TABLE t (_key T | _key.f T, a T, b.c T) FORMAT (keyfmt, valuefmt) [PROPERTIES (...)]``:
    topic ``t`` as written, a stream of records (a query reads it as a table through ``SELECT TABLE``).
    Names keep their case (JSON fields are matched as written). ``_key T`` is the record key, one column
    named ``_key``; ``_key.f T`` fields of a structured key, each a key column ``f``; a dotted value name
    ``b.c`` is field ``c`` of a struct column ``b``; ``_value T`` a value that is one primitive (a column
    ``_value``): text in a primitive value format (STRING, INT, ...), a bare JSON value in JSON."""
    key_format = lenses_format(stmt.formats[0], LENSES_KEY_FORMATS, "key", stmt.pos)
    value_format = lenses_format(stmt.formats[1], LENSES_VALUE_FORMATS, "value", stmt.pos)
    props = properties_dict(stmt.properties)
    columns: list[ColumnInfo] = []
    structs: dict[str, list[str]] = {}  # struct column -> its fields' Spark types, in order
    for col in stmt.columns:
        path = col.path or (col.name.text,)
        if path[0].casefold() == "_key":
            if len(path) > 2:
                raise StatementError(f"{'.'.join(path)}: a key field may not be nested deeper", rule="lenses-key-field", pos=col.pos)
            columns.append(ColumnInfo(path[-1], spark_type(col.type), "key"))
        elif path[0].casefold() == "_value" and len(path) == 1:
            columns.append(ColumnInfo("_value", spark_type(col.type), "value"))
        else:
            path = path[1:] if path[0].casefold() == "_value" else path
            if len(path) > 2:
                raise StatementError(f"{'.'.join(path)}: fields nested more than one level are not supported yet",
                                     rule="nested-field", pos=col.pos)
            if len(path) == 2:
                if path[0] not in structs:
                    structs[path[0]] = []
                    columns.append(ColumnInfo(path[0], "", "value"))
                structs[path[0]].append(f"`{path[1]}`:{spark_type(col.type)}")
            else:
                columns.append(ColumnInfo(path[0], spark_type(col.type), "value"))
    columns = [ColumnInfo(c.name, "struct<" + ",".join(structs[c.name]) + ">", c.origin) if c.name in structs else c
               for c in columns]
    key_columns = tuple(c.name for c in columns if c.origin == "key")
    if key_format == "KAFKA" and (len(key_columns) > 1 or (key_columns and key_columns[0] != "_key")):
        key_format = "JSON"  # fields of a structured key
    values = [c.name for c in columns if c.origin == "value"]
    if "_value" in values and len(values) > 1:
        raise StatementError("_value is the whole value: declare it alone, or the value's fields without it",
                             rule="value-format", pos=stmt.pos)
    if value_format == "KAFKA" and values != ["_value"]:
        raise StatementError(f"value format {stmt.formats[1].upper()} holds one primitive: declare it as _value "
                             f"{stmt.formats[1].upper()}", rule="value-format", pos=stmt.pos)
    if values == ["_value"] and value_format == "JSON":
        props["wrap_single_value"] = "false"  # the value is that JSON value itself (``lower.decode.unwrapped_value``)
    props["lenses.key.format"] = stmt.formats[0].upper()  # as declared: STRING and INT keys differ in Lenses
    return SourceInfo(
        name=name, kind="STREAM", topic=stmt.name.text, columns=tuple(columns), key_columns=key_columns,
        value_format=value_format, key_format=key_format, partitions=partitions_of(props, stmt.pos),
        properties=tuple(sorted(props.items())), dialect="lenses",
    )


def declared_key_format(source: SourceInfo) -> str:
    """A source's key format as its DDL named it (Lenses: STRING, INT, LONG, JSON, ...)."""
    return str(dict(source.properties).get("lenses.key.format", source.key_format))


def lenses_format(written: str, known: dict, part: str, pos) -> str:
    fmt = known.get(written.upper())
    if fmt is None:
        raise StatementError(f"{part} format {written} is not supported (use one of {', '.join(known)})",
                             rule=f"{part}-format", pos=pos)
    return fmt


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
    if declared.lower() not in allowed and kind in ("headers", "header"):  # ksqlDB's, in its words
        written = "HEADERS" if kind == "headers" else f"HEADER('{field}')"
        expected = "ARRAY<STRUCT<`KEY` STRING, `VALUE` BYTES>>" if kind == "headers" else "BYTES"
        raise StatementError(f"Invalid type for {written} column: expected {expected}, got {ksql_type_name(declared)}",
                             rule="metadata-type", pos=col.pos)
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
    fmt = str(declared or default or ("JSON" if style == "flink" else "KAFKA")).upper()
    return {"PROTOBUF_NOSR": "PROTOBUF", "JSON_SR": "JSON"}.get(fmt, fmt)  # no Schema Registry: read alike


def check_ksql_formats(props: dict, pos) -> None:
    """ksqlDB's FORMAT sets the key and the value format: neither may be given beside it."""
    for part in ("key", "value"):
        if "format" in props and f"{part}_format" in props:
            raise StatementError(f"Cannot supply both '{part.upper()}_FORMAT' and 'FORMAT' properties, as 'FORMAT' sets "
                                 "both key and value formats. Either use just 'FORMAT', or use 'KEY_FORMAT' and "
                                 "'VALUE_FORMAT'.", rule="value-format", pos=pos)


KSQL_KEY_FORMATS = ("KAFKA", "JSON", "JSON_SR", "DELIMITED", "AVRO", "PROTOBUF", "NONE")  # JSON_SR: read as JSON


def check_ksql_key_format(key_format: str, pos) -> None:
    """Refuse a ksqlDB key format streamjoin does not know, in ksqlDB's words."""
    if key_format not in KSQL_KEY_FORMATS:
        raise StatementError(f"Unknown format: {key_format}: key format {key_format} is not supported (use one of "
                             f"{', '.join(KSQL_KEY_FORMATS)})", rule="key-format", pos=pos)


def _refuse_duplicates(columns: list[ColumnInfo], name: str, pos) -> None:
    seen = set()
    for column in columns:
        if column.name in seen:
            raise StatementError(f"{name} declares column {column.name} twice", rule="duplicate-column", pos=pos)
        seen.add(column.name)


def partitions_of(props: dict, pos) -> int:
    """The PARTITIONS property (1 when absent): a whole number of at least 1."""
    value = props.get("partitions", 1) or 1
    try:
        count = int(str(value).strip("'\""))
    except ValueError:
        count = 0
    if count < 1:
        raise StatementError(f"PARTITIONS = {value!r} is not a number of partitions (a whole number, at least 1)",
                             rule="partitions", pos=pos)
    return count


def value_format_of(props: dict, pos, default: str = "JSON") -> str:
    """The declared value format (else ``default``), normalised (``connectors.formats``); an unknown one is
    refused."""
    from ..connectors.formats import VALUE_FORMATS, normalise_format

    declared = str(props.get("value_format") or props.get("value.format") or props.get("format") or default)
    fmt = normalise_format(declared)
    if fmt is None:
        known = ", ".join(sorted({f for f in VALUE_FORMATS}))
        raise StatementError(f"Unknown format: {declared}: value format {declared} is not supported (use one of {known})",
                             rule="value-format", pos=pos)
    return fmt


def check_format_properties(props: dict, pos) -> None:
    """ksqlDB's value format properties: ``VALUE_DELIMITER`` only of a DELIMITED value, one character, or ``TAB`` or
    ``SPACE`` (``Delimiter.parse``); a schema's full name (``VALUE_AVRO_SCHEMA_FULL_NAME``,
    ``VALUE_SCHEMA_FULL_NAME``) only of a value format with a schema, and not blank; else refused in its words."""
    declared = str(props.get("value_format") or props.get("format") or "").upper()
    full_name = props.get("value_avro_schema_full_name", props.get("value_schema_full_name"))
    if full_name is not None and declared in ("JSON", "DELIMITED", "KAFKA", "NONE"):
        raise StatementError(f"{declared} does not support the following configs: [fullSchemaName]",
                             rule="value-format", pos=pos)
    if full_name is not None and not str(full_name).strip():
        raise StatementError("fullSchemaName cannot be empty. Format configuration: {fullSchemaName=}",
                             rule="value-format", pos=pos)
    given = props.get("value_delimiter")
    if given is not None and declared not in ("DELIMITED", ""):
        raise StatementError(f"{declared} does not support the following configs: [delimiter]", rule="value-delimiter",
                             pos=pos)
    if given is None or len(str(given)) == 1 and str(given).strip() or str(given) in ("TAB", "SPACE"):
        return
    problem = (f"Invalid delimiter value: '{given}'. Delimiter must be a single character or TAB,SPACE" if str(given).strip()
               else "Delimiter cannot be empty, if you meant to have a tab or space for delimiter, please use the "
                    "special values 'TAB' or 'SPACE'")
    raise StatementError(f"Failed to prepare statement: Configuration VALUE_DELIMITER is invalid: {problem}\n"
                         "Example valid value: ';'", rule="value-delimiter", pos=pos)


# ksqlDB's refusal of a MAP value column whose keys are no strings, per value format
_MAP_KEY_REFUSALS = {"JSON": "JSON only supports MAP types with STRING keys",
                     "AVRO": "Avro only supports MAPs with STRING keys",
                     "PROTOBUF": "PROTOBUF format only supports MAP types with STRING keys"}
# the WRAP_SINGLE_VALUE settings a ksqlDB value format takes (its ``supportedFeatures``: WRAP_SINGLES is 'true',
# UNWRAP_SINGLES 'false'); the others take both
_WRAPPING = {"DELIMITED": ("false",), "KAFKA": ("false",), "PROTOBUF": ("true",)}


def check_value_columns(value_format: str, columns: list[tuple[str, str]], name: str, pos, ksql: bool = False,
                        properties: Optional[dict] = None) -> None:
    """Refuse value columns the format cannot hold (a PROTOBUF array of arrays; KAFKA: more than one column,
    or one that is not a primitive; DELIMITED: a nested type; ``ksql``, ksqlDB's JSON, AVRO and PROTOBUF: a MAP whose
    keys are no strings; ksqlDB's WRAP_SINGLE_VALUE, said of several value columns), in ksqlDB's words."""
    wrapped = str((properties or {}).get("wrap_single_value", "")).lower()
    if ksql and wrapped in ("true", "false") and wrapped not in _WRAPPING.get(value_format, ("true", "false")):
        raise StatementError(f"Format '{value_format}' does not support 'WRAP_SINGLE_VALUE' set to '{wrapped}'.",
                             rule="value-format", pos=pos)
    if ksql and "wrap_single_value" in (properties or {}) and len(columns) > 1:
        raise StatementError("'WRAP_SINGLE_VALUE' is only valid for single-field value schemas", rule="value-format",
                             pos=pos)
    if ksql and value_format in _MAP_KEY_REFUSALS and any(_map_key_not_string(t) for _, t in columns):
        raise StatementError(_MAP_KEY_REFUSALS[value_format], rule="value-format", pos=pos)
    if value_format == "KAFKA":
        from ..connectors.formats import KAFKA_VALUE_TYPES
        from .types import ksql_type_name

        if len(columns) > 1:
            got = ", ".join(f"`{n}` {ksql_type_name(t)}" for n, t in columns)
            raise StatementError(f"The 'KAFKA' format only supports a single field. Got: [{got}]", rule="value-format", pos=pos)
        if columns and columns[0][1].lower() not in KAFKA_VALUE_TYPES:
            base = ksql_type_name(columns[0][1]).split("<")[0].split("(")[0]
            raise StatementError(f"The 'KAFKA' format does not support type '{base}'", rule="value-format", pos=pos)
    if value_format == "DELIMITED":
        nested = next(((n, t) for n, t in columns if _nested_base(t)), None)
        if nested is not None:
            raise StatementError(f"The 'DELIMITED' format does not support type '{_nested_base(nested[1])}'",
                                 rule="value-format", pos=pos)
    if value_format == "AVRO":
        problem = next(filter(None, map(_avro_name_problem, _field_names(columns))), None)
        if problem is not None:
            raise StatementError(f"Schema is not compatible with Avro: {problem}", rule="value-format", pos=pos)
    if value_format == "PROTOBUF":
        from ..connectors.protobuf_format import check_columns

        try:
            check_columns(columns)
        except ValueError as err:
            raise StatementError(f"{name}: {err}", rule="value-format", pos=pos) from None


def _field_names(columns: list[tuple[str, str]]):
    """The names of ``columns`` and of the STRUCT fields in their types (in ARRAYs and MAPs too): an Avro record's
    fields, each a name Avro must accept."""
    for name, type_ in columns:
        yield name
        yield from _nested_field_names(type_)


def _nested_field_names(type_: str):
    from ..connectors.formats import split_type_args, struct_fields

    if type_.lower().startswith(("array<", "map<")):
        for inner in split_type_args(type_[type_.index("<") + 1:-1]):
            yield from _nested_field_names(inner)
    else:
        yield from _field_names(struct_fields(type_))


def _avro_name_problem(name: str) -> Optional[str]:
    """Avro's refusal of a record field's name (``Schema.validateName``): a letter or ``_`` first, then letters,
    digits and ``_``."""
    if not (name[:1].isalpha() or name[:1] == "_"):
        return f"Illegal initial character: {name}"
    if not all(c.isalnum() or c == "_" for c in name[1:]):
        return f"Illegal character in: {name}"
    return None


def _none_format(columns: list[tuple[str, str]], pos, suffix: str = "") -> StatementError:
    got = ", ".join(f"`{name}` {ksql_type_name(type_)}{suffix}" for name, type_ in columns)
    return StatementError(f"The 'NONE' format can only be used when no columns are defined. Got: [{got}]",
                          rule="value-format" if not suffix else "key-format", pos=pos)


def check_none_value_format(props: dict, value_columns: list[tuple[str, str]], pos) -> None:
    """ksqlDB's NONE value format holds no columns: a declaration with value columns is refused in its words
    (``NoneFormat``). Without any, it is refused as a format streamjoin does not read (``value_format_of``)."""
    declared = str(props.get("value_format") or props.get("format") or "").upper()
    if declared == "NONE" and value_columns:
        raise _none_format(value_columns, pos)


def check_key_columns(key_format: str, columns: list[tuple[str, str]], pos, declared: bool = True) -> None:
    """Refuse, in ksqlDB's words, key columns ksqlDB's key serde cannot hold: a key that is or holds a MAP
    (``GenericKeySerDe``), and with the KAFKA key format anything but one INT, BIGINT, DOUBLE, STRING or
    BYTES column (``KafkaSerdeFactory``). ``declared`` false: a result that may have several key columns
    (DIALECT: a RIGHT or FULL foreign-key join is keyed by both tables' keys); only their types are checked."""
    from ..connectors.formats import KAFKA_VALUE_TYPES

    if key_format.upper() == "NONE" and columns:
        raise _none_format(columns, pos, " KEY")
    for name, type_ in columns:
        if "map<" in type_.lower():
            raise StatementError(
                "Map keys, including types that contain maps, are not supported as they may lead to unexpected "
                f"behavior due to inconsistent serialization. Key column name: `{name}`. Column type: "
                f"{ksql_type_name(type_)}. See https://github.com/confluentinc/ksql/issues/6621 for more.",
                rule="key-format", pos=pos)
    if key_format not in ("KAFKA", "DELIMITED") or not columns:
        return
    listed = "[" + ", ".join(f"`{name}` {ksql_type_name(type_)} KEY" for name, type_ in columns) + "]"
    unsupported = [type_ for _, type_ in columns if type_.lower() not in KAFKA_VALUE_TYPES]
    nested = next(((n, t) for n, t in columns if _nested_base(t)), None)
    if key_format == "DELIMITED" and nested is None:
        return
    if key_format == "DELIMITED":
        reason = f"The 'DELIMITED' format does not support type '{_nested_base(nested[1])}', column: `{nested[0]}`"
    elif len(columns) > 1 and declared:
        reason = f"The 'KAFKA' format only supports a single field. Got: {listed}"
    elif unsupported:
        base = ksql_type_name(unsupported[0]).split("<")[0].split("(")[0]
        reason = f"The 'KAFKA' format does not support type '{base}'"
    else:
        return
    raise StatementError(f"Key format does not support schema.\nformat: {key_format}\nschema: Persistence{{columns={listed}, "
                         f"features=[]}}\nreason: {reason}", rule="key-format", pos=pos)


def _map_key_not_string(spark_type: str) -> bool:
    """Whether a Spark type is or holds a MAP whose keys are not strings."""
    from ..connectors.formats import split_type_args

    text = spark_type.strip()
    head, _, inner = text.partition("<")
    if not inner:
        return False
    args = split_type_args(inner[:-1]) if head.lower() != "struct" else [
        part.split(":", 1)[1] for part in split_type_args(inner[:-1]) if ":" in part]
    if head.lower() == "map" and args[0].strip().lower() != "string":
        return True
    return any(_map_key_not_string(a) for a in args)


def _nested_base(spark_type: str) -> str:
    """ARRAY, MAP or STRUCT for a Spark type of that kind, which ksqlDB's DELIMITED format cannot hold; else ""."""
    head = spark_type.lower().split("<")[0].strip()
    return {"array": "ARRAY", "map": "MAP", "struct": "STRUCT"}.get(head, "")


def _find(columns: list[ColumnInfo], name: str) -> Optional[ColumnInfo]:
    return next((c for c in columns if c.name.casefold() == name.casefold()), None)


def _kind(stmt: ast.CreateSource, style: str, connector: str, changelog: Optional[str], keys: list[str]) -> str:
    if style != "flink":
        return stmt.kind
    # Flink: a table with a primary key on an upsert/changelog connector is a TABLE, anything else a STREAM.
    if connector == "jdbc":  # a table in a database, with a primary key or without
        return "TABLE"
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
        if stmt.dialect == "ksql":
            check_timestamp_column(col.name, col.type, props, stmt.pos)
        return col.name, None
    return None, None


def check_timestamp_column(name: str, type_: str, props: dict, pos) -> None:
    """ksqlDB's rule for the column its ``TIMESTAMP`` property names: a BIGINT of milliseconds, a TIMESTAMP, or
    text in the ``TIMESTAMP_FORMAT`` given (``connectors.time_formats``)."""
    if type_ in ("bigint", "timestamp"):
        return
    if type_ == "string" and "timestamp_format" in props:
        try:
            check_pattern(str(props["timestamp_format"]))
        except ValueError as err:
            raise StatementError(f"TIMESTAMP_FORMAT '{props['timestamp_format']}': {err}", rule="timestamp-format",
                                 pos=pos) from None
        return
    raise StatementError(f"Timestamp column, `{name.upper()}`, should be LONG(INT64), TIMESTAMP, or a String with a "
                         "timestamp_format specified", rule="timestamp-column", pos=pos)


def watermark_delay_ms(expr: ast.Expr) -> int:
    """``col`` -> 0, ``col - INTERVAL 'n' UNIT`` -> n in ms."""
    if isinstance(expr, ast.BinaryOp) and expr.op == "-" and isinstance(expr.right, ast.Interval):
        return expr.right.millis
    if isinstance(expr, ast.Column):
        return 0
    raise StatementError(
        "WATERMARK FOR supports `col` or `col - INTERVAL ...`", rule="watermark-expression", pos=getattr(expr, "pos", None)
    )


WINDOW_TYPES = ("TUMBLING", "HOPPING", "SESSION")


def _declared_window(props: dict, pos) -> Optional[tuple[str, int]]:
    """ksqlDB's ``WINDOW_TYPE`` (and ``WINDOW_SIZE``) of a source whose record keys hold their window, as
    ``SourceInfo.window``: (type, size ms; 0 for SESSION)."""
    kind, size = props.get("window_type"), props.get("window_size")
    if kind is None:
        if size is not None:
            raise StatementError("'WINDOW_SIZE' needs 'WINDOW_TYPE'", rule="window-type", pos=pos)
        return None
    kind = str(kind).upper()
    if kind not in WINDOW_TYPES:
        raise StatementError(f"WINDOW_TYPE '{kind}' is not one of {', '.join(WINDOW_TYPES)}", rule="window-type", pos=pos)
    if kind == "SESSION":
        if size is not None:
            raise StatementError("'WINDOW_SIZE' should not be set for SESSION windows.", rule="window-type", pos=pos)
        return kind, 0
    if size is None:
        raise StatementError(f"{kind} windows require 'WINDOW_SIZE' to be provided in the WITH clause. For example: "
                             "'WINDOW_SIZE'='10 SECONDS'", rule="window-type", pos=pos)
    try:
        return kind, interval_ms(str(size))
    except ValueError:
        unit = str(size).split()[-1] if len(str(size).split()) == 2 else ""
        why = f"Unknown time unit: '{unit.upper()}'" if unit else "write it as '10 SECONDS'"
        raise StatementError(f"Configuration WINDOW_SIZE is invalid: Invalid duration: '{size}'. {why}",
                             rule="window-type", pos=pos) from None
