"""Value formats: their names, and the Avro and protobuf conversions Spark cannot do without its (Maven-only)
Avro and protobuf packages.

- ``JSON`` (default): an object per record; fields match columns by name.
- ``DELIMITED`` (ksqlDB) or ``csv`` (Flink): the columns in declared order, separated by ``VALUE_DELIMITER``
  (default ``,``).
- ``AVRO``: plain Avro binary (no registry framing) written with the schema in the ``VALUE_AVRO_SCHEMA``
  property or, without it, the schema streamjoin derives from the columns (a record of nullable fields,
  as ksqlDB writes them).
- ``PROTOBUF`` / ``PROTOBUF_NOSR`` (ksqlDB): a proto3 message derived from the columns
  (``connectors.protobuf_format``).
- ``KAFKA`` (ksqlDB): the value is one primitive column, written as its text, as streamjoin writes a KAFKA key
  (ksqlDB joins and groups no source in it: ``validate.rules``).
- ``debezium-json`` (Flink): a changelog envelope; see ``lower.decode``.

Avro records are turned into JSON text (read) and built from rows (write) in Python with fastavro, in
Arrow batches; a record fastavro cannot read gets an error instead, which goes to the dead letters.
"""
from __future__ import annotations

import base64
import io
import json
import re
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any, Callable, Iterator, Optional

import pyarrow as pa

DEFAULT_DELIMITER = ","  # between the columns of a DELIMITED value or key unless the declaration names another
VALUE_FORMATS = {"JSON": "JSON", "DELIMITED": "DELIMITED", "CSV": "DELIMITED", "AVRO": "AVRO",
                 "DEBEZIUM-JSON": "DEBEZIUM-JSON", "PROTOBUF": "PROTOBUF", "PROTOBUF_NOSR": "PROTOBUF", "KAFKA": "KAFKA",
                 "JSON_SR": "JSON"}  # JSON_SR: JSON, whose reads skip a schema registry's framing (``framed``)
KAFKA_VALUE_TYPES = ("int", "integer", "bigint", "double", "string", "binary")  # one column, a primitive
BINARY_FORMATS = ("AVRO", "PROTOBUF")  # read as JSON text of their record first (``binary_as_json``)
BINARY_ERROR = "__binary_error"  # why a binary value could not be read
REGISTRY_FRAME = 5  # bytes a Schema Registry serializer writes before a value: a zero byte and a 4-byte schema id
SCHEMA_INFERRED = ("AVRO", "PROTOBUF")  # ksqlDB: columns from a schema registry when none are declared (JSON_SR too)


def window_bytes(kind: str) -> int:
    """How many bytes of window follow a windowed key (Kafka Streams' windowed serializers): a time window's start,
    8; a session's end and start, 16."""
    return 16 if kind.upper() == "SESSION" else 8


def normalise_format(name: str) -> Optional[str]:
    return VALUE_FORMATS.get(name.upper())


def framed(properties: dict, part: str) -> bool:
    """Whether a source's ``part`` ("key" or "value") was declared JSON_SR: JSON that a Schema Registry's serializer
    writes behind a zero byte and a 4-byte schema id. There is no registry here: such a value or key is read with or
    without that framing (JSON text never starts with a zero byte) and written without it, as plain JSON."""
    declared = properties.get(f"{part}_format") or properties.get(f"{part}.format") or properties.get("format")
    return str(declared or "").upper() == "JSON_SR"


def infers_columns(value_format: str, properties: dict) -> bool:
    """Whether ksqlDB would take a source's value columns from a schema registry when none are declared."""
    return value_format.upper() in SCHEMA_INFERRED or framed(properties, "value")


def delimiter_of(properties: dict, part: str = "value") -> str:
    """The delimiter between a DELIMITED value's (``part`` "key": key's) columns: ksqlDB's VALUE_DELIMITER
    (KEY_DELIMITER), Flink's csv.field-delimiter, else a comma; TAB and SPACE by name."""
    value = str(properties.get(f"{part}_delimiter") or part == "value" and properties.get("csv.field-delimiter") or
                DEFAULT_DELIMITER)
    return {"TAB": "\t", "SPACE": " "}.get(value.upper(), value)


# ---------------------------------------------------------------------- Avro schemas

_SIMPLE = {"int": "int", "integer": "int", "smallint": "int", "tinyint": "int", "bigint": "long", "string": "string",
           "boolean": "boolean", "double": "double", "float": "float", "binary": "bytes",
           "timestamp": {"type": "long", "logicalType": "timestamp-millis"},
           "date": {"type": "int", "logicalType": "date"}, "time(3)": {"type": "int", "logicalType": "time-millis"}}


def split_type_args(text: str) -> list[str]:
    """The arguments of a type's text: ``a,map<b,c>`` -> [``a``, ``map<b,c>``] (commas outside brackets and
    backticks)."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch in "<(":
            depth += 1
        elif not quoted and ch in ">)":
            depth -= 1
        elif not quoted and ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def struct_fields(spark: str) -> list[tuple[str, str]]:
    """(name, type) of each field of a Spark struct type; [] for any other type."""
    if not spark.lower().startswith("struct<"):
        return []
    fields = []
    for part in split_type_args(spark[len("struct<"):-1]):
        name, _, type_ = part.partition(":")
        fields.append((name.strip().strip("`").replace("``", "`"), type_.strip()))
    return fields


def avro_type(spark_type: str, name: str):
    """The Avro type of a Spark DDL type (without the null union)."""
    t = spark_type.strip()
    low = t.lower()
    if low in _SIMPLE:
        return _SIMPLE[low]
    m = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", low)
    if m:
        return {"type": "bytes", "logicalType": "decimal", "precision": int(m[1]), "scale": int(m[2])}
    if low.startswith("array<"):
        return {"type": "array", "items": _nullable(avro_type(t[6:-1], name + "_item"))}
    if low.startswith("map<"):
        _, value = split_type_args(t[4:-1])
        return {"type": "map", "values": _nullable(avro_type(value, name + "_value"))}
    if low.startswith("struct<"):
        fields = []
        for part in split_type_args(t[7:-1]):
            field, _, ftype = part.partition(":")
            field = field.strip().strip("`")
            fields.append({"name": field, "type": _nullable(avro_type(ftype, f"{name}_{field}")), "default": None})
        return {"type": "record", "name": name, "fields": fields}
    raise ValueError(f"no Avro type for {spark_type}")


def _nullable(t) -> list:
    return ["null", t]


def derived_avro_schema(record_name: str, columns: list[tuple[str, str]]) -> dict:
    """A record with one nullable field per ``(name, Spark type)``, in order."""
    return {"type": "record", "name": re.sub(r"\W", "_", record_name) or "Row", "fields": [
        {"name": name, "type": _nullable(avro_type(spark_type, f"{record_name}_{name}")), "default": None}
        for name, spark_type in columns]}


def avro_schema_text(properties: dict, record_name: str, columns: list[tuple[str, str]]) -> str:
    explicit = properties.get("value_avro_schema") or properties.get("avro-confluent.schema") or properties.get("avro.schema")
    return str(explicit) if explicit else json.dumps(derived_avro_schema(record_name, columns))


def key_avro_schema(record_name: str, columns: list[tuple[str, str]]) -> str:
    """The Avro schema of an AVRO key: one column's own type (a primitive, or a record for a STRUCT), else a
    record of the key columns (as ksqlDB writes single and multi-column Avro keys)."""
    if len(columns) == 1:
        return json.dumps(avro_type(columns[0][1], re.sub(r"\W", "_", record_name) + "_key"))
    return json.dumps(derived_avro_schema(f"{record_name}_key", columns))


def key_writer_schema(fmt: str, record_name: str, columns: list[tuple[str, str]]) -> Optional[tuple[str, str]]:
    """(format, schema text) keys of a binary key format are written with: AVRO's ``key_avro_schema``, or the
    key columns a PROTOBUF message is derived from (ksqlDB wraps a protobuf key, even a single column, in a
    message of its columns); None for a text key format."""
    if fmt == "AVRO":
        return fmt, key_avro_schema(record_name, columns)
    if fmt == "PROTOBUF":
        return fmt, json.dumps(columns)
    return None


def binary_keys_to_json(writer: tuple[str, str]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function: each binary ``key`` (``key_writer_schema``) becomes JSON text, read then as a
    JSON key: one key column's value itself, several as an object. A key that does not read stays as it is, and
    fails as a JSON key: its record is dead-lettered."""

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        read, _ = _key_codec(writer)
        for batch in batches:
            index = batch.schema.get_field_index("key")
            keys = []
            for raw in batch.column(index).to_pylist():
                try:
                    keys.append(None if raw is None else read(raw))
                except Exception:  # noqa: BLE001 - any bytes the schema does not read
                    keys.append(raw)
            yield batch.set_column(index, "key", pa.array(keys, pa.binary()))

    return convert


def _key_codec(writer: tuple[str, str]) -> tuple[Callable[[bytes], bytes], Callable[[Any], bytes]]:
    """(read, write) of one binary key (``key_writer_schema``): its bytes as the JSON text a JSON key reader takes,
    and a key's value (one key column's own value, or an object of several) as its bytes."""
    fmt, schema_text = writer
    if fmt == "PROTOBUF":
        from .protobuf_format import message_class, protobuf_value, protobuf_value_as_json

        columns = [tuple(c) for c in json.loads(schema_text)]
        message = message_class(columns)
        if len(columns) > 1:
            return (lambda raw: protobuf_value_as_json(columns, raw, message)), (lambda key: protobuf_value(message, key))
        return ((lambda raw: json.dumps(next(iter(json.loads(protobuf_value_as_json(columns, raw, message)).values())))
                 .encode()),
                lambda key: protobuf_value(message, {columns[0][0]: key}))
    import fastavro

    schema = fastavro.parse_schema(json.loads(schema_text))
    return (lambda raw: _avro_json(schema, raw)), (lambda key: avro_bytes(schema, key))


def key_as_json(writer: tuple[str, str], raw: bytes) -> bytes:
    """One binary key (``key_writer_schema``) as JSON text, as ksqlDB's tests show it: an Avro key's value, a
    protobuf key's message (an object of its columns)."""
    fmt, schema_text = writer
    if fmt == "PROTOBUF":
        from .protobuf_format import protobuf_value_as_json

        return protobuf_value_as_json([tuple(c) for c in json.loads(schema_text)], raw)
    return _key_codec(writer)[0](raw)


def _avro_json(schema, raw: bytes) -> bytes:
    import fastavro

    return json.dumps(fastavro.schemaless_reader(io.BytesIO(raw), schema), default=json_default).encode()


def json_keys_to_binary(writer: tuple[str, str],
                        suffix: int = 0) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function: each ``key`` given as JSON text (``lower.sink``: one column's value itself,
    several as an object) is written in the binary key format (``key_writer_schema``). A NULL key is written as
    no key, as ksqlDB's serializers write a null. ``suffix``: the key's last bytes are its window
    (``window_bytes``), kept after the written key, as Kafka Streams' windowed serializers wrap the key's own."""

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        _, write = _key_codec(writer)

        def written(raw: Optional[bytes]) -> Optional[bytes]:
            if raw is not None and suffix:
                key = json.loads(raw[:-suffix] or b"null")
                return (b"" if key is None else write(key)) + raw[-suffix:]
            key = None if raw is None else json.loads(raw)
            return None if key is None else write(key)

        for batch in batches:
            index = batch.schema.get_field_index("key")
            keys = [written(raw) for raw in batch.column(index).to_pylist()]
            yield batch.set_column(index, "key", pa.array(keys, pa.binary()))

    return convert


def avro_bytes(schema, value) -> bytes:
    """``value`` in Avro's binary encoding under ``schema`` (parsed), without any framing."""
    import fastavro

    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, schema, value)
    return buffer.getvalue()


# ---------------------------------------------------------------------- Avro <-> JSON text

def json_default(value):
    if isinstance(value, datetime):
        value = value.astimezone(timezone.utc) if value.tzinfo else value
        return value.strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d}"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, time):
        return value.isoformat(timespec="milliseconds")
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON")


def ksql_json_default(value):
    """``json_default`` as ksqlDB's JSON serializer writes a time: a TIMESTAMP as milliseconds since 1970, a DATE
    as days, a TIME as milliseconds since midnight (the conformance runner shows a ksqlDB sink's Avro or Protobuf
    record so)."""
    if isinstance(value, datetime):
        value = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return (value - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(milliseconds=1)
    if isinstance(value, date):
        return (value - date(1970, 1, 1)).days
    if isinstance(value, time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    return json_default(value)


def avro_values_to_json(schema_text: str, columns: list[str], source: str,
                        unwrapped: bool = False) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function: each Avro ``value`` becomes JSON text of its record, fields renamed to
    the declared ``columns`` (matched case-insensitively), or, ``unwrapped``, of the one column's value it is;
    ``BINARY_ERROR`` says why a value could not be read."""

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import fastavro

        schema = fastavro.parse_schema(json.loads(schema_text))
        names = {c.casefold(): c for c in columns}
        for batch in batches:
            values, errors = [], []
            for raw in batch.column(batch.schema.get_field_index("value")).to_pylist():
                if raw is None:
                    values.append(None)
                    errors.append(None)
                    continue
                try:
                    record = fastavro.schemaless_reader(io.BytesIO(raw), schema)
                    if not unwrapped:
                        if not isinstance(record, dict):
                            raise ValueError("the Avro value is not a record")
                        record = {names.get(k.casefold(), k): v for k, v in record.items()}
                    values.append(json.dumps(record, default=json_default).encode())
                    errors.append(None)
                except Exception as err:  # noqa: BLE001 - any decoding failure is this record's dead letter
                    values.append(raw)  # kept for the dead letter (a null would read as a tombstone)
                    errors.append(f"the value is not AVRO with the schema of {source} ({type(err).__name__})")
            index = batch.schema.get_field_index("value")
            batch = batch.set_column(index, "value", pa.array(values, pa.binary()))
            yield batch.append_column(BINARY_ERROR, pa.array(errors, pa.string()))

    return convert


def value_as_json(writer: tuple[str, str], raw: bytes, default=json_default) -> bytes:
    """One value of a binary format as the JSON text of its record, given its writer (``writer_schema``);
    ``default`` writes what JSON has no type for (``json_default``, ``ksql_json_default``)."""
    fmt, schema_text = writer
    if fmt == "PROTOBUF":
        from .protobuf_format import protobuf_value_as_json

        return protobuf_value_as_json([tuple(c) for c in json.loads(schema_text)], raw, default=default)
    import fastavro

    record = fastavro.schemaless_reader(io.BytesIO(raw), fastavro.parse_schema(json.loads(schema_text)))
    return json.dumps(record, default=default).encode()


UNWRAPPABLE = ("JSON", "AVRO")  # value formats whose one column may be written as the value itself


def single_value_unwrapped(fmt: str, properties: dict, columns: list) -> bool:
    """ksqlDB's ``WRAP_SINGLE_VALUE=false`` on a JSON or AVRO value of one column: the value is that column's value
    itself (``"a"``, an Avro string), not a record holding it (``{"NAME": "a"}``)."""
    wrap = str(properties.get("wrap_single_value", "true")).strip("'\"").lower()
    return wrap == "false" and len(columns) == 1 and fmt in UNWRAPPABLE


def writer_schema(fmt: str, properties: dict, record_name: str, columns: list[tuple[str, str]]) -> Optional[tuple[str, str]]:
    """(format, schema text) values of a binary format are written with: an Avro schema (``avro_schema_text``; of
    an unwrapped value, its one column's type, NULL allowed, as ksqlDB writes an optional anonymous value), or the
    columns a protobuf message is derived from; None for a text format."""
    if fmt == "AVRO" and single_value_unwrapped(fmt, properties, columns) and not properties.get("value_avro_schema"):
        name, type_ = columns[0]
        return fmt, json.dumps(_nullable(avro_type(type_, re.sub(r"\W", "_", f"{record_name}_{name}"))))
    if fmt == "AVRO":
        return fmt, avro_schema_text(properties, record_name, columns)
    if fmt == "PROTOBUF":
        return fmt, json.dumps(columns)
    return None


def binary_as_json(writer: tuple[str, str], columns: list[str], source: str, unwrapped: bool = False):
    """A ``mapInArrow`` function: each binary ``value`` (``writer_schema``) becomes JSON text of its record (of
    the one column's value, ``unwrapped``); ``BINARY_ERROR`` says why a value could not be read."""
    fmt, schema_text = writer
    if fmt == "PROTOBUF":
        from .protobuf_format import protobuf_values_to_json

        return protobuf_values_to_json([tuple(c) for c in json.loads(schema_text)], source, BINARY_ERROR)
    return avro_values_to_json(schema_text, columns, source, unwrapped)


def rows_to_binary(writer: tuple[str, str], row_column: str):
    """A ``mapInArrow`` function replacing the struct column ``row_column`` by its binary ``value``."""
    fmt, schema_text = writer
    if fmt == "PROTOBUF":
        from .protobuf_format import rows_to_protobuf

        return rows_to_protobuf([tuple(c) for c in json.loads(schema_text)], row_column)
    return rows_to_avro(schema_text, row_column)


def _plain(value, type_: pa.DataType):
    """A value Arrow gives as Python (``to_pylist``) as the Avro writer takes it: a MAP's (key, value) pairs a dict,
    in nested values too."""
    if value is None:
        return None
    if pa.types.is_map(type_):
        return {k: _plain(v, type_.item_type) for k, v in value}
    if pa.types.is_struct(type_):
        return {f.name: _plain(value[f.name], f.type) for f in type_}
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return [_plain(v, type_.value_type) for v in value]
    return value


def rows_to_avro(schema_text: str, row_column: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function replacing the column ``row_column`` (the struct of a value's columns, or the one
    column of an unwrapped value) by its Avro binary ``value`` (null rows stay null: tombstones)."""

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import fastavro

        schema = fastavro.parse_schema(json.loads(schema_text))
        for batch in batches:
            index = batch.schema.get_field_index(row_column)
            out = []
            column = batch.column(index)
            for row in column.to_pylist():
                if row is None:
                    out.append(None)
                    continue
                buffer = io.BytesIO()
                fastavro.schemaless_writer(buffer, schema, _plain(row, column.type))
                out.append(buffer.getvalue())
            yield batch.set_column(index, "value", pa.array(out, pa.binary()))

    return convert


# ---------------------------------------------------------------------- records written by streamjoin itself

def encode_key(key: Any, source=None) -> Optional[bytes]:
    """A record key as streamjoin writes one it is given: an object or array as JSON, a scalar as its text
    (KAFKA), or as JSON when ``source``'s key format is JSON (ksqlDB writes a JSON key unwrapped: ``"a"``); in
    Avro (``key_avro_schema``) when it is AVRO; as a message of the key columns when it is PROTOBUF (an object
    of them, or one column's value)."""
    if key is None:
        return None
    if source is not None and source.key_format == "PROTOBUF":
        from .protobuf_format import value_of

        columns = [(c.name, c.type) for c in source.columns if c.name in source.key_columns]
        return value_of(columns, key if isinstance(key, dict) else {columns[0][0]: key})
    if source is not None and source.key_format == "AVRO":
        import fastavro

        columns = [(c.name, c.type) for c in source.columns if c.name in source.key_columns]
        schema = json.loads(key_avro_schema(source.name, columns))
        if isinstance(key, dict) and schema.get("type") == "record":
            given = {k.casefold(): v for k, v in key.items()}
            key = {f["name"]: given.get(f["name"].casefold()) for f in schema["fields"]}
        return avro_bytes(fastavro.parse_schema(schema), key)
    if isinstance(key, (dict, list)) or (source is not None and source.key_format == "JSON"):
        return json.dumps(key).encode()
    if isinstance(key, bool):
        return b"true" if key else b"false"
    return str(key).encode()


def encode_value(value: Any, source=None) -> Optional[bytes]:
    """A record value (an object of column values) in ``source``'s value format: JSON by default; a string
    for a DELIMITED, AVRO or PROTOBUF topic is the raw value (bad input for a binary one); an object for a
    DELIMITED topic is its columns in declared order, for an AVRO one a record of the source's Avro schema,
    for a PROTOBUF one the message derived from its columns."""
    if value is None:
        return None
    fmt = source.value_format if source is not None else "JSON"
    if isinstance(value, str) and fmt in ("DELIMITED", *BINARY_FORMATS):
        return value.encode()
    if fmt == "PROTOBUF":
        from .protobuf_format import value_of

        return value_of([(c.name, c.type) for c in source.value_columns], value)
    if fmt == "KAFKA":
        if isinstance(value, dict):
            value = next(iter(value.values()), None)
        return None if value is None else encode_key(value)
    if fmt == "DELIMITED":
        given = {k.casefold(): v for k, v in value.items()}
        cells = ["" if given.get(c.name.casefold()) is None else str(given[c.name.casefold()]) for c in source.value_columns]
        return delimiter_of(dict(source.properties)).join(cells).encode()
    if fmt == "AVRO":
        import fastavro

        columns = [(c.name, c.type) for c in source.value_columns]
        schema = json.loads(writer_schema(fmt, dict(source.properties), source.name, columns)[1])
        if single_value_unwrapped(fmt, dict(source.properties), columns):  # the one column's value itself
            buffer = io.BytesIO()
            fastavro.schemaless_writer(buffer, fastavro.parse_schema(schema), _avro_value(value, columns[0][1]))
            return buffer.getvalue()
        given = {k.casefold(): v for k, v in value.items()}
        record = {f["name"]: given.get(f["name"].casefold()) for f in schema["fields"]}
        types = {f["name"]: next((t for c, t in columns if c.casefold() == f["name"].casefold()), "") for f in schema["fields"]}
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, fastavro.parse_schema(schema), _avro_ready(record, types))
        return buffer.getvalue()
    return json.dumps(value).encode()


def _avro_ready(record: dict, types: dict) -> dict:
    """A case's value as the Avro writer takes it (``_avro_value``), in nested values too."""
    return {name: _avro_value(value, types.get(name, "")) for name, value in record.items()}


def _avro_value(value, type_: str):
    """``value`` of Spark type ``type_`` ready for the Avro writer: a timestamp's or a date's text a datetime or a
    date, a number's text (as ksqlDB's tests give times: ms, days) that number, a DECIMAL a Decimal, a STRUCT's
    fields under the declared names (given in any case, as ksqlDB reads them)."""
    if value is None:
        return None
    low = type_.lower()
    if low.startswith("decimal") and isinstance(value, (int, float, str)):
        return Decimal(str(value))
    if low == "binary" and isinstance(value, str):  # BYTES given as JSON gives them: base64
        return base64.b64decode(value)
    if low in ("timestamp", "date", "time(3)") and isinstance(value, str):
        if value.strip().lstrip("-").isdigit():
            return int(value)
        if low == "time(3)":
            return time.fromisoformat(value)
        if low == "timestamp":
            return datetime.fromisoformat(value.replace("Z", "+00:00")).replace(tzinfo=timezone.utc)
        return date.fromisoformat(value)
    fields = struct_fields(type_)
    if fields and isinstance(value, dict):
        given = {k.casefold(): k for k in value}
        return {n: _avro_value(value[given[n.casefold()]], t) for n, t in fields if n.casefold() in given}
    if low.startswith("array<") and isinstance(value, list):
        return [_avro_value(v, type_[len("array<"):-1]) for v in value]
    if low.startswith("map<") and isinstance(value, dict):
        value_type = split_type_args(type_[len("map<"):-1])[1]
        return {k: _avro_value(v, value_type) for k, v in value.items()}
    return value