"""SQL column types of the four dialects, mapped onto Spark SQL types."""
from __future__ import annotations

from ..errors import StatementError
from ..sql.ast import TypeName

_SCALARS = {
    "INT": "int", "INTEGER": "int", "SMALLINT": "smallint", "TINYINT": "tinyint", "BIGINT": "bigint", "LONG": "bigint",
    "DOUBLE": "double", "FLOAT": "double", "REAL": "float", "BOOLEAN": "boolean", "BOOL": "boolean",
    "STRING": "string", "VARCHAR": "string", "CHAR": "string", "TEXT": "string", "BYTES": "binary",
    "DATE": "date", "TIME": "string", "TIMESTAMP": "timestamp", "TIMESTAMP_LTZ": "timestamp",
}


def spark_type(t: TypeName) -> str:
    """The Spark DDL type string for a parsed SQL type."""
    if t.name in _SCALARS:
        return _SCALARS[t.name]
    if t.name in ("DECIMAL", "NUMERIC", "DEC"):
        precision, scale = (tuple(t.params) + (10, 0))[:2] if t.params else (10, 0)
        return f"decimal({precision},{scale})"
    if t.name == "ARRAY" and len(t.args) == 1:
        return f"array<{spark_type(t.args[0])}>"
    if t.name == "MAP" and len(t.args) == 2:
        return f"map<{spark_type(t.args[0])},{spark_type(t.args[1])}>"
    if t.name == "STRUCT":
        return "struct<" + ",".join(f"`{n}`:{spark_type(ft)}" for n, ft in t.fields) + ">"
    raise StatementError(f"unknown type {t.name}", rule="unknown-type", pos=t.pos)
