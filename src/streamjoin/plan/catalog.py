"""The catalog: every stream, table, view and temporal table function a script has declared.

Names are looked up case-insensitively (``casefold``); each object keeps the spelling it is shown with
(KSQL upper-cases unquoted identifiers, Flink keeps them as written). A SQLstream object may live in a
schema: its name is then ``SCHEMA.NAME``; an unqualified name is looked up in the current schema (``SET
SCHEMA``) first, then on its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..connectors.formats import framed
from ..errors import StatementError
from ..sql import ast


@dataclass(frozen=True)
class ColumnInfo:
    """A column of a source. ``origin``: 'key' (read from the record key), 'value' (from the value),
    'computed' (a Flink computed column such as PROCTIME()), 'metadata' (a field of the record itself:
    ``metadata`` is 'headers', 'header:<name>', 'timestamp', 'partition', 'offset' or 'topic')."""

    name: str
    type: str  # Spark DDL type
    origin: str = "value"
    computed: Optional[ast.Expr] = None
    nullable: bool = True
    metadata: Optional[str] = None


@dataclass(frozen=True)
class DatabaseTable:
    """A table in a relational database (Flink's 'jdbc' connector), reached by ``connectors.database``.
    ``cache``: 'NONE' or 'PARTIAL' (then ``cache_max_rows`` and the expiry times, in ms, bound it). The
    password is never shown (not in ``repr`` either)."""

    url: str
    table: str
    username: Optional[str] = None
    password: Optional[str] = field(default=None, repr=False)
    cache: str = "NONE"
    cache_max_rows: Optional[int] = None
    expire_after_write_ms: Optional[int] = None
    expire_after_access_ms: Optional[int] = None
    cache_missing_key: bool = True
    max_retries: int = 3  # of a lookup
    sink_max_retries: int = 3  # of a write

    def describe(self) -> str:
        from ..connectors.database import mask

        text = f"database table {self.table} at {mask(self.url)}"
        if self.cache == "PARTIAL":
            limits = [f"{self.cache_max_rows} rows" if self.cache_max_rows is not None else "",
                      f"{self.expire_after_write_ms} ms after write" if self.expire_after_write_ms is not None else "",
                      f"{self.expire_after_access_ms} ms after access" if self.expire_after_access_ms is not None else "",
                      "" if self.cache_missing_key else "missing keys not cached"]
            text += f", partial lookup cache ({', '.join(l for l in limits if l)})"
        return text


@dataclass(frozen=True)
class ServerInfo:
    """A SQLstream server (SQL/MED ``CREATE SERVER``): its foreign data wrapper and options (names upper-cased;
    not shown: a PASSWORD is among them)."""

    name: str
    wrapper: str
    options: dict = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class SourceInfo:
    """A declared (or query-created) stream or table and how to read it."""

    name: str
    kind: str  # 'STREAM' or 'TABLE'
    topic: str
    columns: tuple[ColumnInfo, ...]
    key_columns: tuple[str, ...] = ()
    style: str = "ksql"  # 'ksql' or 'flink': how names are shown and how results are keyed
    value_format: str = "JSON"
    key_format: str = "KAFKA"
    timestamp_column: Optional[str] = None
    watermark_column: Optional[str] = None
    watermark_delay_ms: Optional[int] = None
    proctime_column: Optional[str] = None
    partitions: int = 1
    bounded_path: Optional[str] = None  # a file source (SQLstream static table)
    changelog_format: Optional[str] = None  # e.g. 'debezium-json'
    properties: tuple[tuple[str, object], ...] = ()
    created_by_query: bool = False
    dialect: str = ""  # whose DDL declared it: 'ksql', 'flink', 'lenses', 'sqlstream'; a query's sink: 'ksql' for a ksqlDB query's, else ''
    window: Optional[tuple[str, int]] = None  # a windowed table's (window type, size ms): its record keys hold the window
    database: Optional[DatabaseTable] = None  # a table in a database ('jdbc'): no topic under it
    read_only: bool = False  # ksqlDB's CREATE SOURCE STREAM|TABLE: no INSERT, DROP ... DELETE TOPIC, ALTER or REPLACE

    def registry_framed(self, part: str) -> bool:
        """Whether the source's ``part`` ("key" or "value") was declared JSON_SR (``connectors.formats.framed``)."""
        return framed(dict(self.properties), part)

    @property
    def timestamp_format(self) -> Optional[str]:
        """ksqlDB's ``TIMESTAMP_FORMAT``: the pattern the text of its ``TIMESTAMP`` column is read with (when that
        column is a STRING)."""
        pattern = dict(self.properties).get("timestamp_format")
        column = self.column(self.timestamp_column) if self.timestamp_column else None
        return str(pattern) if pattern is not None and column is not None and column.type == "string" else None

    @property
    def bounded(self) -> bool:
        """Read once at query start (a file, a database table) rather than from a topic."""
        return bool(self.bounded_path) or self.database is not None

    def column(self, name: str) -> Optional[ColumnInfo]:
        wanted = name.casefold()
        return next((c for c in self.columns if c.name.casefold() == wanted), None)

    @property
    def value_columns(self) -> tuple[ColumnInfo, ...]:
        return tuple(c for c in self.columns if c.origin == "value")

    @property
    def reads_headers(self) -> bool:
        return any((c.metadata or "").startswith("header") for c in self.columns)


@dataclass(frozen=True)
class ViewInfo:
    """A Lenses ``WITH name AS (SELECT ...)`` or SQLstream ``CREATE VIEW name [(cols)] AS SELECT ...`` view:
    expanded where it is used; ``columns`` rename its query's columns in order."""

    name: str
    query: ast.Select
    statement_index: int = 0
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class TemporalFunction:
    """``CREATE TEMPORAL TABLE FUNCTION name ON history (time_column) KEY (key_column)``."""

    name: str
    history: str
    time_column: str
    key_column: str


@dataclass
class Catalog:
    sources: dict[str, SourceInfo] = field(default_factory=dict)
    views: dict[str, ViewInfo] = field(default_factory=dict)
    functions: dict[str, TemporalFunction] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)
    schemas: set = field(default_factory=set)  # SQLstream schemas created (casefolded)
    schema: Optional[str] = None  # the current schema (SET SCHEMA), as shown
    pumps: dict = field(default_factory=dict)  # SQLstream pump (casefolded name) -> the id of its query
    servers: dict = field(default_factory=dict)  # SQLstream server (casefolded name) -> ServerInfo
    types: dict = field(default_factory=dict)  # ksqlDB's CREATE TYPE: upper-cased name -> the ast.TypeName it names

    def lookup(self, name: "str | ast.Ident"):
        for key in self.keys_of(name):
            found = self.views.get(key) or self.sources.get(key) or self.functions.get(key)
            if found is not None:
                return found
        return None

    def source(self, name: "str | ast.Ident") -> Optional[SourceInfo]:
        return next((self.sources[k] for k in self.keys_of(name) if k in self.sources), None)

    def keys_of(self, name: "str | ast.Ident") -> list[str]:
        """The names ``name`` may stand for, casefolded, in the order they are tried."""
        if isinstance(name, str):
            return [name.casefold()]
        if name.schema is not None:
            return [f"{name.schema.text}.{name.text}".casefold()]
        current = [f"{self.schema}.{name.text}".casefold()] if self.schema else []
        return current + [name.text.casefold()]

    def qualified(self, ident: ast.Ident, style: str) -> str:
        """The name a new object called ``ident`` is shown with: in its schema (given, else the current one)."""
        schema = display_name(ident.schema, style) if ident.schema is not None else self.schema
        return f"{schema}.{display_name(ident, style)}" if schema else display_name(ident, style)

    def add_source(self, info: SourceInfo, *, pos=None, replace_existing: bool = False) -> None:
        key = info.name.casefold()
        if not replace_existing and (key in self.sources or key in self.views):
            raise StatementError(f"{info.name} already exists", rule="duplicate-name", pos=pos)
        self.sources[key] = info

    def add_view(self, view: ViewInfo, *, pos=None) -> None:
        key = view.name.casefold()
        if key in self.sources or key in self.views:
            raise StatementError(f"{view.name} already exists", rule="duplicate-name", pos=pos)
        self.views[key] = view

    def add_function(self, fn: TemporalFunction, *, pos=None) -> None:
        key = fn.name.casefold()
        if self.lookup(fn.name) is not None:
            raise StatementError(f"{fn.name} already exists", rule="duplicate-name", pos=pos)
        self.functions[key] = fn

    def drop(self, name: "str | ast.Ident") -> bool:
        for key in self.keys_of(name):
            if any(d.pop(key, None) is not None for d in (self.sources, self.views, self.functions)):
                return True
        return False


def display_name(ident: ast.Ident, style: str) -> str:
    """How a name is shown: KSQL upper-cases unquoted identifiers; Flink and quoted names keep case."""
    if ident.quoted or style == "flink":
        return ident.text
    return ident.text.upper()


__all__ = ["Catalog", "ColumnInfo", "SourceInfo", "ViewInfo", "TemporalFunction", "display_name"]
