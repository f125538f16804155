"""Turns one statement's lark parse tree (see grammar.lark) into the syntax tree of ast.py.

There is one method per grammar rule or alias, called bottom-up with the rule's position (``meta``) and its
children already built. Lark positions are relative to the statement's own text; ``AstBuilder`` shifts them
to the whole script (``origin`` is where the statement text starts). The few checks a context-free grammar
cannot express (a RANGE frame needs a time amount, a ROWS frame a row count, ...) raise ``InvalidSyntax``,
which the parser reports as a ``SqlSyntaxError``.
"""
from __future__ import annotations

from dataclasses import replace
from decimal import Decimal, InvalidOperation
from typing import NamedTuple, Optional

from lark import Token, Transformer, v_args

from . import ast
from .ast import NOWHERE, Pos

UNIT_MILLIS = {"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000}
COMPACT_UNITS = {"ms": "MILLISECOND", "s": "SECOND", "m": "MINUTE", "h": "HOUR", "d": "DAY"}
CURRENT_ROW = ast.FrameBound("CURRENT ROW")
CONDITIONS = (ast.IsNull, ast.Between, ast.InList, ast.InSelect, ast.Exists, ast.Like)  # predicates, not values
CONDITION_OPS = ("AND", "OR", "=", "<>", "<", "<=", ">", ">=", "<=>")  # <=>: IS [NOT] DISTINCT FROM


class InvalidSyntax(Exception):
    """A construct the grammar accepts but the language does not; ``pos`` is script-relative."""

    def __init__(self, reason: str, pos: Pos, found: str, expected: tuple[str, ...] = ()):
        super().__init__(reason)
        self.reason, self.pos, self.found, self.expected = reason, pos, found, expected


def shift(origin: Pos, line: int, column: int) -> Pos:
    """The script position of (line, column) of a statement whose text starts at ``origin``."""
    return Pos(origin.line + line - 1, column + (origin.column - 1 if line == 1 else 0))


def unquote(text: str) -> str:
    """The content of a quoted string or identifier: outer quotes removed, doubled quotes undoubled."""
    quote = text[0]
    return text[1:-1].replace(quote * 2, quote)


class _WithClause(NamedTuple):
    properties: tuple[ast.Property, ...]
    flink: bool  # a quoted property name or a 'connector' property


class _TablePrimaryKey(NamedTuple):
    columns: tuple[ast.Ident, ...]


class _FormatClause(NamedTuple):
    """Lenses ``FORMAT (key, value) [PROPERTIES (...)]``."""

    key: str
    value: str
    properties: tuple[ast.Property, ...]


class _SchemaPumps(NamedTuple):
    """``ALTER PUMP s.* ...``: every pump of schema ``s``."""

    schema: ast.Ident


@v_args(meta=True, inline=True)
class AstBuilder(Transformer):
    def __init__(self, origin: Pos, source: str):
        super().__init__()
        self._origin = origin
        self._source = source

    # ------------------------------------------------------------ positions and errors

    def _pos(self, meta) -> Pos:
        return NOWHERE if meta.empty else shift(self._origin, meta.line, meta.column)

    def _invalid(self, reason: str, meta, expected: tuple[str, ...] = ()) -> InvalidSyntax:
        found = self._source[meta.start_pos:meta.end_pos]
        return InvalidSyntax(reason, self._pos(meta), found, expected)

    # ------------------------------------------------------------ rules built alike

    def _flag(self, meta) -> bool:
        """An optional keyword group that is present, such as OR REPLACE or NOT (absent: None)."""
        return True

    or_replace = if_not_exists = if_exists = extended = delete_topic = local_time_zone = not_enforced = read_only = _flag
    negated = distinct = _flag

    def _word(self, meta, token: Token) -> str:
        """A keyword chosen among several, upper-cased: STREAM or TABLE, RANGE or ROWS, ..."""
        return token.upper()

    source_kind = result_kind = frame_unit = floor_name = sized_type_name = pump_state = pump_action = _word

    def _sequence(self, meta, *children) -> tuple:
        return children

    table_elements = select_list = expr_list = ident_list = call_args = _sequence

    def _inner(self, meta, child):
        """A clause whose value is its one child: ``AS alias``, ``OVER (spec)``, ``GRACE PERIOD d``, ..."""
        return child

    alias = over = system_time = column_aliases = window_partition = window_order = grace_period = _inner
    source_options = name_part = _inner
    else_clause = _inner

    # ------------------------------------------------------------ statements

    def create_source(self, meta, or_replace, read_only, kind, if_not_exists, name, elements, description, options):
        elements = elements or ()
        columns = tuple(e for e in elements if isinstance(e, ast.ColumnDef))
        keys = [e for e in elements if isinstance(e, _TablePrimaryKey)]
        if len(keys) > 1:
            raise self._invalid("more than one PRIMARY KEY constraint", meta)
        watermarks = [e for e in elements if isinstance(e, ast.Watermark)]
        if len(watermarks) > 1:
            raise self._invalid("more than one WATERMARK", meta)
        if isinstance(options, _FormatClause):
            dialect, properties, formats = "lenses", options.properties, (options.key, options.value)
        elif options is None:
            dialect, properties, formats = "sqlstream", (), None
        else:
            flink = options.flink or bool(keys or watermarks) or any(c.computed is not None for c in columns)
            dialect, properties, formats = "flink" if flink else "ksql", options.properties, None
        if dialect in ("lenses", "sqlstream") and (watermarks or any(c.computed is not None for c in columns)):
            raise self._invalid("WATERMARK and computed columns need a Flink WITH (...) clause", meta)
        if dialect != "lenses" and any(len(c.path) > 1 for c in columns):
            bad = next(c for c in columns if len(c.path) > 1)
            raise InvalidSyntax("a dotted column name needs Lenses' FORMAT (...) clause", bad.pos, ".".join(bad.path))
        return ast.CreateSource(
            kind, name, columns, properties,
            primary_key=keys[0].columns if keys else (),
            watermark=watermarks[0] if watermarks else None,
            style="flink" if dialect == "flink" else "ksql",
            or_replace=bool(or_replace), if_not_exists=bool(if_not_exists), pos=self._pos(meta),
            dialect=dialect, formats=formats, description=description, read_only=bool(read_only),
        )

    # SQLstream's Kafka foreign stream options, as the properties of a topic source
    _MED_OPTIONS = {"TOPIC": "topic", "PARSER": "value_format", "FORMATTER": "value_format", "SEPARATOR": "value_delimiter"}
    _MED_FORMATS = {"CSV": "DELIMITED"}

    def create_foreign_stream(self, meta, or_replace, name, elements, server, options, description):
        columns = tuple(e for e in elements or () if isinstance(e, ast.ColumnDef))
        properties = []
        for option in options or ():
            key = self._MED_OPTIONS.get(option.name.upper(), option.name.lower())
            value = self._MED_FORMATS.get(str(option.value).upper(), option.value) if key == "value_format" else option.value
            properties.append(ast.Property(key, value, pos=option.pos))
        properties.append(ast.Property("server", server.text, pos=server.pos))
        return ast.CreateSource("STREAM", name, columns, tuple(properties), or_replace=bool(or_replace),
                                pos=self._pos(meta), dialect="sqlstream", description=description)

    def create_foreign_table(self, meta, or_replace, name, elements, server, options, description):
        """A table in a database (the planner resolves its server): OPTIONS keep their names, lower-cased."""
        elements = elements or ()
        columns = tuple(e for e in elements if isinstance(e, ast.ColumnDef))
        keys = [e for e in elements if isinstance(e, _TablePrimaryKey)]
        properties = tuple(ast.Property(o.name.lower(), o.value, pos=o.pos) for o in options or ())
        return ast.CreateSource("TABLE", name, columns, properties + (ast.Property("server", server.text, pos=server.pos),),
                                primary_key=keys[0].columns if keys else (), or_replace=bool(or_replace),
                                pos=self._pos(meta), dialect="sqlstream", description=description)

    def create_server(self, meta, or_replace, name, type_, version, wrapper, options, description):
        return ast.CreateServer(name, wrapper, tuple(options or ()), unquote(type_) if type_ else None,
                                or_replace=bool(or_replace), pos=self._pos(meta))

    def options_clause(self, meta, *options):
        return options

    def med_option(self, meta, name, value):
        return ast.Property(name.text, unquote(value), pos=self._pos(meta))

    def format_clause(self, meta, key, value, properties):
        return _FormatClause(key.text, value.text, tuple(p for p, _ in properties or ()))

    def properties_clause(self, meta, *properties):
        return properties

    def description(self, meta, token):
        return unquote(token)

    def create_as_select(self, meta, or_replace, kind, if_not_exists, name, with_clause, query):
        properties = with_clause.properties if with_clause else ()
        return ast.CreateAsSelect(kind, name, query, properties, bool(or_replace), bool(if_not_exists),
                                  pos=self._pos(meta))

    def insert_into(self, meta, target, columns, store, query):
        key_format, value_format = store or (None, None)
        return ast.InsertInto(target, query, pos=self._pos(meta), columns=columns or (),
                              key_format=key_format, value_format=value_format)

    def insert_values(self, meta, target, columns, *rows):
        return ast.InsertValues(target, rows, columns or (), pos=self._pos(meta))

    def insert_columns(self, meta, *paths):
        return paths

    def values_row(self, meta, exprs):
        return tuple(exprs)

    def store_key_value(self, meta, key, value):
        return key.text, value.text if value is not None else None

    def store_value(self, meta, value):
        return None, value.text

    def create_view(self, meta, name, query):
        return ast.CreateView(name, query, pos=self._pos(meta))

    def create_sql_view(self, meta, or_replace, name, columns, description, query):
        return ast.CreateView(name, query, pos=self._pos(meta), columns=tuple(columns or ()), or_replace=bool(or_replace))

    def create_schema(self, meta, or_replace, name, description):
        return ast.CreateSchema(name, pos=self._pos(meta))

    def set_schema(self, meta, name):
        if isinstance(name, Token):  # SET SCHEMA 'stocks' names STOCKS, SET SCHEMA '"stocks"' stocks (SQLstream)
            text = unquote(name)
            quoted = text.startswith('"') and text.endswith('"') and len(text) > 1
            name = ast.Ident(unquote(text) if quoted else text, quoted, pos=self._pos(meta))
        return ast.SetSchema(name, pos=self._pos(meta))

    def create_pump(self, meta, or_replace, name, state, description, insert):
        return ast.CreatePump(name, insert, stopped=state == "STOPPED", or_replace=bool(or_replace), pos=self._pos(meta))

    def alter_pump(self, meta, *targets_and_action):
        *targets, action = targets_and_action
        names = tuple(t for t in targets if isinstance(t, ast.Ident))
        schemas = tuple(t.schema for t in targets if isinstance(t, _SchemaPumps))
        return ast.AlterPump(names, action, schemas, pos=self._pos(meta))

    def pumps_of_schema(self, meta, schema):
        return _SchemaPumps(schema)

    def object_name(self, meta, first, second):
        if second is None:
            return first
        return ast.Ident(second.text, second.quoted, pos=first.pos, schema=first)

    def dashed_name(self, meta, *parts):
        """A Lenses topic name with dashes (``daily-item-stats``): kept exactly as written."""
        return ast.Ident(self._source[meta.start_pos:meta.end_pos].replace(" ", ""), True, pos=self._pos(meta))

    def create_function(self, meta, name, history, time_column, key_column):
        return ast.CreateTemporalTableFunction(name, history, time_column, key_column, pos=self._pos(meta))

    def query(self, meta, select, limit):
        return ast.QueryStatement(select, limit, pos=self._pos(meta))

    def limit_clause(self, meta, count):
        return int(count)

    def set_property(self, meta, name, value):
        return ast.SetProperty(self._setting(name), self._setting(value), pos=self._pos(meta))

    @staticmethod
    def _setting(value) -> str:
        """A SET name or value: a string literal's content, or a dotted name or number as written."""
        return unquote(value) if isinstance(value, Token) and value.type == "STRING" else str(value)

    def dotted_name(self, meta, *parts):
        return ".".join(part.text for part in parts)

    def explain(self, meta, statement):
        return ast.Explain(statement, pos=self._pos(meta))

    def describe(self, meta, extended, name):
        return ast.Describe(name, bool(extended), pos=self._pos(meta))

    def drop(self, meta, kind, if_exists, name, delete_topic):
        return ast.Drop(kind, name, bool(if_exists), bool(delete_topic), pos=self._pos(meta))

    def create_type(self, meta, if_not_exists, name, type_):
        return ast.CreateType(name, type_, bool(if_not_exists), pos=self._pos(meta))

    def drop_type(self, meta, if_exists, name):
        return ast.DropType(name, bool(if_exists), pos=self._pos(meta))

    def alter_source(self, meta, kind, name, *added):
        return ast.AlterSource(str(kind).upper(), name, tuple(added), pos=self._pos(meta))

    def added_column(self, meta, name, type_):
        return ast.ColumnDef(name, type_, pos=self._pos(meta))

    # ------------------------------------------------------------ DDL

    def column_def(self, meta, path, type_, *constraints):
        metadata = next((c for c in constraints if isinstance(c, tuple)), None)
        name = path[0] if len(path) == 1 else ast.Ident(".".join(p.text for p in path), path[0].quoted, pos=path[0].pos)
        return ast.ColumnDef(name, type_, key="KEY" in constraints, primary_key="PRIMARY KEY" in constraints,
                             metadata=metadata, pos=self._pos(meta), not_null="NOT NULL" in constraints,
                             path=tuple(p.text for p in path) if len(path) > 1 else ())

    def column_path(self, meta, *parts):
        return parts

    def column_constraint(self, meta, first, *rest):
        """'KEY', 'PRIMARY KEY', or a record field the column reads: ('headers', None) for KSQL's HEADERS,
        ('header', name) for HEADER('name'), ('metadata', key or None) for Flink's METADATA [FROM key]."""
        word = first.upper()
        strings = [unquote(t) for t in rest if isinstance(t, Token) and t.type == "STRING"]
        if word == "HEADERS":
            return ("headers", None)
        if word == "HEADER":
            return ("header", strings[0])
        if word == "METADATA":
            return ("metadata", strings[0] if strings else None)
        if word in ("NOT", "NULL"):
            return "NOT NULL" if word == "NOT" else "NULL"
        return "KEY" if word == "KEY" else "PRIMARY KEY"

    def computed_column(self, meta, name, expr):
        return ast.ColumnDef(name, None, computed=expr, pos=self._pos(meta))

    def table_primary_key(self, meta, columns, not_enforced):
        return _TablePrimaryKey(columns)

    def watermark(self, meta, column, expr):
        return ast.Watermark(column, expr, pos=self._pos(meta))

    def with_clause(self, meta, *properties):
        flink = any(quoted or p.name.lower() == "connector" for p, quoted in properties)
        return _WithClause(tuple(p for p, _ in properties), flink)

    def property(self, meta, name, value):
        quoted = isinstance(name, ast.Literal)
        text = name.value if quoted else name.text
        return ast.Property(text, value.value, pos=self._pos(meta)), quoted

    def plain_type(self, meta, name):
        return ast.TypeName(name.upper(), pos=self._pos(meta))

    def sized_type(self, meta, name, size=None):  # no size: ksqlDB's VARCHAR(STRING)
        return ast.TypeName(name, self._params(size), pos=self._pos(meta))

    def timestamp_type(self, meta, precision, local_time_zone):
        name = "TIMESTAMP_LTZ" if local_time_zone else "TIMESTAMP"
        return ast.TypeName(name, self._params(precision), pos=self._pos(meta))

    def decimal_type(self, meta, precision, scale):
        return ast.TypeName("DECIMAL", self._params(precision, scale), pos=self._pos(meta))

    @staticmethod
    def _params(*tokens: Optional[Token]) -> tuple[int, ...]:
        return tuple(int(t) for t in tokens if t is not None)

    def array_type(self, meta, element):
        return ast.TypeName("ARRAY", args=(element,), pos=self._pos(meta))

    def map_type(self, meta, key, value):
        return ast.TypeName("MAP", args=(key, value), pos=self._pos(meta))

    def struct_type(self, meta, *fields):
        return ast.TypeName("STRUCT", fields=tuple((name.text, type_) for name, type_ in fields),
                            quoted_fields=frozenset(name.text for name, _ in fields if name.quoted), pos=self._pos(meta))

    def named_type(self, meta, name):  # a type named by CREATE TYPE (``plan.statements`` resolves it)
        if not name.quoted and name.text.upper() in ("NULL", "TRUE", "FALSE"):  # literals, no names
            raise InvalidSyntax("syntax error", self._pos(meta), name.text, ("type",))
        return ast.TypeName(name.text.upper(), pos=self._pos(meta))

    def struct_field(self, meta, name, type_):
        return name, type_

    # ------------------------------------------------------------ SELECT

    def select(self, meta, result_kind, items, from_, *clauses):
        parts: dict = {}
        windows: tuple = ()
        bare: tuple = ()
        for key, value in clauses:
            if key == "windows":
                windows += value
            elif key in ("group_by", "partition_by"):
                parts[key] = tuple(e for e, _ in value)
                bare += tuple(pos for _, pos in value if pos is not None)
            else:
                parts[key] = value
        return ast.Select(items, from_, windows=windows, result_kind=result_kind, pos=self._pos(meta),
                          bare_conditions=bare, **parts)

    def star_item(self, meta):
        return ast.SelectItem(ast.Star(pos=self._pos(meta)), pos=self._pos(meta))

    def qualified_star(self, meta, qualifier):
        return ast.SelectItem(ast.Star(qualifier, pos=self._pos(meta)), pos=self._pos(meta))

    def expr_item(self, meta, expr, alias):
        return ast.SelectItem(expr, alias, pos=self._pos(meta))

    def where_clause(self, meta, expr):
        return "where", expr

    def group_clause(self, meta, items):
        return "group_by", items

    def group_clause_list(self, meta, first, rest):  # ksqlDB: GROUP BY (a, b) groups by a and b
        return "group_by", (first, *rest)

    def key_items(self, meta, *items):
        return items

    def key_item(self, meta, expr):
        """A GROUP BY or PARTITION BY item, and where it is a condition not in parentheses (``a AND b``, ``a = b``):
        ksqlDB's grammar takes only value expressions there (``Select.bare_conditions``)."""
        bare = isinstance(expr, CONDITIONS) or (isinstance(expr, ast.BinaryOp) and expr.op in CONDITION_OPS) or (
            isinstance(expr, ast.UnaryOp) and expr.op == "NOT")
        return expr, self._pos(meta) if bare and not _enclosed(self._source[meta.start_pos:meta.end_pos]) else None

    def having_clause(self, meta, expr):
        return "having", expr

    def window_clause(self, meta, *windows):
        return "windows", windows

    def named_window(self, meta, name, spec):
        return name, spec

    def time_window(self, meta, _name, kind, *args):
        kind = kind.upper()
        parts: dict = {}
        for key, interval in args:
            if key == "gap":  # a SESSION window's one positional duration is its gap, kept as its size
                key = "size" if kind == "SESSION" else "unnamed"
            if key == "unnamed":
                raise self._invalid(f"WINDOW {kind}: a duration needs its name (SIZE, ADVANCE BY, ...)", meta)
            if key in parts:
                raise self._invalid(f"WINDOW {kind}: {key.upper()} is given twice", meta)
            parts[key] = interval.millis
        return "time_window", ast.TimeWindow(kind, parts.get("size"), parts.get("advance"), parts.get("retention"),
                                             parts.get("grace"), pos=self._pos(meta))

    def time_window_kind(self, meta, word):
        return str(word)

    def window_size(self, meta, d):
        return "size", d

    def window_advance(self, meta, d):
        return "advance", d

    def window_retention(self, meta, d):
        return "retention", d

    def window_grace(self, meta, d):
        return "grace", d

    def window_gap(self, meta, d):
        return "gap", d

    def lenses_time_window(self, meta, window, grace):
        kind, size, advance = window
        return "time_window", ast.TimeWindow(kind, size, advance, None, grace.millis if grace else None,
                                             pos=self._pos(meta))

    def lenses_tumble(self, meta, size):
        return "TUMBLING", size.millis, None

    def lenses_hop(self, meta, size, advance):
        return "HOPPING", size.millis, advance.millis

    def lenses_session(self, meta, gap):
        return "SESSION", gap.millis, None

    def lenses_sliding(self, meta, size):
        return "SLIDING", size.millis, None

    def lenses_grace(self, meta, d):
        return d

    def partition_clause(self, meta, items):
        return "partition_by", items

    def partition_clause_list(self, meta, first, rest):  # ksqlDB: PARTITION BY (a, b)
        return "partition_by", (first, *rest)

    def empty_partition_clause(self, meta):
        raise InvalidSyntax("PARTITION BY requires at least one expression", self._pos(meta), "()", ("expression",))

    def emit_clause(self, meta, emit, kind):
        return "emit", kind.upper()

    # ------------------------------------------------------------ FROM

    def join_within_after(self, meta, left, join_op, right, within, condition, within_after):
        """Lenses writes WITHIN after ON (its seed example writes it on both sides of ON): one window."""
        if within is not None and within != replace(within_after, pos=within.pos):
            raise self._invalid("the join has two different WITHIN windows", meta)
        return self.join(meta, left, join_op, right, within_after, condition)

    def join(self, meta, left, join_op, right, within, condition):
        kind, natural = join_op
        on = condition[1] if condition and condition[0] == "on" else None
        using = condition[1] if condition and condition[0] == "using" else None
        return ast.Join(left, right, kind, on, using, natural, within, pos=self._pos(meta))

    def comma_join(self, meta, left, right):
        return ast.Join(left, right, "COMMA", pos=self._pos(meta))

    def lenses_lateral(self, meta, source, expr, alias):
        return ast.Lateral(source, expr, alias, pos=self._pos(meta))

    def window_table(self, meta, name, *rest):
        *args, alias = rest
        named = {n.text.casefold(): v for n, v in args if n is not None}
        positional = [v for n, v in args if n is None]
        table = named.pop("data", None) or (positional.pop(0) if positional else None)
        time = named.pop("timecol", None) or (positional.pop(0) if positional else None)
        order = {"TUMBLE": ("size",), "HOP": ("slide", "size"), "CUMULATE": ("step", "size")}.get(name.text.upper(), ())
        sizes = [named.pop(n) if n in named else (positional.pop(0) if positional else None) for n in order]
        if not isinstance(table, tuple) or table[0] != "table" or not isinstance(time, tuple) or time[0] != "descriptor" \
                or not order or None in sizes or positional or named:
            raise self._invalid(f"{name.text}(TABLE t, DESCRIPTOR(time_column), INTERVAL ...): a windowing table function "
                                "TUMBLE(size), HOP(slide, size) or CUMULATE(step, size)", meta)
        return ast.WindowTable(name.text.upper(), table[1], time[1], tuple(sizes), alias, pos=self._pos(meta))

    def tvf_arg(self, meta, name, value):
        return name, value

    def tvf_table(self, meta, name):
        return "table", name

    def tvf_descriptor(self, meta, column):
        return "descriptor", column

    def lateral_table(self, meta, call, alias, column_aliases):
        return ast.LateralTable(call, alias, column_aliases or (), pos=self._pos(meta))

    def relation(self, meta, name, over, system_time, alias, over_after_alias, event_time):
        if over is not None and over_after_alias is not None:
            raise self._invalid("more than one OVER clause", meta)
        window = over if over is not None else over_after_alias
        return ast.Relation(
            name, alias,
            window=window if isinstance(window, ast.WindowSpec) else None,
            window_name=window if isinstance(window, ast.Ident) else None,
            system_time=system_time, pos=self._pos(meta), event_time=event_time,
        )

    def eventtime_by(self, meta, expr):
        return expr

    def over_name(self, meta, name):
        return name

    def join_op(self, meta, kind):
        return kind or "INNER", False

    def cross_join(self, meta):
        return "CROSS", False

    def natural_join(self, meta, kind):
        return kind or "INNER", True

    def inner(self, meta):
        return "INNER"

    def left(self, meta):
        return "LEFT"

    def right(self, meta):
        return "RIGHT"

    def full(self, meta):
        return "FULL"

    def within(self, meta, *args):
        *spans, grace = args
        return ast.Within(spans[0].millis, spans[-1].millis, grace.millis if grace else None, pos=self._pos(meta))

    def on_condition(self, meta, expr):
        return "on", expr

    def using_condition(self, meta, columns):
        return "using", columns

    # ------------------------------------------------------------ windows

    def window_spec(self, meta, base, partition_by, order_by, frame):
        unit, lower, upper = frame
        return ast.WindowSpec(unit, lower, upper, order_by, partition_by or (), base, pos=self._pos(meta))

    def frame(self, meta, unit, lower, upper=None):
        """A single bound X means BETWEEN X AND CURRENT ROW."""
        return unit, self._bound(unit, lower), (self._bound(unit, upper) if upper else CURRENT_ROW)

    def _bound(self, unit: str, bound) -> ast.FrameBound:
        """A FrameBound from (kind, amount node, meta); RANGE amounts are times, ROWS amounts counts."""
        kind, amount, meta = bound
        if amount is None:
            return ast.FrameBound(kind)
        if unit == "RANGE":
            if not isinstance(amount, ast.Interval):
                raise self._invalid("a RANGE frame bound needs a time amount", meta, ("INTERVAL", "duration"))
            return ast.FrameBound(kind, amount.millis)
        if not isinstance(amount, ast.Literal):
            raise self._invalid("a ROWS frame bound needs a row count", meta, ("number",))
        return ast.FrameBound(kind, amount.value)

    def unbounded_preceding(self, meta):
        return "UNBOUNDED PRECEDING", None, meta

    def current_row(self, meta):
        return "CURRENT ROW", None, meta

    def preceding(self, meta, amount):
        return "PRECEDING", amount, meta

    def following(self, meta, amount):
        return "FOLLOWING", amount, meta

    # ------------------------------------------------------------ expressions

    def or_op(self, meta, left, right):
        return ast.BinaryOp("OR", left, right, pos=self._pos(meta))

    def and_op(self, meta, left, right):
        return ast.BinaryOp("AND", left, right, pos=self._pos(meta))

    def not_op(self, meta, operand):
        return ast.UnaryOp("NOT", operand, pos=self._pos(meta))

    def comparison(self, meta, left, op, right):
        return ast.BinaryOp(op, left, right, pos=self._pos(meta))

    def comparison_op(self, meta, op):
        return "<>" if op == "!=" else str(op)

    def additive_op(self, meta, op):
        return str(op)

    multiplicative_op = additive_op

    def is_null(self, meta, operand, negated):
        return ast.IsNull(operand, bool(negated), pos=self._pos(meta))

    def distinct_from(self, meta, left, negated, right):
        """``a IS NOT DISTINCT FROM b`` (equal, two NULLs included) is ``a <=> b``; IS DISTINCT FROM its negation."""
        same = ast.BinaryOp("<=>", left, right, pos=self._pos(meta))
        return same if negated else ast.UnaryOp("NOT", same, pos=self._pos(meta))

    def between(self, meta, operand, negated, low, high):
        return ast.Between(operand, low, high, bool(negated), pos=self._pos(meta))

    def in_list(self, meta, operand, negated, items):
        return ast.InList(operand, items, bool(negated), pos=self._pos(meta))

    def in_select(self, meta, operand, negated, query):
        return ast.InSelect(operand, query, bool(negated), pos=self._pos(meta))

    def exists(self, meta, query):
        return ast.Exists(query, pos=self._pos(meta))

    def like(self, meta, operand, negated, pattern, escape):
        if escape is not None:
            escape = escape[1:-1].replace("''", "'")
            if len(escape) != 1:
                raise self._invalid(f"Expected single character escape but got: {escape}", meta, ("one character",))
        return ast.Like(operand, pattern, bool(negated), escape, pos=self._pos(meta))

    def concat_op(self, meta, left, right):
        return ast.BinaryOp("||", left, right, pos=self._pos(meta))

    def arithmetic(self, meta, left, op, right):
        return ast.BinaryOp(op, left, right, pos=self._pos(meta))

    def negate(self, meta, operand):
        return ast.UnaryOp("-", operand, pos=self._pos(meta))

    def element(self, meta, base, index):
        return ast.Subscript(base, index=index, pos=self._pos(meta))

    def field(self, meta, base, name):
        return ast.Subscript(base, field=name, pos=self._pos(meta))

    def struct_star(self, meta, base):
        return ast.StructStar(base, pos=self._pos(meta))

    def string_literal(self, meta, token):
        return ast.Literal(unquote(token), "string", pos=self._pos(meta))

    def integer_literal(self, meta, token):
        return ast.Literal(int(token), "integer", pos=self._pos(meta))

    def decimal_literal(self, meta, token):
        return ast.Literal(str(token), "decimal", pos=self._pos(meta))

    def true_literal(self, meta):
        return ast.Literal(True, "boolean", pos=self._pos(meta))

    def false_literal(self, meta):
        return ast.Literal(False, "boolean", pos=self._pos(meta))

    def null_literal(self, meta):
        return ast.Literal(None, "null", pos=self._pos(meta))

    def interval(self, meta, amount, unit):
        text = unquote(amount) if amount.type == "STRING" else str(amount)
        try:
            millis = Decimal(text.strip()) * UNIT_MILLIS[unit.unit]
        except InvalidOperation:
            raise self._invalid("an INTERVAL needs a number", meta, ("number",)) from None
        if millis != millis.to_integral_value():
            raise self._invalid("an INTERVAL must be a whole number of milliseconds", meta)
        return ast.Interval(int(millis), pos=self._pos(meta))

    def duration(self, meta, amount, unit=None):
        if unit is None:  # compact Lenses form such as 5s or 100ms
            digits = amount.rstrip("msdhMSDH")
            unit = ast.TimeUnit(COMPACT_UNITS[amount[len(digits):].lower()])
            amount = digits
        return ast.Interval(int(amount) * UNIT_MILLIS[unit.unit], pos=self._pos(meta))

    def time_unit(self, meta, word):
        unit = word.upper()
        return ast.TimeUnit(unit[:-1] if unit.endswith("S") else unit, pos=self._pos(meta))

    def column_ref(self, meta, *parts):
        pos = self._pos(meta)
        if len(parts) == 1:
            return ast.Column(parts[0], pos=pos)
        node = ast.Column(parts[1], parts[0], pos=pos)
        for name in parts[2:]:
            node = ast.Subscript(node, field=name, pos=pos)
        return node

    def function_call(self, meta, name, distinct, args):
        args = tuple(args or ())
        named = [a for a in args if isinstance(a, tuple)]
        called = name.text.upper()
        if named and (len(named) != len(args) or called not in ("STRUCT", "MAP") or distinct):
            raise self._invalid("'name := value' arguments are only for the STRUCT(...) and MAP(...) constructors", meta,
                                ("STRUCT(name := value, ...)", "MAP(key := value, ...)"))
        if called == "STRUCT" and not args and not distinct:  # ksqlDB's empty STRUCT(): a STRUCT<> value
            return ast.StructLiteral((), pos=self._pos(meta))
        if named and called == "STRUCT":  # ksqlDB's STRUCT(f := expr, ...)
            fields = []
            for field, value in named:
                if not isinstance(field, ast.Column) or field.qualifier is not None:
                    raise self._invalid("a STRUCT field's name must be a plain name", meta, ("identifier",))
                fields.append((field.name, value))
            return ast.StructLiteral(tuple(fields), pos=self._pos(meta))
        if named:  # ksqlDB's MAP(key := value, ...)
            return ast.MapLiteral(tuple(named), pos=self._pos(meta))
        return ast.Call(called, args, distinct=bool(distinct), pos=self._pos(meta))

    def named_arg(self, meta, name, value):
        return (name, value)

    def lambda_arg(self, meta, *parts):
        *params, body = parts
        return ast.Lambda(tuple(p.text.upper() for p in params), body, pos=self._pos(meta))

    def lambda_of_one(self, meta, param, body):  # ``(x) => ...``: the parenthesised parameter parses as an expression
        if not (isinstance(param, ast.Column) and param.qualifier is None):
            raise InvalidSyntax("syntax error", getattr(param, "pos", self._pos(meta)), "=>", ("identifier",))
        return ast.Lambda((param.name.text.upper(),), body, pos=self._pos(meta))

    def star_call(self, meta, name):
        return ast.Call(name.text.upper(), star=True, pos=self._pos(meta))

    def floor_call(self, meta, name, operand, unit):
        args = (operand,) if unit is None else (operand, unit)
        return ast.Call(name, args, pos=self._pos(meta))

    def cast(self, meta, operand, type_):
        return ast.Cast(operand, type_, pos=self._pos(meta))

    def case(self, meta, operand, *rest):
        *whens, else_ = rest
        return ast.Case(tuple(whens), else_, operand, pos=self._pos(meta))

    def when_clause(self, meta, condition, result):
        return condition, result

    def array(self, meta, items):
        return ast.ArrayLiteral(items or (), pos=self._pos(meta))

    def ident(self, meta, token):
        quoted = token[0] in "\"`"
        return ast.Ident(unquote(token) if quoted else str(token), quoted, pos=self._pos(meta))


def _enclosed(text: str) -> bool:
    """Whether ``text`` (an expression's source) is one parenthesized whole: ``(a AND b)``, not ``(a) AND (b)``.
    Parentheses inside quoted text and identifiers do not count."""
    text = text.strip()
    if not text.startswith("("):
        return False
    depth, quote = 0, None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote  # a doubled quote closes and reopens: same depth either way
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i == len(text) - 1
    return False
