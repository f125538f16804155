"""A topic's schema read from its records, for a Lenses query over a topic no statement declared.

Lenses reads such a topic by the schema it inferred from the topic's records (for JSON, from the first
message whose value is an object) and shows it in its catalog. Here the first ``SAMPLE`` records decide:
- the value: JSON objects give one column per field, in the order first seen, typed from the values seen
  (a whole number BIGINT, a fraction DOUBLE, a number seen both ways DOUBLE, true/false BOOLEAN, text STRING,
  an object a STRUCT of its fields, a list an ARRAY of its elements' type; a field never seen with a value
  STRING); bare JSON values (``42``, ``"a"``) give one primitive column ``_value`` (an unwrapped JSON value);
  anything else is text: ``_value STRING`` in the KAFKA format;
- the key: JSON objects give one key column per field (a JSON key); anything else is the text key ``_key
  STRING``.
A topic that does not exist, or holds no record, has no schema to infer: the query is refused.
"""
from __future__ import annotations

import json
from typing import Optional, Sequence

from .catalog import ColumnInfo, SourceInfo

SAMPLE = 100  # records read to infer a schema

_UNSEEN = "void"  # a field seen only as null so far


def infer_source(name: str, topic: str, records: Sequence[tuple[Optional[bytes], Optional[bytes]]]) -> SourceInfo:
    """A stream over ``topic``, named ``name``, with the columns ``records`` (key, value) imply."""
    keys = [k for k, _ in records if k is not None]
    values = [v for _, v in records if v is not None]
    key_fields = _object_fields(keys)
    key_columns = [ColumnInfo(n, t, "key") for n, t in key_fields] if key_fields else [ColumnInfo("_key", "string", "key")]
    props: dict = {"lenses.key.format": "JSON" if key_fields else "STRING", "inferred": "true"}
    value_fields = _object_fields(values)
    if value_fields:
        value_format, value_columns = "JSON", [ColumnInfo(n, t, "value") for n, t in value_fields]
    else:
        parsed = _parsed(values)
        if parsed is not None and parsed:
            value_format, value_columns = "JSON", [ColumnInfo("_value", _spark(_merged(map(_type_of, parsed))), "value")]
            props["wrap_single_value"] = "false"  # the value is that JSON value itself
        else:
            value_format, value_columns = "KAFKA", [ColumnInfo("_value", "string", "value")]
    return SourceInfo(name=name, kind="STREAM", topic=topic, columns=tuple(key_columns + value_columns),
                      key_columns=tuple(c.name for c in key_columns), value_format=value_format,
                      key_format="JSON" if key_fields else "KAFKA", properties=tuple(sorted(props.items())),
                      dialect="lenses")


def _parsed(raw: Sequence[bytes]) -> Optional[list]:
    """Every text parsed as JSON, or None when one is not JSON."""
    out = []
    for text in raw:
        try:
            out.append(json.loads(text))
        except (ValueError, UnicodeDecodeError):
            return None
    return out


def _object_fields(raw: Sequence[bytes]) -> list[tuple[str, str]]:
    """The (field, Spark type) of JSON objects, when every text is one (and there is at least one)."""
    parsed = _parsed(raw)
    if not parsed or not all(isinstance(p, dict) for p in parsed):
        return []
    merged = _merged(map(_type_of, parsed))
    return [(n, _spark(t)) for n, t in merged[1]]


_SCALARS = {bool: "boolean", int: "bigint", float: "double", str: "string"}  # by exact type: a bool is no int here


def _type_of(value) -> object:
    """A JSON value's type: a name, ('struct', [(field, type)...]) or ('array', element type)."""
    if value is None:
        return _UNSEEN
    if isinstance(value, dict):
        return ("struct", [(k, _type_of(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("array", _merged(map(_type_of, value)))
    return _SCALARS.get(type(value), "string")


def _merged(types) -> object:
    """One type for values seen with ``types``: struct fields merged by name (in the order first seen),
    array elements merged, BIGINT and DOUBLE widened to DOUBLE, any other disagreement STRING."""
    out: object = _UNSEEN
    for t in types:
        out = _merge(out, t)
    return out


def _merge(a, b):
    if a == _UNSEEN or a == b:
        return b
    if b == _UNSEEN:
        return a
    if isinstance(a, str) and isinstance(b, str) and {a, b} == {"bigint", "double"}:
        return "double"
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] == "struct":
        fields = dict(a[1])
        for name, t in b[1]:
            fields[name] = _merge(fields.get(name, _UNSEEN), t)
        return ("struct", list(fields.items()))
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] == "array":
        return ("array", _merge(a[1], b[1]))
    return "string"


def _spark(t) -> str:
    """A merged type as Spark DDL."""
    if t == _UNSEEN:
        return "string"
    if isinstance(t, str):
        return t
    if t[0] == "array":
        return f"array<{_spark(t[1])}>"
    return "struct<" + ",".join(f"`{n}`:{_spark(ft)}" for n, ft in t[1]) + ">"


def is_inferred(source: SourceInfo) -> bool:
    """Whether ``source``'s columns were inferred from its records (DESCRIBE says so)."""
    return dict(source.properties).get("inferred") == "true"


def first_pairs(store, topic: str) -> list[tuple[Optional[bytes], Optional[bytes]]]:
    """The first ``SAMPLE`` (key, value) records of ``topic`` in a topic store (embedded or Kafka); none when
    the store has no such topic."""
    if not store.exists(topic):
        return []
    return [(r.key, r.value) for r in store.first_records(topic, SAMPLE)]
