"""Syntax tree produced by the SQL front end.

Every node is a small frozen dataclass. Names are kept exactly as written (``quoted`` says whether the
identifier was double- or back-quoted); case folding is the binder's job, not the parser's. Durations are
normalised to milliseconds. ``pos`` is the (line, column) of the node's first token in the script, 1-based;
it takes no part in equality.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass(frozen=True)
class Pos:
    line: int = 0
    column: int = 0

    def __str__(self) -> str:  # as ksqlDB's NodeLocation writes a position (1-based, in the whole script)
        return f"Line: {self.line}, Col: {self.column}"


NOWHERE = Pos()


def _pos() -> Any:
    return field(default=NOWHERE, compare=False, repr=False)


# ---------------------------------------------------------------- identifiers and types


@dataclass(frozen=True)
class Ident:
    """An identifier as written. ``quoted`` identifiers are case-sensitive. ``schema``: the schema a
    SQLstream object name is qualified with (``stocks.order_quantity``), if any."""

    text: str
    quoted: bool = False
    pos: Pos = _pos()
    schema: Optional["Ident"] = None


@dataclass(frozen=True)
class TypeName:
    """A column type: ``INT``, ``VARCHAR(8)``, ``DECIMAL(10, 4)``, ``TIMESTAMP(3)``, ``ARRAY<INT>``,
    ``MAP<STRING, INT>``, ``STRUCT<a INT, b STRING>``. ``name`` is upper-cased."""

    name: str
    params: tuple[int, ...] = ()
    args: tuple["TypeName", ...] = ()  # ARRAY element, MAP key and value
    fields: tuple[tuple[str, "TypeName"], ...] = ()  # STRUCT fields, named as written
    quoted_fields: frozenset[str] = frozenset()  # the STRUCT field names written in quotes
    pos: Pos = _pos()


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Expr:
    pass


@dataclass(frozen=True)
class Column(Expr):
    """``name`` or ``qualifier.name`` (ROWTIME, ROWKEY and _key are plain columns here)."""

    name: Ident
    qualifier: Optional[Ident] = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class Star(Expr):
    """``*`` or ``qualifier.*``."""

    qualifier: Optional[Ident] = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class StructStar(Expr):
    """ksqlDB's ``s->*`` in a SELECT list: every field of the STRUCT ``s``, each a column named after it."""

    base: Expr
    pos: Pos = _pos()


@dataclass(frozen=True)
class Literal(Expr):
    """``kind`` is one of 'string', 'integer', 'decimal', 'boolean', 'null'. ``value`` is the Python value
    (str, int, decimal text as str, bool, None)."""

    value: Any
    kind: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Interval(Expr):
    """``INTERVAL '4' HOUR`` (or a Lenses duration used as a value), in milliseconds."""

    millis: int
    pos: Pos = _pos()


@dataclass(frozen=True)
class TimeUnit(Expr):
    """A bare time unit used as a function argument, e.g. the HOUR of ``FLOOR(ROWTIME TO HOUR)``."""

    unit: str  # upper-cased, singular: SECOND, MINUTE, HOUR, DAY, ...
    pos: Pos = _pos()


@dataclass(frozen=True)
class Call(Expr):
    """A function call. ``name`` upper-cased. ``COUNT(*)`` has ``star=True`` and no args.
    ``FLOOR(x TO HOUR)`` is ``Call('FLOOR', (x, TimeUnit('HOUR')))``. ``PROCTIME()`` is a Call. ``ksql``: a call of
    one of ksqlDB's own scalar functions over its inputs, whose arguments are converted to the parameters of the
    signature ksqlDB picks (``plan.ksql_signatures``)."""

    name: str
    args: tuple[Expr, ...] = ()
    star: bool = False
    distinct: bool = False
    pos: Pos = _pos()
    ksql: bool = False


@dataclass(frozen=True)
class BinaryOp(Expr):
    """``op`` is one of: + - * / % || = <> < <= > >= AND OR <=>  (``!=`` is normalised to ``<>``; ``<=>`` is
    IS NOT DISTINCT FROM: equal, or both NULL). ``null_is_false``: a comparison that is FALSE, not NULL, when an
    operand is NULL (ksqlDB's: ``plan.functions.ksql_comparisons``)."""

    op: str
    left: Expr
    right: Expr
    pos: Pos = _pos()
    null_is_false: bool = False


@dataclass(frozen=True)
class UnaryOp(Expr):
    """``op`` is 'NOT' or '-'."""

    op: str
    operand: Expr
    pos: Pos = _pos()


@dataclass(frozen=True)
class IsNull(Expr):
    operand: Expr
    negated: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class Between(Expr):
    """``null_is_false``: as ``BinaryOp``'s (ksqlDB's NOT BETWEEN is the NOT of its BETWEEN)."""

    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False
    pos: Pos = _pos()
    null_is_false: bool = False


@dataclass(frozen=True)
class InList(Expr):
    """``ksql``: ksqlDB's IN, whose values are brought to one type first (``plan.ksql_coercion``) and which is FALSE,
    not NULL, when nothing matches (a NULL operand or value matches nothing)."""

    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False
    pos: Pos = _pos()
    ksql: bool = False


@dataclass(frozen=True)
class Lambda(Expr):
    """ksqlDB's ``x => body`` or ``(a, b) => body``, an argument of TRANSFORM, FILTER and REDUCE; ``params``
    upper-cased (a lambda's variables are named in any case)."""

    params: tuple[str, ...]
    body: Expr
    pos: Pos = _pos()


@dataclass(frozen=True)
class LambdaVar(Expr):
    """A lambda's variable in its body, bound to the type it takes (``plan.binder``)."""

    name: str
    type: str = ""
    pos: Pos = _pos()


@dataclass(frozen=True)
class InSelect(Expr):
    """``operand [NOT] IN (SELECT e FROM ...)``: a WHERE term the binder turns into a semi or anti join."""

    operand: Expr
    query: "Select"
    negated: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class Exists(Expr):
    """``EXISTS (SELECT ... FROM ... WHERE ...)``: a WHERE term the binder turns into a semi join (an anti join
    under NOT)."""

    query: "Select"
    pos: Pos = _pos()


@dataclass(frozen=True)
class Like(Expr):
    """``escape``: the character ESCAPE names. ``ksql``: ksqlDB's LIKE, which has no escape character unless ESCAPE
    names one, and whose escape character makes any character after it literal (``LikeEvaluator``)."""

    operand: Expr
    pattern: Expr
    negated: bool = False
    escape: Optional[str] = None
    pos: Pos = _pos()
    ksql: bool = False


@dataclass(frozen=True)
class Cast(Expr):
    """``ksql``: ksqlDB's, which writes a TIME as text without its fraction (``SqlTimeTypes.formatTime``)."""

    operand: Expr
    type: TypeName
    pos: Pos = _pos()
    ksql: bool = False


@dataclass(frozen=True)
class ArrayLiteral(Expr):
    """``[a, b]`` (Lenses) or ``ARRAY[a, b]``. ``ksql``: ksqlDB's, whose elements are brought to one type first
    (``plan.ksql_coercion``)."""

    items: tuple[Expr, ...]
    pos: Pos = _pos()
    ksql: bool = False


@dataclass(frozen=True)
class StructLiteral(Expr):
    """ksqlDB's ``STRUCT(name := value, ...)``."""

    fields: tuple[tuple[Ident, Expr], ...]
    pos: Pos = _pos()


@dataclass(frozen=True)
class MapLiteral(Expr):
    """ksqlDB's ``MAP(key := value, ...)``; ``ksql``: its keys, and its values, brought to one type each first."""

    entries: tuple[tuple[Expr, Expr], ...]
    pos: Pos = _pos()
    ksql: bool = False


@dataclass(frozen=True)
class Case(Expr):
    """Searched CASE (``operand`` None) or simple CASE."""

    whens: tuple[tuple[Expr, Expr], ...]
    else_: Optional[Expr] = None
    operand: Optional[Expr] = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class Subscript(Expr):
    """``base[index]`` (array element) or ``base->field`` / ``base.field`` on a struct (``field`` set)."""

    base: Expr
    index: Optional[Expr] = None
    field: Optional[Ident] = None
    pos: Pos = _pos()


# ---------------------------------------------------------------- windows and time


@dataclass(frozen=True)
class Within:
    """``WITHIN d`` (before = after = d), ``WITHIN (before, after)``, optional ``GRACE PERIOD g``."""

    before_ms: int
    after_ms: int
    grace_ms: Optional[int] = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class TimeWindow:
    """ksqlDB's ``WINDOW TUMBLING (SIZE d)``, ``HOPPING (SIZE d, ADVANCE BY a)`` or ``SESSION (gap)``, each with an
    optional ``RETENTION r`` and ``GRACE PERIOD g`` (ms; None when not written)."""

    kind: str  # TUMBLING HOPPING SESSION
    size_ms: Optional[int] = None  # the session gap for SESSION
    advance_ms: Optional[int] = None
    retention_ms: Optional[int] = None
    grace_ms: Optional[int] = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class FrameBound:
    """One end of an OVER frame. ``kind``: 'UNBOUNDED PRECEDING', 'PRECEDING', 'CURRENT ROW', 'FOLLOWING'.
    ``amount`` is milliseconds in a RANGE frame, a row count in a ROWS frame (None for the other kinds)."""

    kind: str
    amount: Optional[int] = None


@dataclass(frozen=True)
class WindowSpec:
    """An OVER (...) specification, inline or from a WINDOW clause.

    ``RANGE INTERVAL '1' MINUTE PRECEDING`` is lower=PRECEDING 60000, upper=CURRENT ROW.
    ``ORDER BY FLOOR(ROWTIME TO HOUR) RANGE CURRENT ROW`` has ``order_by`` set and both bounds CURRENT ROW.
    ``base`` names a WINDOW-clause window this one refines (``OVER (w ...)``), if any."""

    unit: str  # 'RANGE' or 'ROWS'
    lower: FrameBound
    upper: FrameBound
    order_by: Optional[Expr] = None
    partition_by: tuple[Expr, ...] = ()
    base: Optional[Ident] = None
    pos: Pos = _pos()


# ---------------------------------------------------------------- FROM clause


@dataclass(frozen=True)
class FromItem:
    pass


@dataclass(frozen=True)
class Relation(FromItem):
    """A named stream/table/view, optionally with an alias, an OVER window (inline ``window`` or the name of
    a WINDOW-clause window in ``window_name``), a temporal clause ``FOR SYSTEM_TIME AS OF expr`` and Lenses'
    ``EVENTTIME BY expr``."""

    name: Ident
    alias: Optional[Ident] = None
    window: Optional[WindowSpec] = None
    window_name: Optional[Ident] = None
    system_time: Optional[Expr] = None
    pos: Pos = _pos()
    event_time: Optional[Expr] = None  # Lenses ``EVENTTIME BY expr``: the field records take their time from


@dataclass(frozen=True)
class LateralTable(FromItem):
    """Flink ``LATERAL TABLE (f(args)) AS alias [(col, ...)]``."""

    call: Call
    alias: Optional[Ident] = None
    column_aliases: tuple[Ident, ...] = ()
    pos: Pos = _pos()


@dataclass(frozen=True)
class Join(FromItem):
    """``kind``: 'INNER', 'LEFT', 'RIGHT', 'FULL', 'CROSS', 'COMMA' (``FROM a, b``), or 'SEMI' / 'ANTI' (from
    ``[NOT] EXISTS`` and ``[NOT] IN`` subqueries in WHERE: the left rows with / without a match).
    ``natural``: NATURAL JOIN. At most one of ``on`` / ``using`` is set. Joins are left-deep: a chain
    ``a JOIN b JOIN c`` is ``Join(Join(a, b), c)``."""

    left: FromItem
    right: FromItem
    kind: str
    on: Optional[Expr] = None
    using: Optional[tuple[Ident, ...]] = None
    natural: bool = False
    within: Optional[Within] = None
    pos: Pos = _pos()
    null_aware: bool = False  # an ANTI join from NOT IN: a NULL on either side of its equality makes it unknown


@dataclass(frozen=True)
class WindowTable(FromItem):
    """Flink's windowing table-valued function ``TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), size))`` (``HOP``: slide,
    size; ``CUMULATE``: step, size): ``t``'s rows with ``window_start``, ``window_end`` and ``window_time``."""

    function: str
    source: Ident
    time: Ident
    sizes: tuple[Expr, ...]
    alias: Optional[Ident] = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class Lateral(FromItem):
    """Lenses ``source LATERAL expr AS alias`` (repeatable: nests left-deep)."""

    source: FromItem
    expr: Expr
    alias: Ident
    pos: Pos = _pos()


# ---------------------------------------------------------------- queries


@dataclass(frozen=True)
class SelectItem:
    """One projection. ``expr`` may be a ``Star``."""

    expr: Expr
    alias: Optional[Ident] = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class Select:
    """A SELECT. ``result_kind`` is 'STREAM' / 'TABLE' for ``SELECT STREAM|TABLE`` (else None).
    ``emit`` is 'CHANGES' / 'FINAL' / None. ``windows`` holds the WINDOW clause: name -> spec (SQLstream);
    ``time_window`` a ksqlDB windowed aggregation's WINDOW clause. ``bare_conditions``: where a GROUP BY or
    PARTITION BY item is a condition not in parentheses (``GROUP BY a AND b``), which ksqlDB's grammar refuses."""

    items: tuple[SelectItem, ...]
    from_: FromItem
    where: Optional[Expr] = None
    group_by: tuple[Expr, ...] = ()
    having: Optional[Expr] = None
    partition_by: tuple[Expr, ...] = ()
    emit: Optional[str] = None
    result_kind: Optional[str] = None
    windows: tuple[tuple[Ident, WindowSpec], ...] = ()
    time_window: Optional[TimeWindow] = None  # ksqlDB WINDOW TUMBLING / HOPPING / SESSION
    bare_conditions: tuple[Pos, ...] = ()
    pos: Pos = _pos()


# ---------------------------------------------------------------- statements


@dataclass(frozen=True)
class Statement:
    pass


@dataclass(frozen=True)
class ColumnDef:
    """A column in DDL. ``key``: KSQL ``KEY`` (stream key column); ``primary_key``: ``PRIMARY KEY`` inline.
    ``computed``: a Flink computed column such as ``p AS PROCTIME()`` (then ``type`` is None).
    ``metadata``: a column read from the record rather than its value — ``('headers', None)`` (KSQL
    ``HEADERS``), ``('header', name)`` (KSQL ``HEADER('name')``) or ``('metadata', key)`` (Flink
    ``METADATA [FROM 'key']``, key None for the column's own name)."""

    name: Ident
    type: Optional[TypeName]
    key: bool = False
    primary_key: bool = False
    computed: Optional[Expr] = None
    metadata: Optional[tuple] = None
    pos: Pos = _pos()
    not_null: bool = False
    path: tuple[str, ...] = ()  # a Lenses dotted name (``_key.plate``, ``sensor.id``): its parts (``name``: all of it)


@dataclass(frozen=True)
class Watermark:
    """Flink ``WATERMARK FOR column AS expr``."""

    column: Ident
    expr: Expr
    pos: Pos = _pos()


@dataclass(frozen=True)
class Property:
    """One ``WITH (...)`` entry. ``name`` as written (quotes removed), ``value`` a Python str/int/bool."""

    name: str
    value: Any
    pos: Pos = _pos()


@dataclass(frozen=True)
class CreateSource(Statement):
    """``CREATE [OR REPLACE] STREAM|TABLE [IF NOT EXISTS] n (cols) WITH (...)``.
    ``kind`` is 'STREAM' or 'TABLE' as written (Flink DDL always writes TABLE). ``style`` is 'flink' when
    the statement used Flink-only syntax (quoted property names, a table-level PRIMARY KEY ... NOT
    ENFORCED, WATERMARK FOR, computed columns, or a 'connector' property), else 'ksql'.
    ``primary_key`` lists table-level PRIMARY KEY columns."""

    kind: str
    name: Ident
    columns: tuple[ColumnDef, ...]
    properties: tuple[Property, ...] = ()
    primary_key: tuple[Ident, ...] = ()
    watermark: Optional[Watermark] = None
    style: str = "ksql"
    or_replace: bool = False
    if_not_exists: bool = False
    pos: Pos = _pos()
    dialect: str = "ksql"  # whose DDL it is: 'ksql', 'flink', 'lenses' (FORMAT), 'sqlstream' (neither WITH nor FORMAT)
    formats: Optional[tuple[str, str]] = None  # Lenses FORMAT (key, value), as written
    description: Optional[str] = None
    read_only: bool = False  # ksqlDB's CREATE SOURCE STREAM|TABLE: nothing may write into it, drop its topic or alter it


@dataclass(frozen=True)
class CreateAsSelect(Statement):
    """``CREATE [OR REPLACE] STREAM|TABLE n [WITH (...)] AS SELECT ...``."""

    kind: str
    name: Ident
    query: Select
    properties: tuple[Property, ...] = ()
    or_replace: bool = False
    if_not_exists: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class InsertInto(Statement):
    """``INSERT INTO n [(cols)] [STORE KEY AS f VALUE AS f] SELECT ...``. ``columns`` name the target's
    columns the query's items fill, in order (Lenses may name ``_key.f`` paths); ``key_format`` /
    ``value_format``: Lenses ``STORE ... AS`` (as written)."""

    target: Ident
    query: Select
    pos: Pos = _pos()
    columns: tuple[tuple[Ident, ...], ...] = ()
    key_format: Optional[str] = None
    value_format: Optional[str] = None


@dataclass(frozen=True)
class InsertValues(Statement):
    """``INSERT INTO n [(cols)] VALUES (...), (...)``: records appended to a stream or topic, or rows of a
    SQLstream table. ``columns`` as in ``InsertInto``; without them, the target's columns in order."""

    target: Ident
    rows: tuple[tuple[Expr, ...], ...]
    columns: tuple[tuple[Ident, ...], ...] = ()
    pos: Pos = _pos()


@dataclass(frozen=True)
class CreateView(Statement):
    """Lenses ``WITH n AS (SELECT STREAM|TABLE ...);`` or SQLstream ``CREATE [OR REPLACE] VIEW n [(cols)] AS
    SELECT ...`` — a named view, no query of its own. ``columns`` rename the view's columns in order."""

    name: Ident
    query: Select
    pos: Pos = _pos()
    columns: tuple[Ident, ...] = ()
    or_replace: bool = False


@dataclass(frozen=True)
class CreateSchema(Statement):
    """SQLstream ``CREATE [OR REPLACE] SCHEMA s``."""

    name: Ident
    pos: Pos = _pos()


@dataclass(frozen=True)
class CreateType(Statement):
    """ksqlDB's ``CREATE TYPE [IF NOT EXISTS] name AS type``: ``name`` stands for ``type`` in later statements."""

    name: Ident
    type: "TypeName"
    if_not_exists: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class DropType(Statement):
    """ksqlDB's ``DROP TYPE [IF EXISTS] name``."""

    name: Ident
    if_exists: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class CreateServer(Statement):
    """SQLstream's (SQL/MED) ``CREATE [OR REPLACE] SERVER s [TYPE 't'] FOREIGN DATA WRAPPER w OPTIONS (...)``;
    option names as written."""

    name: Ident
    wrapper: Ident
    options: tuple[Property, ...] = field(default=(), repr=False)  # a PASSWORD among them
    type: Optional[str] = None
    or_replace: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class SetSchema(Statement):
    """SQLstream ``SET SCHEMA 's'``: unqualified names that follow resolve in ``s`` first."""

    name: Ident
    pos: Pos = _pos()


@dataclass(frozen=True)
class CreatePump(Statement):
    """SQLstream ``CREATE [OR REPLACE] PUMP p [STARTED|STOPPED] AS INSERT INTO s SELECT STREAM ...``: a
    persistent query named ``p``; a STOPPED one runs once ``ALTER PUMP p START`` says so."""

    name: Ident
    insert: InsertInto
    stopped: bool = False
    or_replace: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class AlterPump(Statement):
    """SQLstream ``ALTER PUMP p [, q] START|STOP``; ``schemas`` holds the schemas of ``s.*`` targets (every
    pump of the schema)."""

    names: tuple[Ident, ...]
    action: str  # 'START' or 'STOP'
    schemas: tuple[Ident, ...] = ()
    pos: Pos = _pos()


@dataclass(frozen=True)
class CreateTemporalTableFunction(Statement):
    """``CREATE TEMPORAL TABLE FUNCTION f ON history (time_col) KEY (key_col)``."""

    name: Ident
    history: Ident
    time_column: Ident
    key_column: Ident
    pos: Pos = _pos()


@dataclass(frozen=True)
class QueryStatement(Statement):
    """A bare ``SELECT ... [LIMIT n];`` (a transient query: its rows are shown, not stored)."""

    query: Select
    limit: Optional[int] = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class SetProperty(Statement):
    """``SET 'k' = 'v'`` (quotes optional on either side)."""

    name: str
    value: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Explain(Statement):
    statement: Statement
    pos: Pos = _pos()


@dataclass(frozen=True)
class Describe(Statement):
    name: Ident
    extended: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class AlterSource(Statement):
    """ksqlDB's ``ALTER STREAM|TABLE n ADD [COLUMN] c type, ...``: value columns added to a declared source."""

    kind: str
    name: Ident
    columns: tuple[ColumnDef, ...]
    pos: Pos = _pos()


@dataclass(frozen=True)
class Drop(Statement):
    """``DROP STREAM|TABLE [IF EXISTS] n [DELETE TOPIC]``."""

    kind: str
    name: Ident
    if_exists: bool = False
    delete_topic: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class ScriptStatement:
    """One statement of a script with its source text and where it starts (1-based line and column)."""

    statement: Statement
    text: str
    index: int  # 0-based position in the script
    pos: Pos = _pos()
