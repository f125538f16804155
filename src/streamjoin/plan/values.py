"""``INSERT INTO t [(cols)] VALUES (...), (...)``: the records a script appends to a stream or topic.

Every dialect has the statement (ksqlDB, Flink, Lenses, SQLstream), so a script can carry its own data. The
values are literals (a number, a string, TRUE/FALSE, NULL, a negative number, ``CAST(literal AS type)``;
Lenses writes strings in double quotes too); the column list names the target's columns in order, the
pseudo-column ``ROWTIME`` (the record's time) and, on a Lenses topic, ``_key`` / ``_key.f`` (the key or a
field of it) and ``_value.f``. Without a column list the values fill the target's columns in declared
order. A record's key is its key columns' values (a SQLstream table's PRIMARY KEY), in the target's key
format; its time is ROWTIME when given, else the time the statement runs.
"""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Optional

from ..connectors.formats import encode_key, encode_value
from ..connectors.topic_store import Record
from ..errors import StatementError
from ..sql import ast
from .catalog import ColumnInfo, SourceInfo

ROWTIME = "ROWTIME"
INTEGRAL = ("int", "bigint", "smallint", "tinyint")
NUMERIC = INTEGRAL + ("double", "float")


def values_records(stmt: ast.InsertValues, target: SourceInfo, now_ms: Optional[int] = None) -> tuple[Record, ...]:
    targets = _targets(stmt, target)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    records = []
    for row in stmt.rows:
        if len(row) != len(targets):
            raise StatementError(f"VALUES gives {len(row)} values for {len(targets)} columns of {target.name}",
                                 rule="values-count", pos=_pos(row[0] if row else None, stmt.pos))
        key, value, timestamp = {}, {}, now_ms
        for (column, field), expr in zip(targets, row):
            literal = _literal(expr)
            if column == ROWTIME:
                timestamp = _millis(literal, expr)
                continue
            converted = _converted(literal, column.type if field is None else _field_type(column, field), column.name, expr)
            if field is not None:
                value.setdefault(column.name, {})[field] = converted
            elif column.origin == "key":
                key[column.name] = converted
            else:
                value[column.name] = converted
            if column.name in target.key_columns and column.origin != "key":
                key[column.name] = converted  # a key kept in the value (SQLstream table, Flink primary key)
        records.append(Record(_key_bytes(target, key), encode_value(value, target), timestamp))
    return tuple(records)


def _targets(stmt: ast.InsertValues, target: SourceInfo) -> list[tuple[Any, Optional[str]]]:
    """(column or ROWTIME, field of a struct column or None) for each value of a row. ksqlDB's header columns
    (``HEADER('k')``, ``HEADERS``) are read from records and never written: naming one, or leaving out the column list
    of a stream that has one, is refused in ksqlDB's words."""
    headers = [c.name for c in target.columns if (c.metadata or "").startswith("header") and target.dialect == "ksql"]
    named = {path[0].text.casefold() for path in stmt.columns}
    written = [h for h in headers if not stmt.columns or h.casefold() in named]
    if written:
        raise StatementError(f"Cannot insert into HEADER columns: {', '.join(written)}", rule="insert-into-headers",
                             pos=stmt.pos)
    if not stmt.columns:
        return [(c, None) for c in target.columns if c.origin in ("key", "value")]
    out = []
    for path in stmt.columns:
        names = [p.text for p in path]
        if len(names) == 1 and names[0].upper() == ROWTIME:
            out.append((ROWTIME, None))
            continue
        if names[0].casefold() == "_value" and len(names) > 1:
            names = names[1:]
        elif names[0].casefold() == "_key" and len(names) == 2:
            names = names[1:]
        column = target.column(names[0])
        if column is None or column.origin not in ("key", "value") or len(names) > 2:
            raise StatementError(f"{'.'.join(p.text for p in path)} is not a column of {target.name}",
                                 rule="unknown-column", pos=path[0].pos)
        out.append((column, names[1] if len(names) == 2 else None))
    return out


def _literal(e: ast.Expr) -> Any:
    if isinstance(e, ast.Literal):
        return Decimal(e.value) if e.kind == "decimal" else e.value
    if isinstance(e, ast.UnaryOp) and e.op == "-" and isinstance(e.operand, ast.Literal) and e.operand.kind in ("integer", "decimal"):
        return -_literal(e.operand)
    if isinstance(e, ast.Cast):
        return _literal(e.operand)
    if isinstance(e, ast.Column) and e.qualifier is None and e.name.quoted:
        return e.name.text  # Lenses writes string values in double quotes
    raise StatementError("VALUES takes literals: numbers, strings, TRUE, FALSE, NULL or CAST('...' AS type)",
                         rule="values-literal", pos=_pos(e))


def _converted(value: Any, type_: str, name: str, e: ast.Expr) -> Any:
    """``value`` as the JSON value of a column of ``type_``; a value that cannot be one is refused."""
    if value is None:
        return None
    t = type_.lower()
    if t in INTEGRAL:
        if isinstance(value, bool) or not isinstance(value, (int, Decimal, str)) or not _integral(value):
            raise _mismatch(value, type_, name, e)
        return int(value)
    if t in NUMERIC or t.startswith("decimal"):
        try:
            return float(value) if t in NUMERIC else str(Decimal(str(value)))
        except (ValueError, ArithmeticError):
            raise _mismatch(value, type_, name, e) from None
    if t == "boolean":
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "false"):
            return str(value).lower() == "true"
        raise _mismatch(value, type_, name, e)
    if t == "timestamp":
        return _timestamp_text(_millis(value, e))
    if isinstance(value, Decimal):
        return float(value)
    return value if t != "string" else str(value)


def _integral(value) -> bool:
    try:
        return Decimal(str(value)) == int(Decimal(str(value)))
    except ArithmeticError:
        return False


def _millis(value: Any, e: ast.Expr) -> int:
    """A time given as epoch milliseconds or as timestamp text ('2019-03-30 05:03:30.000', UTC)."""
    if isinstance(value, (int, Decimal)) and not isinstance(value, bool):
        return int(value)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise StatementError(f"{value!r} is not a timestamp ('yyyy-MM-dd HH:mm:ss[.SSS]') or epoch milliseconds",
                             rule="values-type", pos=_pos(e)) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return int(parsed.timestamp() * 1000)


def _timestamp_text(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _field_type(column: ColumnInfo, field: str) -> str:
    for part in column.type[len("struct<"):-1].split(","):
        name, _, type_ = part.partition(":")
        if name.strip("`").casefold() == field.casefold():
            return type_
    return "string"


def _key_bytes(target: SourceInfo, key: dict) -> Optional[bytes]:
    """Several key columns, or fields of a Lenses structured key, as a JSON object; one key as JSON (a
    JSON key, unwrapped, as ksqlDB writes it) or as its text (KAFKA)."""
    if not key:
        return None
    if len(key) > 1 or (target.dialect == "lenses" and "_key" not in key):
        return json.dumps(key).encode()
    (value,) = key.values()
    return encode_key(value, target)


def _mismatch(value, type_: str, name: str, e: ast.Expr) -> StatementError:
    return StatementError(f"value {value!r} does not fit column {name} of type {type_.upper()}", rule="values-type", pos=_pos(e))


def _pos(e, default=None):
    return getattr(e, "pos", None) or default
