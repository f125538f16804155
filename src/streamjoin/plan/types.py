"""SQL column types of the four dialects, mapped onto Spark SQL types."""
from __future__ import annotations

import dataclasses

from ..connectors.formats import split_type_args, struct_fields
from ..errors import StatementError
from ..sql.ast import TypeName

TIME = "time(3)"  # a time of day to the millisecond, as ksqlDB keeps one
DAY_MS = 86_400_000
_SCALARS = {
    "INT": "int", "INTEGER": "int", "SMALLINT": "smallint", "TINYINT": "tinyint", "BIGINT": "bigint", "LONG": "bigint",
    "DOUBLE": "double", "FLOAT": "double", "REAL": "float", "BOOLEAN": "boolean", "BOOL": "boolean",
    "STRING": "string", "VARCHAR": "string", "CHAR": "string", "TEXT": "string", "BYTES": "binary",
    "DATE": "date", "TIME": TIME, "TIMESTAMP": "timestamp", "TIMESTAMP_LTZ": "timestamp",
}


def spark_type(t: TypeName, ksql: bool = False) -> str:
    """The Spark DDL type string for a parsed SQL type; ``ksql``: declared with ksqlDB's DDL, whose unquoted STRUCT
    field names are upper-cased (``STRUCT<a INT>`` has a field ``A``), as its columns' names are."""
    if t.name in _SCALARS:
        return _SCALARS[t.name]
    if t.name in ("DECIMAL", "NUMERIC", "DEC"):
        precision, scale = (tuple(t.params) + (10, 0))[:2] if t.params else (10, 0)
        return f"decimal({precision},{scale})"
    if t.name == "ARRAY" and len(t.args) == 1:
        return f"array<{spark_type(t.args[0], ksql)}>"
    if t.name == "MAP" and len(t.args) == 2:
        return f"map<{spark_type(t.args[0], ksql)},{spark_type(t.args[1], ksql)}>"
    if t.name == "STRUCT":
        def named(n: str) -> str:
            return n.upper() if ksql and n not in t.quoted_fields else n

        return "struct<" + ",".join(f"`{named(n)}`:{spark_type(ft, ksql)}" for n, ft in t.fields) + ">"
    raise StatementError(f"Cannot resolve unknown type: {t.name}", rule="unknown-type", pos=t.pos)


def with_named_types(node, named: dict[str, TypeName]):
    """``node`` (a statement, or any part of one) with every type named by CREATE TYPE (``named``: upper-cased
    name -> the type it stands for) replaced by that type."""
    if isinstance(node, TypeName):
        if node.name in named and not (node.params or node.args or node.fields):
            return dataclasses.replace(named[node.name], pos=node.pos)
        return dataclasses.replace(node, args=tuple(with_named_types(a, named) for a in node.args),
                                   fields=tuple((n, with_named_types(t, named)) for n, t in node.fields))
    if isinstance(node, tuple):
        return tuple(with_named_types(x, named) for x in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changed = {f.name: with_named_types(getattr(node, f.name), named) for f in dataclasses.fields(node)}
        if any(changed[k] is not getattr(node, k) for k in changed):
            return dataclasses.replace(node, **changed)
    return node


def inner_type(spark: str, field: str | None = None) -> str:
    """The type of ``field`` of a Spark struct type (matched case-insensitively), of an array's elements
    (``field`` None), or of a map's values (``field`` None); "" when ``spark`` is none of these."""
    lowered = spark.lower()
    if field is None and (lowered.startswith("array<") or lowered.startswith("map<")):
        parts = split_type_args(spark[spark.index("<") + 1:-1])
        return parts[-1].strip()
    if field is not None:
        return next((type_ for name, type_ in struct_fields(spark) if name.casefold() == field.casefold()), "")
    return ""


_KSQL_NAMES = {TIME: "TIME", "int": "INTEGER", "tinyint": "INTEGER", "smallint": "INTEGER", "bytes": "BYTES",
               "binary": "BYTES"}


def ksql_type_name(spark: str) -> str:
    """A Spark DDL type as ksqlDB prints it: ``map<string,int>`` -> ``MAP<STRING, INTEGER>``,
    ``struct<`f`:int>`` -> ``STRUCT<`F` INTEGER>``; "" stays ""."""
    text = spark.strip()
    low = text.lower()
    for kind in ("array", "map", "struct"):
        if low.startswith(kind + "<") and low.endswith(">"):
            parts = split_type_args(text[len(kind) + 1:-1])
            if kind == "struct":
                fields = [p.split(":", 1) for p in parts]
                return "STRUCT<" + ", ".join(f"`{n.strip().strip('`').upper()}` {ksql_type_name(t)}" for n, t in fields) + ">"
            return f"{kind.upper()}<" + ", ".join(ksql_type_name(p) for p in parts) + ">"
    if low.startswith("decimal(") and low.endswith(")"):  # SqlDecimal's text: DECIMAL(10, 2)
        return "DECIMAL(" + ", ".join(p.strip() for p in text[8:-1].split(",")) + ")"
    return _KSQL_NAMES.get(low, text.upper())
