"""ksqlDB's ``PROTOBUF`` and ``PROTOBUF_NOSR`` value formats, without a Schema Registry.

The message type is derived from the columns, as ksqlDB derives it: one proto3 field per column, numbered
from 1 in declared order; a STRUCT is a nested message, an ARRAY a repeated field, a MAP a map field, a
DECIMAL ``confluent.type.Decimal`` (unscaled big-endian bytes, precision, scale), a TIMESTAMP
``google.protobuf.Timestamp``, a DATE ``google.type.Date``, a TIME ``google.type.TimeOfDay``. Proto3 scalars have no null: a null column is
written as its type's default and reads back as it (``0``, ``""``, ``false``), as in ksqlDB; a null STRUCT
(a message field) stays null. Values are written without the registry's framing; a value that carries it
(a zero magic byte, a 4-byte schema id and the message indexes, as Confluent's serializer writes) is read
too: a protobuf message never starts with a zero byte.

Messages are built with the ``protobuf`` package from descriptors made at run time (no generated code), and
turned into JSON text of their columns for the JSON decoder (``lower.decode``), as Avro values are.
"""
from __future__ import annotations

import base64
import datetime as dt
import json
import re
from decimal import Decimal
from typing import Any, Callable, Iterator

import pyarrow as pa

from .formats import json_default, split_type_args

MESSAGE = "ConnectDefault1"
PACKAGE = "streamjoin.generated"
_SCALARS = {  # Spark DDL type -> FieldDescriptorProto type name
    "int": "TYPE_INT32", "integer": "TYPE_INT32", "smallint": "TYPE_INT32", "tinyint": "TYPE_INT32",
    "bigint": "TYPE_INT64", "string": "TYPE_STRING", "boolean": "TYPE_BOOL", "double": "TYPE_DOUBLE",
    "float": "TYPE_FLOAT", "binary": "TYPE_BYTES",
}
_WELL_KNOWN = {"timestamp": ".google.protobuf.Timestamp", "date": ".google.type.Date", "time(3)": ".google.type.TimeOfDay"}
DECIMAL = ".confluent.type.Decimal"
EPOCH = dt.datetime(1970, 1, 1)


def _struct_fields(spark_type: str) -> list[tuple[str, str]]:
    fields = []
    for part in split_type_args(spark_type.strip()[7:-1]):
        name, _, ftype = part.partition(":")
        fields.append((name.strip().strip("`"), ftype.strip()))
    return fields


def _camel(name: str) -> str:
    """protobuf's name for a map field's entry type: the field name in CamelCase, then ``Entry``."""
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"_+", name) if p) + "Entry"


def _support_files():
    """The descriptors every derived message may use: Timestamp, Date, TimeOfDay and Confluent's Decimal."""
    from google.protobuf import descriptor_pb2, timestamp_pb2

    timestamp = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp)
    date = descriptor_pb2.FileDescriptorProto(name="google/type/date.proto", package="google.type", syntax="proto3")
    decimal = descriptor_pb2.FileDescriptorProto(name="confluent/type/decimal.proto", package="confluent.type",
                                                 syntax="proto3")
    time_of_day = descriptor_pb2.FileDescriptorProto(name="google/type/timeofday.proto", package="google.type",
                                                     syntax="proto3")
    for file, message, fields in ((date, "Date", [("year", "TYPE_INT32"), ("month", "TYPE_INT32"), ("day", "TYPE_INT32")]),
                                  (time_of_day, "TimeOfDay", [("hours", "TYPE_INT32"), ("minutes", "TYPE_INT32"),
                                                              ("seconds", "TYPE_INT32"), ("nanos", "TYPE_INT32")]),
                                  (decimal, "Decimal", [("value", "TYPE_BYTES"), ("precision", "TYPE_UINT32"),
                                                        ("scale", "TYPE_INT32")])):
        proto = file.message_type.add(name=message)
        for number, (name, kind) in enumerate(fields, 1):
            proto.field.add(name=name, number=number, type=getattr(descriptor_pb2.FieldDescriptorProto, kind),
                            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    return [timestamp, date, time_of_day, decimal]


def message_class(columns: list[tuple[str, str]]):
    """The message class of ``(name, Spark type)`` columns (module docstring). Raises ValueError for a type
    protobuf cannot hold (an array of arrays)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="streamjoin_generated.proto", package=PACKAGE, syntax="proto3",
                                              dependency=["google/protobuf/timestamp.proto", "google/type/date.proto",
                                                          "google/type/timeofday.proto", "confluent/type/decimal.proto"])
    counter = [1]

    def add_fields(message, path: str, fields: list[tuple[str, str]]) -> None:
        for number, (name, spark_type) in enumerate(fields, 1):
            add_field(message, path, name, spark_type, number, F.LABEL_OPTIONAL)

    def add_field(message, path, name, spark_type, number, label) -> None:
        low = spark_type.strip().lower()
        field = message.field.add(name=name, number=number, label=label)
        if low in _SCALARS:
            field.type = getattr(F, _SCALARS[low])
        elif low in _WELL_KNOWN:
            field.type, field.type_name = F.TYPE_MESSAGE, _WELL_KNOWN[low]
        elif low.startswith("decimal"):
            field.type, field.type_name = F.TYPE_MESSAGE, DECIMAL
        elif low.startswith("array<"):
            if label == F.LABEL_REPEATED or low[6:].startswith(("array<", "map<")):
                raise ValueError(f"protobuf cannot hold {spark_type} (a repeated field of repeated values)")
            message.field.remove(field)
            add_field(message, path, name, spark_type.strip()[6:-1], number, F.LABEL_REPEATED)
        elif low.startswith("map<"):
            key, value = split_type_args(spark_type.strip()[4:-1])
            entry = message.nested_type.add(name=_camel(name))
            entry.options.map_entry = True
            add_field(entry, f"{path}.{entry.name}", "key", key, 1, F.LABEL_OPTIONAL)
            add_field(entry, f"{path}.{entry.name}", "value", value, 2, F.LABEL_OPTIONAL)
            field.type, field.type_name, field.label = F.TYPE_MESSAGE, f"{path}.{entry.name}", F.LABEL_REPEATED
        elif low.startswith("struct<"):
            counter[0] += 1
            nested = file.message_type.add(name=f"ConnectDefault{counter[0]}")
            add_fields(nested, f".{PACKAGE}.{nested.name}", _struct_fields(spark_type))
            field.type, field.type_name = F.TYPE_MESSAGE, f".{PACKAGE}.{nested.name}"
        else:
            raise ValueError(f"no protobuf type for {spark_type}")

    top = file.message_type.add(name=MESSAGE)
    add_fields(top, f".{PACKAGE}.{MESSAGE}", columns)
    pool = descriptor_pool.DescriptorPool()
    for support in _support_files():
        pool.Add(support)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{MESSAGE}"))


# ---------------------------------------------------------------------- reading

def _unframed(raw: bytes) -> bytes:
    """The message bytes of a value, past Confluent's framing when it has one: magic byte 0, a 4-byte
    schema id, then the message indexes (a zigzag varint count and as many varints; a single 0 byte for
    the first message)."""
    if not raw or raw[0] != 0:
        return raw
    position = 5
    count, position = _varint(raw, position)
    count = (count >> 1) ^ -(count & 1)
    for _ in range(max(count, 0)):
        _, position = _varint(raw, position)
    return raw[position:]


def _varint(raw: bytes, position: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = raw[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


def _python(message) -> dict:
    """A message's fields as Python values: scalars with their defaults, absent message fields as None."""
    out = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            out[field.name] = {k: _single(field.message_type.fields_by_name["value"], v) for k, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [_single(field, v) for v in value]
        elif field.message_type is not None and not message.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _single(field, value)
    return out


def _single(field, value):
    if field.message_type is None:
        return value
    name = field.message_type.full_name
    if name == "google.protobuf.Timestamp":
        return EPOCH + dt.timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)
    if name == "google.type.Date":
        return dt.date(value.year, value.month, value.day)
    if name == "google.type.TimeOfDay":
        return dt.time(value.hours, value.minutes, value.seconds, value.nanos // 1000)
    if name == "confluent.type.Decimal":
        return Decimal(int.from_bytes(value.value, "big", signed=True)).scaleb(-value.scale) if value.value else Decimal(0)
    return _python(value)


def protobuf_value_as_json(columns: list[tuple[str, str]], raw: bytes, message=None, default=json_default) -> bytes:
    """One value as the JSON text of its columns (``default``: as ``formats.value_as_json``)."""
    message = (message or message_class(columns))()
    message.ParseFromString(_unframed(raw))
    return json.dumps(_python(message), default=default).encode()


def protobuf_values_to_json(columns: list[tuple[str, str]], source: str, error_column: str
                            ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function: each protobuf ``value`` becomes the JSON text of its columns;
    ``error_column`` says why a value could not be read (the raw value is kept for its dead letter)."""

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        message = message_class(columns)
        for batch in batches:
            index = batch.schema.get_field_index("value")
            values, errors = [], []
            for raw in batch.column(index).to_pylist():
                try:
                    values.append(None if raw is None else protobuf_value_as_json(columns, raw, message))
                    errors.append(None)
                except Exception as err:  # noqa: BLE001 - any decoding failure is this record's dead letter
                    values.append(raw)
                    errors.append(f"the value is not PROTOBUF with the columns of {source} ({type(err).__name__})")
            batch = batch.set_column(index, "value", pa.array(values, pa.binary()))
            yield batch.append_column(error_column, pa.array(errors, pa.string()))

    return convert


# ---------------------------------------------------------------------- writing

def _fill(message, values: dict) -> None:
    """Set ``message``'s fields from ``values`` (matched by name, case-insensitively); a null leaves its field
    unset (its default)."""
    given = {str(k).casefold(): v for k, v in values.items()}
    for field in message.DESCRIPTOR.fields:
        value = given.get(field.name.casefold())
        if value is None:
            continue
        target = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            for k, v in (value.items() if isinstance(value, dict) else value):
                if v is None:
                    continue
                if value_field.message_type is None:
                    target[k] = v
                else:
                    _set_message(target[k], value_field, v)
        elif field.is_repeated:
            for item in value:
                if field.message_type is None:
                    target.append(_scalar(field, item))
                else:
                    _set_message(target.add(), field, item)
        elif field.message_type is not None:
            _set_message(target, field, value)
        else:
            setattr(message, field.name, _scalar(field, value))


def _scalar(field, value):
    if value is None:
        return {field.TYPE_STRING: "", field.TYPE_BOOL: False, field.TYPE_BYTES: b""}.get(field.type, 0)
    if field.type == field.TYPE_STRING:
        return str(value)
    if field.type == field.TYPE_BYTES and isinstance(value, str):  # BYTES given as JSON gives them: base64
        return base64.b64decode(value)
    return value


def _set_message(target, field, value) -> None:
    name = field.message_type.full_name
    if name == "google.protobuf.Timestamp":
        if isinstance(value, str):
            value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if isinstance(value, (int, float)):
            millis = int(value)
        else:
            moment = value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value.tzinfo else value
            millis = (moment - EPOCH) // dt.timedelta(milliseconds=1)
        target.seconds, target.nanos = millis // 1000, (millis % 1000) * 1_000_000
    elif name == "google.type.Date":
        day = dt.date.fromisoformat(value) if isinstance(value, str) else value
        if isinstance(day, int):
            day = dt.date(1970, 1, 1) + dt.timedelta(days=day)
        target.year, target.month, target.day = day.year, day.month, day.day
    elif name == "google.type.TimeOfDay":
        if isinstance(value, str) and not value.strip().isdigit():
            value = dt.time.fromisoformat(value)
        if isinstance(value, dt.time):
            value = ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
        millis = int(value)  # since midnight
        target.hours, target.minutes, target.seconds = millis // 3_600_000, millis // 60_000 % 60, millis // 1000 % 60
        target.nanos = millis % 1000 * 1_000_000
    elif name == "confluent.type.Decimal":
        number = Decimal(str(value))
        sign, digits, exponent = number.as_tuple()
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        scale = -int(exponent)
        target.value = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
        target.precision, target.scale = len(digits), scale
    else:
        target.SetInParent()  # present, even when none of its fields is set
        _fill(target, value)


def protobuf_value(message_type, values: dict) -> bytes:
    message = message_type()
    _fill(message, values)
    return message.SerializeToString()


def rows_to_protobuf(columns: list[tuple[str, str]], row_column: str
                     ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function replacing the struct column ``row_column`` by its protobuf ``value`` (null
    rows stay null: tombstones)."""

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        message = message_class(columns)
        for batch in batches:
            index = batch.schema.get_field_index(row_column)
            out = [None if row is None else protobuf_value(message, row) for row in batch.column(index).to_pylist()]
            yield batch.set_column(index, "value", pa.array(out, pa.binary()))

    return convert


def check_columns(columns: list[tuple[str, str]]) -> None:
    """Raise ValueError if the columns have no protobuf message type."""
    message_class(columns)


def value_of(columns: list[tuple[str, str]], values: Any) -> bytes:
    """One row (an object of column values) as a protobuf value."""
    return protobuf_value(message_class(columns), values)
