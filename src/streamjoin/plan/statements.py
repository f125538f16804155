"""Planning a script: each statement updates the catalog and may yield a persistent query plan.

Planning never touches Spark, so a whole script is planned (and validated) before anything starts.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Optional, Protocol

from ..connectors.kafka_client import client_properties
from ..errors import StatementError
from ..sql import ast
from ..validate.rules import validate
from .binder import Binder
from .catalog import Catalog, ColumnInfo, ServerInfo, SourceInfo, TemporalFunction, ViewInfo, display_name
from .ddl import (
    LENSES_KEY_FORMATS, LENSES_VALUE_FORMATS, check_format_properties, check_key_columns, check_ksql_formats,
    check_ksql_key_format, check_timestamp_column, check_value_columns, key_format_of, lenses_format, partitions_of,
    properties_dict, source_from_ddl, value_format_of,
)
from .ksql_projection import check_key_selected
from .scope import restart_ids
from .types import ksql_type_name, spark_type, with_named_types
from .settings import (
    DEFAULT_KEY_FORMAT, OUTPUT_TOPIC_PREFIX, check_setting, single_value_wrapping, sink_partitions, table_client_properties,
)
from .nodes import Aggregate, Filter, Join, PlanNode, Project, Repartition, Scan, Sink, declared_by, walk
from .values import values_records


@dataclass(frozen=True)
class PlannedQuery:
    """A query: its id, the statement it came from and its plan ending in a Sink."""

    query_id: str
    statement: ast.ScriptStatement
    plan: Sink
    transient: bool = False  # a bare SELECT: its rows are shown as they come (``runtime.transient``), not stored
    limit: Optional[int] = None  # a transient query ends after this many rows


@dataclass(frozen=True)
class PlannedStatement:
    statement: ast.ScriptStatement
    query: Optional[PlannedQuery] = None
    output: Optional[str] = None  # text for EXPLAIN / DESCRIBE
    created_topic: Optional[tuple[str, int]] = None  # (topic, partitions) a DDL statement declares
    dropped: Optional[str] = None  # the name a DROP removed
    produced: Optional[tuple[str, tuple]] = None  # (topic, records) an INSERT ... VALUES appends
    start: bool = True  # whether ``query`` starts now (a SQLstream pump created STOPPED waits)
    pumps: tuple[str, ...] = ()  # the query ids an ALTER PUMP starts or stops
    pump_action: Optional[str] = None  # 'START' or 'STOP'


class Operators(Protocol):
    """What the planner asks of the operators (``lower.operator_table``, handed in by whoever runs the plans):
    whether a join's operator exists, and what state an operator keeps (for EXPLAIN)."""

    def check_supported(self, join: Join) -> None: ...  # raises NotYetSupported
    def declared_state(self, node: PlanNode): ...  # operators.base.DeclaredState, or None


class StatementPlanner:
    def __init__(self, catalog: Catalog, *, operators: Optional[Operators] = None,
                 sample_topic: Optional[Callable[[str], list]] = None):
        """``sample_topic(topic)``: the topic's first (key, value) records, for a Lenses query over a topic no
        statement declares (``plan.inference``); without it such a query is refused."""
        self.catalog = catalog
        self.binder = Binder(catalog, sample_topic)
        self.operators = operators
        self._query_count = 0  # transient queries, numbered
        self._inserts: dict[str, int] = {}  # sink -> INSERT INTO queries planned into it

    def plan(self, item: ast.ScriptStatement) -> PlannedStatement:
        restart_ids()
        try:
            return self._plan(item.statement, item)
        except StatementError as err:
            raise err.at_statement(item.index, item.pos) from None

    def _plan(self, stmt: ast.Statement, item: ast.ScriptStatement) -> PlannedStatement:
        if self.catalog.types:
            stmt = with_named_types(stmt, self.catalog.types)
        if isinstance(stmt, (ast.CreateType, ast.DropType)):
            self._named_type(stmt)
            return PlannedStatement(item)
        if isinstance(stmt, ast.CreateServer):
            key = stmt.name.text.casefold()
            if key in self.catalog.servers and not stmt.or_replace:
                raise StatementError(f"server {stmt.name.text} already exists", rule="duplicate-name", pos=stmt.name.pos)
            self.catalog.servers[key] = ServerInfo(stmt.name.text, stmt.wrapper.text.upper(),
                                                   {o.name.upper(): str(o.value) for o in stmt.options})
            return PlannedStatement(item)
        if isinstance(stmt, ast.CreateSource):
            qualified = stmt.name.schema is not None or self.catalog.schema is not None
            info = source_from_ddl(stmt, self.catalog.qualified(stmt.name, stmt.style) if qualified else None,
                                   servers=self.catalog.servers, settings=self.catalog.properties)
            existing = self.catalog.source(stmt.name)
            if stmt.or_replace and (stmt.read_only or existing is not None and existing.read_only):
                kind = stmt.kind.lower()
                raise StatementError(f"Cannot add {kind} '{info.name}': CREATE OR REPLACE is not supported on source "
                                     f"{kind}s.", rule="read-only-source", pos=stmt.pos)
            info = replace(info, read_only=stmt.read_only)
            self._check_client_properties(info, stmt.pos)
            self.catalog.add_source(info, pos=stmt.pos, replace_existing=stmt.or_replace or stmt.if_not_exists)
            return PlannedStatement(item, created_topic=(info.topic, info.partitions) if info.topic else None)
        if isinstance(stmt, ast.CreateView):
            plan, _ = self.binder.bind_select(stmt.query)  # validate the view now, even if unused
            visible = [f for f in plan.fields if not f.hidden]
            if stmt.columns and len(stmt.columns) != len(visible):
                raise StatementError(f"view {stmt.name.text} names {len(stmt.columns)} columns, its query gives "
                                     f"{len(visible)}", rule="column-count", pos=stmt.pos)
            view = ViewInfo(self.catalog.qualified(stmt.name, "ksql"), stmt.query, item.index,
                            tuple(display_name(c, "ksql") for c in stmt.columns))
            if stmt.or_replace:
                self.catalog.drop(stmt.name)
            self.catalog.add_view(view, pos=stmt.pos)
            return PlannedStatement(item)
        if isinstance(stmt, ast.CreateSchema):
            self.catalog.schemas.add(display_name(stmt.name, "ksql").casefold())
            return PlannedStatement(item)
        if isinstance(stmt, ast.SetSchema):
            self.catalog.schema = display_name(stmt.name, "ksql")
            return PlannedStatement(item)
        if isinstance(stmt, ast.InsertValues):
            target = self.catalog.source(stmt.target)
            if target is None:
                raise StatementError(f"unknown stream or table {stmt.target.text}", rule="unknown-source", pos=stmt.target.pos)
            _check_ksql_case(stmt.target, target)
            if target.bounded:
                raise StatementError(f"{target.name} is read from a file: INSERT ... VALUES cannot add to it",
                                     rule="insert-into-file", pos=stmt.pos)
            if target.read_only:
                raise StatementError(f"Cannot insert values into read-only {target.kind.lower()}: {target.name}",
                                     rule="read-only-source", pos=stmt.pos)
            return PlannedStatement(item, produced=(target.topic, values_records(stmt, target)))
        if isinstance(stmt, ast.CreatePump):
            name = self.catalog.qualified(stmt.name, "ksql")
            if name.casefold() in self.catalog.pumps and not stmt.or_replace:
                raise StatementError(f"pump {name} already exists", rule="duplicate-name", pos=stmt.name.pos)
            self.catalog.pumps[name.casefold()] = name.upper()
            planned = self._insert(item, stmt.insert, query_id=name.upper())
            return replace(planned, start=not stmt.stopped)
        if isinstance(stmt, ast.AlterPump):
            return PlannedStatement(item, pumps=self._pumps_named(stmt), pump_action=stmt.action)
        if isinstance(stmt, ast.CreateTemporalTableFunction):
            history = self.catalog.source(stmt.history.text)
            if history is None:
                raise StatementError(f"unknown table {stmt.history.text}", rule="unknown-source", pos=stmt.history.pos)
            for col in (stmt.time_column, stmt.key_column):
                if history.column(col.text) is None:
                    raise StatementError(f"{col.text} is not a column of {history.name}", rule="unknown-column", pos=col.pos)
            self.catalog.add_function(
                TemporalFunction(stmt.name.text, history.name, stmt.time_column.text, stmt.key_column.text), pos=stmt.pos
            )
            return PlannedStatement(item)
        if isinstance(stmt, ast.CreateAsSelect):
            return self._persistent(item, stmt.query, stmt.name, stmt.kind, properties_dict(stmt.properties), create=True)
        if isinstance(stmt, ast.InsertInto):
            return self._insert(item, stmt)
        if isinstance(stmt, ast.SetProperty):
            try:
                check_setting(stmt.name, stmt.value)
            except ValueError as err:
                raise StatementError(f"SET '{stmt.name}': {err}", rule="invalid-setting", pos=stmt.pos) from None
            self.catalog.properties[stmt.name] = stmt.value
            return PlannedStatement(item)
        if isinstance(stmt, ast.Explain):
            inner = self._plan(stmt.statement, item)
            from .explain import explain_text

            state_of = self.operators.declared_state if self.operators is not None else None
            text = explain_text(inner.query.plan, state_of, self.catalog.properties) if inner.query else f"{type(stmt.statement).__name__}: no query"
            return PlannedStatement(item, query=None, output=text)
        if isinstance(stmt, ast.Describe):
            from .explain import describe_text

            info = self.catalog.source(stmt.name) or self.binder.inferred(stmt.name)
            if info is None:
                raise StatementError(f"unknown stream or table {stmt.name.text}", rule="unknown-source", pos=stmt.name.pos)
            return PlannedStatement(item, output=describe_text(info))
        if isinstance(stmt, ast.AlterSource):
            return self._alter(item, stmt)
        if isinstance(stmt, ast.Drop):
            info = self.catalog.source(stmt.name)
            if info is not None and info.read_only and stmt.delete_topic:
                raise StatementError(f"Cannot delete topic for read-only source: {info.name}", rule="read-only-source",
                                     pos=stmt.pos)
            if not self.catalog.drop(stmt.name) and not stmt.if_exists:  # in ksqlDB's words
                raise StatementError(f"{stmt.kind.capitalize()} {display_name(stmt.name, 'ksql')} does not exist",
                                     rule="unknown-source", pos=stmt.name.pos)
            return PlannedStatement(item, dropped=info.name if info else None)
        if isinstance(stmt, ast.QueryStatement):  # a transient query: its rows are shown, never stored
            self._query_count += 1
            name = ast.Ident(f"TRANSIENT_{self._query_count}", quoted=True, pos=stmt.pos)
            planned = self._persistent(item, stmt.query, name, None, {}, create=True, transient=True,
                                       query_id=f"TRANSIENT_{self._query_count}")
            return replace(planned, query=replace(planned.query, limit=stmt.limit))
        raise StatementError(f"unsupported statement {type(stmt).__name__}", rule="unsupported-statement", pos=getattr(stmt, "pos", None))

    def _named_type(self, stmt: "ast.CreateType | ast.DropType") -> None:
        """ksqlDB's CREATE TYPE and DROP TYPE, refused in its words."""
        name, types = stmt.name.text.upper(), self.catalog.types
        if isinstance(stmt, ast.DropType):
            if types.pop(name, None) is None and not stmt.if_exists:
                raise StatementError(f"Type {name} does not exist.", rule="unknown-type", pos=stmt.name.pos)
            return
        if name in types:
            if stmt.if_not_exists:
                return
            raise StatementError(f"Cannot register custom type '{name}' since it is already registered with type: "
                                 f"{ksql_type_name(spark_type(types[name], ksql=True))}", rule="duplicate-name",
                                 pos=stmt.name.pos)
        spark_type(stmt.type, ksql=True)  # a type that names no known type is refused now
        types[name] = stmt.type

    def _alter(self, item, stmt: ast.AlterSource) -> PlannedStatement:
        """ksqlDB's ``ALTER STREAM|TABLE n ADD COLUMN c type, ...``: value columns added to a declared source (not to a
        query's, nor to a read-only one), for the statements after it."""
        info = self.catalog.source(stmt.name)
        kind = stmt.kind.lower()
        if info is None or info.kind.lower() != kind:
            raise StatementError(f"Source {display_name(stmt.name, 'ksql')} does not exist.", rule="unknown-source",
                                 pos=stmt.name.pos)
        if info.read_only:
            raise StatementError(f"Cannot alter {kind} '{info.name}': ALTER operations are not supported on source "
                                 f"{kind}s.", rule="read-only-source", pos=stmt.pos)
        if info.created_by_query:
            raise StatementError("ALTER command is not supported for CREATE ... AS SELECT sources.",
                                 rule="alter-source", pos=stmt.pos)
        columns = list(info.columns)
        for col in stmt.columns:
            name = display_name(col.name, "ksql")
            if any(c.name == name for c in columns):
                raise StatementError(f"Cannot add column `{name}` to schema. A column with the same name already exists.",
                                     rule="alter-source", pos=col.pos)
            columns.append(ColumnInfo(name, spark_type(col.type, ksql=True)))
        self.catalog.add_source(replace(info, columns=tuple(columns)), replace_existing=True)
        return PlannedStatement(item)

    def _insert(self, item, stmt: ast.InsertInto, query_id: Optional[str] = None) -> PlannedStatement:
        """``INSERT INTO t [(cols)] [STORE ...] SELECT``: Lenses' STORE AS names the formats of a topic the
        statement creates."""
        props = {}
        if stmt.key_format:
            props["key_format"] = lenses_format(stmt.key_format, LENSES_KEY_FORMATS, "key", stmt.pos)
        if stmt.value_format:
            props["value_format"] = lenses_format(stmt.value_format, LENSES_VALUE_FORMATS, "value", stmt.pos)
        if sink_partitions(self.catalog.properties) is not None:  # Lenses: SET defaults.topic.partitions
            props["partitions"] = sink_partitions(self.catalog.properties)
        columns = tuple(".".join(p.text for p in path) for path in stmt.columns)
        return self._persistent(item, stmt.query, stmt.target, None, props, create=False, columns=columns,
                                query_id=query_id)

    def _pumps_named(self, stmt: ast.AlterPump) -> tuple[str, ...]:
        ids = []
        for name in stmt.names:
            found = next((self.catalog.pumps[k] for k in self.catalog.keys_of(name) if k in self.catalog.pumps), None)
            if found is None:
                raise StatementError(f"unknown pump {name.text}", rule="unknown-pump", pos=name.pos)
            ids.append(found)
        for schema in stmt.schemas:
            prefix = display_name(schema, "ksql").casefold() + "."
            ids += [query_id for key, query_id in self.catalog.pumps.items() if key.startswith(prefix)]
        return tuple(ids)

    def _check_client_properties(self, info: SourceInfo, pos) -> None:
        """A Kafka table's client properties (``properties.*``) must be ones this client can take, and agree with
        those of the script's other tables: one broker, one set of client properties."""
        mine = table_client_properties(info.properties)
        try:
            client_properties(mine)
        except ValueError as err:
            raise StatementError(f"{info.name}: {err}", rule="kafka-property", pos=pos) from None
        for other in self.catalog.sources.values():
            theirs = table_client_properties(other.properties)
            differing = sorted(k for k in mine.keys() & theirs.keys() if str(mine[k]) != str(theirs[k]))
            if differing and other.name != info.name:
                raise StatementError(f"{info.name}'s 'properties.{differing[0]}' differs from {other.name}'s: a script's "
                                     "Kafka tables are read from one broker, with one set of client properties",
                                     rule="kafka-property", pos=pos)

    def _persistent(self, item, select: ast.Select, name: ast.Ident, kind: Optional[str], props: dict, *, create: bool,
                    columns: tuple[str, ...] = (), query_id: Optional[str] = None, transient: bool = False):
        """The query of a CREATE ... AS SELECT, an INSERT INTO, or a bare SELECT (``transient``: its result is
        described as a sink would be, but joins no catalog and has no topic)."""
        self.binder.statement = "SELECT" if transient else f"CREATE {kind or 'TABLE'} AS SELECT" if create else "INSERT INTO"
        self.binder.target = display_name(name, "ksql")
        plan, style = self.binder.bind_select(select)
        self._check(plan)
        existing = self.catalog.source(name)
        if not columns and existing is not None and existing.dialect in ("sqlstream", "flink"):
            # SQL's INSERT without a column list fills the target's columns in order (SQLstream, Flink); a
            # selected ROWTIME is the record's time (every SQLstream stream has one), not a column
            columns = tuple(c.name for c in existing.columns if c.origin in ("key", "value"))
            if existing.dialect == "sqlstream" and existing.column("ROWTIME") is None:
                plan = _with_fields(plan, lambda f: replace(f, hidden=True) if f.name.upper() == "ROWTIME" else f)
        if columns:
            plan = _renamed(plan, columns, name)
        if create and existing is not None:
            raise StatementError(f"{existing.name} already exists", rule="duplicate-name", pos=name.pos)
        if (not create and not transient and existing is None and style == "ksql" and declared_by(plan, "ksql")
                and select.result_kind is None):
            # ksqlDB's INSERT INTO writes only into a declared stream (Lenses' and SQLstream's may create the topic)
            raise StatementError(f"Source `{display_name(name, 'ksql')}` does not exist.", rule="unknown-source",
                                 pos=name.pos)
        result_kind = kind or plan.kind
        # ksqlDB moves a projected key column out of the value; Flink, and SQLstream/Lenses `SELECT STREAM`
        # (whose streams have no record key of their own), keep every projected column in the value.
        keys_in_value = style == "flink" or select.result_kind == "STREAM"
        if existing is not None:
            target = existing
            if not transient and style == "ksql" and declared_by(plan, "ksql") and existing.dialect == "ksql":
                _check_ksql_insert(existing, plan, select.pos)
        else:
            if style == "ksql":
                check_format_properties(props, name.pos)
                check_ksql_formats(props, name.pos)
                if "key_format" in props and str(props["key_format"]).upper() != "NONE" and _keyed_by_null(plan):
                    raise StatementError("Key format specified for stream without key columns.", rule="key-format",
                                         pos=name.pos)
            columns_out = _columns_of(plan, keys_in_value)
            default_key = str(self.catalog.properties.get(DEFAULT_KEY_FORMAT, "KAFKA")).upper()
            formats = _inherited_formats(plan, style, len([c for c in columns_out if c.origin == "value"]), default_key)
            if style == "ksql" and not {"value_format", "format", "value_delimiter"} & set(props):
                props = {**props, **_inherited_delimiter(plan, formats[1])}
            if style == "ksql":
                props = {**props, **_inherited_registry_formats(plan, props)}
                props = single_value_wrapping(props, value_format_of(props, name.pos, formats[1]),
                                              len([c for c in columns_out if c.origin == "value"]), self.catalog.properties)
            shown = display_name(name, style) if create else name.text
            default_topic = (str(self.catalog.properties.get(OUTPUT_TOPIC_PREFIX, "")) if style == "ksql" else "") + shown
            target = SourceInfo(
                name=shown, kind=result_kind, topic=str(props.get("kafka_topic") or props.get("topic") or default_topic),
                columns=columns_out, key_columns=tuple(plan.field(k).name for k in plan.key if not plan.field(k).hidden),
                style=style, value_format=value_format_of(props, name.pos, formats[1]), properties=tuple(sorted(props.items())),
                key_format=key_format_of(props, style, formats[0]), partitions=partitions_of(props, name.pos),
                created_by_query=True, timestamp_column=_sink_timestamp(plan, props, name), window=_key_window(plan),
                # a ksqlDB query's sink is a ksqlDB stream or table: written, and read by later queries, by its rules
                dialect="ksql" if style == "ksql" and declared_by(plan, "ksql") else "",
            )
            check_value_columns(target.value_format, [(c.name, c.type) for c in target.value_columns], shown, name.pos,
                                ksql=style == "ksql" and declared_by(plan, "ksql"), properties=props)
            if style == "ksql" and declared_by(plan, "ksql"):
                check_ksql_key_format(target.key_format, name.pos)
                keys = [] if _keyed_by_null(plan) else [(c.name, c.type) for c in target.columns if c.origin == "key"]
                # DIALECT: a RIGHT or FULL foreign-key join is keyed by both tables' keys, in any key format
                keyed_by_both = any(isinstance(n, Join) and n.operator == "foreign_key" for n in walk(plan))
                check_key_columns(target.key_format, keys, name.pos, declared=not keyed_by_both)
        if not transient and style == "ksql" and select.result_kind is None and declared_by(plan, "ksql"):
            check_key_selected(plan, self.binder.target, select.pos)  # after the query's other refusals, as ksqlDB
        if existing is None and not transient:
            self.catalog.add_source(target)
        if target.database is not None and plan.kind == "TABLE" and not target.key_columns:
            raise StatementError(f"Table sink '{target.name}' doesn't support consuming update and delete changes: "
                                 "declare its PRIMARY KEY (...) NOT ENFORCED, so they become upserts and deletes",
                                 rule="database-sink-changelog", pos=name.pos)
        visible = [f for f in plan.fields if not f.hidden]
        value_fields = tuple(f.id for f in visible if keys_in_value or f.id not in plan.key)
        sink = Sink(plan.fields, target.kind, plan.key, plan.key_equivalents, input=plan, target=target, value_fields=value_fields)
        if query_id is None:
            query_id = self._query_id(target.name, result_kind, create)
        return PlannedStatement(item, query=PlannedQuery(query_id, item, sink, transient=transient),
                                created_topic=None if transient or target.database else (target.topic, target.partitions))

    def _query_id(self, sink: str, kind: str, create: bool) -> str:
        """A persistent query's id, which names its checkpoint: from its sink, not its place in the script, so
        editing other statements leaves it (and the state it restarts from) alone. ``CSAS_<SINK>`` /
        ``CTAS_<SINK>`` for the query that creates its sink; ``INSERTQUERY_<SINK>`` for the first INSERT INTO a
        sink, ``INSERTQUERY_<SINK>_<n>`` for its n-th."""
        if create:
            return f"{'CSAS' if kind == 'STREAM' else 'CTAS'}_{sink}".upper()
        n = self._inserts[sink.casefold()] = self._inserts.get(sink.casefold(), 0) + 1
        return f"INSERTQUERY_{sink}".upper() + (f"_{n}" if n > 1 else "")

    def _check(self, plan: PlanNode) -> None:
        validate(plan)
        if self.operators is not None:
            for node in walk(plan):
                if isinstance(node, Join):
                    self.operators.check_supported(node)


def _key_window(plan: PlanNode) -> Optional[tuple[str, int]]:
    """(window type, size ms) of a query's result whose record keys hold a window: a ksqlDB windowed aggregate's,
    or the rows of a windowed source (``WINDOW_TYPE``) passed on."""
    node = plan
    while isinstance(node, (Project, Filter)):
        node = node.input
    if isinstance(node, Scan):
        return node.source.window
    if isinstance(node, Join) and node.window_keys:  # windowed sources joined: their (equal) window
        return node.left.source.window
    window = node.window if isinstance(node, Aggregate) else None
    return (window.kind, window.size_ms) if window is not None and window.ksql else None


def _renamed(plan: PlanNode, columns: tuple[str, ...], target: ast.Ident) -> PlanNode:
    """``INSERT INTO t (cols) SELECT ...``: the query's columns take the listed names, in order."""
    visible = [f for f in plan.fields if not f.hidden]
    if len(columns) != len(visible):
        raise StatementError(f"INSERT INTO {target.text} fills {len(columns)} columns, its query gives {len(visible)}",
                             rule="column-count", pos=target.pos)
    names = {f.id: name for f, name in zip(visible, columns)}
    return _with_fields(plan, lambda f: replace(f, name=names.get(f.id, f.name)))


def _with_fields(plan: PlanNode, change) -> PlanNode:
    """``plan`` with ``change`` applied to each of its fields (in a Project's items too)."""
    fields = tuple(change(f) for f in plan.fields)
    if isinstance(plan, Project):
        return replace(plan, fields=fields, items=tuple((change(f), e) for f, e in plan.items))
    return replace(plan, fields=fields)


def _inherited_formats(plan: PlanNode, style: str, value_columns: int, default_key_format: str) -> tuple[str | None, str]:
    """The (key, value) formats a new sink takes when its statement names none: ksqlDB's are those of the
    query's left-most source (a DELIMITED stream's result stays DELIMITED; a NONE key, when the result has key
    columns, becomes ``ksql.persistence.default.format.key``, KAFKA unless set); Flink's KAFKA key and JSON
    value. A primitive value format (KAFKA: a Lenses ``_value STRING``) is kept only for a result of one
    value column; a record is written as JSON."""
    source = _leftmost_source(plan)
    if style == "flink" or source is None or source.bounded or source.changelog_format:
        return "KAFKA", "JSON"
    value_format = source.value_format
    if value_format == "KAFKA" and value_columns > 1:
        value_format = "JSON"
    if isinstance(plan, Project) and isinstance(plan.input, Repartition) and plan.input.reason == "AS _key":
        return "KAFKA", value_format  # Lenses writes the new key as the primitive it is
    key_format = source.key_format
    if key_format == "NONE" and any(not plan.field(k).hidden for k in plan.key):
        key_format = default_key_format  # ksqlDB: a result with a key is not written without one
    return key_format, value_format


def _leftmost_source(plan: PlanNode) -> Optional[SourceInfo]:
    return next((n.source for n in walk(plan) if isinstance(n, Scan)), None)


def _inherited_registry_formats(plan: PlanNode, props: dict) -> dict:
    """A JSON_SR key or value format of the query's left-most source, kept by its name for a ksqlDB sink that names
    none (its records are JSON here: ``connectors.formats.framed``)."""
    source = _leftmost_source(plan)
    if source is None:
        return {}
    return {f"{part}_format": "JSON_SR" for part in ("key", "value")
            if source.registry_framed(part) and not {f"{part}_format", "format"} & set(props)}


def _inherited_delimiter(plan: PlanNode, value_format: str) -> dict:
    """ksqlDB's sink that inherits the DELIMITED format of its left-most source inherits its VALUE_DELIMITER too."""
    source = _leftmost_source(plan)
    delimiter = dict(source.properties).get("value_delimiter") if source is not None else None
    return {"value_delimiter": delimiter} if value_format == "DELIMITED" and delimiter else {}


def _keyed_by_null(plan: PlanNode) -> bool:
    """Whether ``plan`` re-keys its records by ``PARTITION BY NULL`` (they have no key)."""
    return any(isinstance(n, Repartition) and all(isinstance(e, ast.Literal) and e.kind == "null" for e in n.by)
               for n in walk(plan))


def _check_ksql_insert(sink: SourceInfo, plan: PlanNode, pos) -> None:
    """ksqlDB's INSERT INTO: only into a stream, and a result whose schema is the stream's (the same column names,
    the same key columns; types alike, or a number the sink's number type takes: ``_takes``), in its words."""
    if sink.kind == "TABLE":
        raise StatementError(f"INSERT INTO can only be used to insert into a stream. {sink.name} is a table.",
                             rule="insert-into", pos=pos)
    if sink.read_only:
        raise StatementError(f"Cannot insert into read-only stream: {sink.name}", rule="read-only-source", pos=pos)
    if sink.reads_headers:
        raise StatementError(f"Cannot insert into {sink.name} because it has header columns", rule="insert-into-headers",
                             pos=pos)
    keys = [plan.field(k) for k in plan.key if not plan.field(k).hidden]
    result = [(f.name, f.type, True) for f in keys] + [(f.name, f.type, False) for f in plan.fields
                                                       if not f.hidden and f not in keys]
    stored = [(c.name, c.type, c.origin == "key") for c in sink.columns if c.origin in ("key", "value")]
    stored = [c for c in stored if c[2]] + [c for c in stored if not c[2]]

    def schema(cols) -> str:
        return ", ".join(f"`{n}` {ksql_type_name(t or 'string')}{' KEY' if key else ''}" for n, t, key in cols)

    if len(result) != len(stored) or any(
            rn.casefold() != sn.casefold() or rk != sk or not _takes(st, rt)
            for (rn, rt, rk), (sn, st, sk) in zip(result, stored)):
        raise StatementError(f"Incompatible schema between results and sink.\nResult schema is {schema(result)}\n"
                             f"Sink schema is {schema(stored)}", rule="insert-into", pos=pos)


_WIDER = {"int": ("bigint", "decimal", "double"), "bigint": ("decimal", "double"), "decimal": ("double",)}


def _takes(sink_type: str, result_type: str) -> bool:
    """Whether a sink column of ``sink_type`` takes a result column of ``result_type`` (unknown: it may): the same
    type, or a number ksqlDB casts to it implicitly (INT to BIGINT, DECIMAL or DOUBLE, ...)."""
    if not result_type or sink_type.lower() == result_type.lower():
        return True
    sink, result = _number_base(sink_type), _number_base(result_type)
    return sink in _WIDER.get(result, ()) or sink == result == "decimal"


def _number_base(spark_type: str) -> str:
    return spark_type.lower().split("(")[0].replace("integer", "int")


def _columns_of(plan: PlanNode, keys_in_value: bool) -> tuple[ColumnInfo, ...]:
    """A result's columns as its sink declares them: key columns first, in the key's order (ksqlDB's schema
    of a GROUP BY, PARTITION BY or join result), then the value columns in the projection's order."""
    visible = [f for f in plan.fields if not f.hidden]
    keys = [] if keys_in_value else [plan.field(k) for k in plan.key if not plan.field(k).hidden]
    values = [f for f in visible if f not in keys]
    return tuple(ColumnInfo(f.name, f.type or "string", "key" if f in keys else "value", nullable=f.nullable)
                 for f in keys + values)


__all__ = ["StatementPlanner", "PlannedStatement", "PlannedQuery"]


def _sink_timestamp(plan: PlanNode, props: dict, name: ast.Ident) -> Optional[str]:
    """ksqlDB's ``CREATE STREAM s WITH (TIMESTAMP='c') AS SELECT``: each record written gets the time in its
    column ``c`` (and readers of ``s`` take their event time from it)."""
    column = props.get("timestamp")
    if column is None:
        return None
    ksql = declared_by(plan, "ksql")
    for f in plan.fields:
        if not f.hidden and f.name.casefold() == str(column).casefold():
            if ksql and f.type:
                check_timestamp_column(f.name, f.type, props, name.pos)
            return f.name
    if ksql:
        raise StatementError(f"The TIMESTAMP column set in the WITH clause does not exist in the schema: "
                             f"'{str(column).upper()}'", rule="unknown-column", pos=name.pos)
    raise StatementError(f"TIMESTAMP property names {column}, which is not a column of the result",
                         rule="unknown-column", pos=name.pos)


def _check_ksql_case(written: ast.Ident, target: SourceInfo) -> None:
    """ksqlDB names are case-sensitive once resolved (an unquoted name upper-cased, a quoted one as written): INSERT
    VALUES into a ksqlDB source whose name differs only in case is refused with its hint."""
    if target.dialect != "ksql" or written.schema is not None:
        return
    resolved = display_name(written, "ksql")
    if resolved == target.name:
        return
    hint = (f'Did you mean "{target.name}"? Hint: wrap the source name in double quotes to make it case-sensitive.'
            if not written.quoted else f"Did you mean {target.name}? Hint: try removing double quotes from the source name.")
    raise StatementError(f"Cannot insert values into an unknown stream/table: `{resolved}`\n{hint}",
                         rule="unknown-source", pos=written.pos)

