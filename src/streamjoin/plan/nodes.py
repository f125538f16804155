"""Logical plan: small immutable nodes. Each describes itself for EXPLAIN.

Every node has ``fields`` (its columns, each with a unique physical ``id``), ``kind`` ('STREAM' or
'TABLE': an append-only stream or a changelog keyed by ``key``) and ``key`` (ids of the key fields).
Expressions inside a plan are syntax-tree expressions whose column references were replaced by
``Ref`` (a physical id), so lowering never resolves names again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..sql import ast
from .catalog import SourceInfo

ROWTIME = "_rowtime"  # physical column: event time in epoch milliseconds
SEQ = "_seq"  # physical column: ingestion order of the record that produced the row
SUB = "_sub"  # physical column: position among the rows one input record produced
STREAM_TIME = "_stream_time"  # physical column: stream time when the producing record was read
OWN_ROWTIME = "ROWTIME"  # a scan's hidden field holding its record's own time, where a join reads alias.ROWTIME
# ksqlDB's pseudo-columns of a record's position, as hidden fields of a scan whose query reads them: name -> (the
# record's metadata it reads, type)
RECORD_POSITIONS = {"ROWPARTITION": ("partition", "int"), "ROWOFFSET": ("offset", "bigint")}
TOPIC_TIMES = "_topic_times"  # physical column, where a KSQL windowed join needs it: each input topic's own clock
TOMBSTONE = "_tombstone"  # physical column on changelogs: the row deletes its key
WINDOW_START = "_window_start"  # physical column of a ksqlDB windowed result: its window's start (ms), part of its key
WINDOW_END = "_window_end"  # physical column of a ksqlDB session-windowed result: its session's end, part of its key


@dataclass(frozen=True)
class Ref(ast.Expr):
    """A resolved column: ``id`` is the physical column name."""

    id: str
    type: str
    name: str = ""
    pos: ast.Pos = field(default=ast.NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Field:
    qualifier: str  # the alias of the input it came from ('' for computed columns)
    name: str  # display name
    id: str  # physical column name
    type: str  # Spark DDL type
    nullable: bool = True
    hidden: bool = False  # carried (e.g. an unprojected key) but not selectable or written as a value


@dataclass(frozen=True)
class PlanNode:
    fields: tuple[Field, ...]
    kind: str
    key: tuple[str, ...]
    # per key column, the ids of fields known to equal it (both sides' join columns, for instance)
    key_equivalents: tuple[frozenset, ...] = ()

    def field(self, id_: str) -> Field:
        return next(f for f in self.fields if f.id == id_)

    @property
    def inputs(self) -> tuple["PlanNode", ...]:
        return ()

    def describe(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class Scan(PlanNode):
    source: SourceInfo = None  # type: ignore[assignment]
    alias: str = ""
    window: Optional[ast.WindowSpec] = None  # SQLstream OVER (...) on this input
    system_time: Optional[ast.Expr] = None  # Flink FOR SYSTEM_TIME AS OF
    window_bounds: tuple[str, ...] = ()  # ksqlDB windowed source in a join: ids of the fields WINDOWSTART, WINDOWEND

    def describe(self) -> str:
        extra = f" OVER {_window_text(self.window)}" if self.window else ""
        time = f", time from {self.source.timestamp_column}" if self.source.timestamp_column else ""
        where = (self.source.database.describe() if self.source.database is not None
                 else f"file {self.source.bounded_path}" if self.source.bounded_path else f"topic {self.source.topic}")
        return f"Scan {self.source.kind.lower()} {self.source.name} AS {self.alias} ({where}{time}){extra}"


@dataclass(frozen=True)
class Filter(PlanNode):
    input: PlanNode = None  # type: ignore[assignment]
    predicate: ast.Expr = None  # type: ignore[assignment]
    where: str = "WHERE"
    # '' (a stateless filter) or the operator keeping a table filter's state: ``table_filter`` (Kafka Streams'
    # KTable filter: a tombstone only for a key whose previous row passed), chosen by ``table_filter_operator``
    operator: str = ""

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        return f"Filter [{self.where}] {expr_text(self.predicate)}"


@dataclass(frozen=True)
class Lateral(PlanNode):
    """Lenses ``LATERAL expr AS alias``: one row per element of the array ``expr``."""

    input: PlanNode = None  # type: ignore[assignment]
    expr: ast.Expr = None  # type: ignore[assignment]
    element: Field = None  # type: ignore[assignment]

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        return f"LateralExplode {expr_text(self.expr)} AS {self.element.name}"


@dataclass(frozen=True)
class Repartition(PlanNode):
    """Re-key rows by ``by`` (PARTITION BY, or a join on a non-key expression): a Spark shuffle."""

    input: PlanNode = None  # type: ignore[assignment]
    by: tuple[ast.Expr, ...] = ()
    reason: str = "PARTITION BY"

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        return f"Repartition by ({', '.join(expr_text(e) for e in self.by)}) [{self.reason}]"


# joins that keep the left input's rows with (SEMI) or without (ANTI) a match, and only its columns:
# ``[NOT] EXISTS`` / ``[NOT] IN`` subqueries (``plan.subqueries``)
EXISTENCE = ("SEMI", "ANTI")


@dataclass(frozen=True)
class JoinSide:
    """What one side contributes to a join condition."""

    keys: tuple[ast.Expr, ...] = ()  # equi-join expressions, pairwise with the other side's
    filter: Optional[ast.Expr] = None  # ON predicates on this side only (restrict matching)
    window: Optional[ast.WindowSpec] = None
    null_safe: tuple[bool, ...] = ()  # per key: IS NOT DISTINCT FROM (two NULLs match) rather than =


@dataclass(frozen=True)
class Join(PlanNode):
    """A binary join. ``shape`` names its kind, ``operator`` the module that runs it (``plan.joins``)."""

    left: PlanNode = None  # type: ignore[assignment]
    right: PlanNode = None  # type: ignore[assignment]
    join_type: str = "INNER"  # INNER LEFT RIGHT FULL CROSS, or one of EXISTENCE
    shape: str = ""
    left_side: JoinSide = JoinSide()
    right_side: JoinSide = JoinSide()
    residual: Optional[ast.Expr] = None  # two-input predicates that are not equalities (interval bounds)
    within: Optional[ast.Within] = None
    system_time: Optional[ast.Expr] = None
    unsupported_terms: tuple[ast.Expr, ...] = ()  # ON terms no join can evaluate (refused by validation)
    join_key: tuple[str, ...] = ()  # ids of the join-key fields (the result key, except in foreign-key joins)
    pos: ast.Pos = ast.NOWHERE
    rematch_ms: Optional[int] = None  # Lenses: how long a padded stream record waits for its table row
    condition: Optional[ast.Expr] = None  # Flink: further two-input ON conditions, on each candidate pair
    operator: str = ""  # the module of streamjoin.operators that runs it (plan.joins decides)
    static_table: bool = False  # a stream-table join whose table is loaded from a bounded source at query start
    on_keys: bool = False  # no ON: the records' keys are equal (Lenses)
    ksql_syntax: bool = False  # ksqlDB's SELECT over ksqlDB-declared inputs: its refusals and messages apply
    # ksqlDB join of windowed sources: (left id, right id) of the window bounds matched beside the key (the start;
    # a session's end too); the result's key holds that window
    window_keys: tuple[tuple[str, str], ...] = ()

    @property
    def inputs(self):
        return (self.left, self.right)

    def describe(self) -> str:
        keys = ", ".join(
            f"{expr_text(a)} = {expr_text(b)}" for a, b in zip(self.left_side.keys, self.right_side.keys)
        )
        parts = [f"Join [{self.shape}] {self.join_type}"]
        if keys:
            parts.append(f"on {keys}")
        if self.window_keys:
            parts.append("and " + ("their keys' sessions" if len(self.window_keys) > 1 else "their keys' windows"))
        if self.within:
            parts.append(f"within ({self.within.before_ms} ms, {self.within.after_ms} ms)")
            if self.within.grace_ms is not None:
                parts.append(f"grace {self.within.grace_ms} ms")
        for label, side in (("left", self.left_side), ("right", self.right_side)):
            if side.filter is not None:
                parts.append(f"{label}-only match filter {expr_text(side.filter)}")
        if self.residual is not None:
            parts.append(f"residual {expr_text(self.residual)}")
        if self.condition is not None:
            parts.append(f"condition {expr_text(self.condition)}")
        if self.rematch_ms is not None:
            parts.append(f"padded rows re-matched by a later table row for {self.rematch_ms} ms")
        return " ".join(parts)


DEFAULT_RETENTION_MS = 24 * 3600 * 1000  # a ksqlDB join window's without GRACE PERIOD


def join_grace(within: ast.Within) -> int:
    """A ksqlDB join window's grace: as given, or without GRACE PERIOD what keeps its retention (before + after
    + grace) at 24 h, as Kafka Streams' ``JoinWindows.of``, which ksqlDB uses then."""
    if within.grace_ms is not None:
        return within.grace_ms
    return max(DEFAULT_RETENTION_MS - 2 * within.before_ms, 0)


@dataclass(frozen=True)
class Project(PlanNode):
    input: PlanNode = None  # type: ignore[assignment]
    items: tuple[tuple[Field, ast.Expr], ...] = ()

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        return "Project " + ", ".join(f"{expr_text(e)} AS {f.name}" for f, e in self.items)


@dataclass(frozen=True)
class GroupWindow:
    """A GROUP BY's time window. Flink's group window (``plan.group_windows``): ``TUMBLE(time, size)`` or
    ``HOP(time, slide, size)`` over an event-time attribute, whose watermark reaches the aggregate held back by
    ``delay_ms`` (the interval joins it passed through); its columns ``start``, ``end``, ``rowtime`` (timestamps).
    ksqlDB's ``WINDOW TUMBLING (SIZE ...)`` / ``HOPPING (SIZE ..., ADVANCE BY ...)``: over each row's own time
    (``time`` None), open ``grace_ms`` past its end, its columns ``WINDOWSTART`` and ``WINDOWEND`` (ms) and no
    ``rowtime``; the window is part of the result's key. ``emit``: FINAL, one row per group and window when it
    closes; CHANGES, the window's new values after every row (ksqlDB's EMIT CHANGES)."""

    kind: str  # TUMBLE or HOP (Flink); TUMBLING or HOPPING (ksqlDB)
    time: Optional["Ref"]
    size_ms: int
    slide_ms: int  # = size_ms for a tumbling window
    delay_ms: int
    start: Field
    end: Field
    rowtime: Optional[Field]
    grace_ms: int = 0
    emit: str = "FINAL"
    retention_ms: int = 0  # ksqlDB: how long behind its latest window start the window store keeps a window

    @property
    def ksql(self) -> bool:
        return self.time is None

    @property
    def columns(self) -> tuple[Field, ...]:
        return tuple(f for f in (self.start, self.end, self.rowtime) if f is not None)

    def describe(self) -> str:
        slide = f", slide {self.slide_ms} ms" if self.slide_ms != self.size_ms else ""
        held = f", watermark held back {self.delay_ms} ms" if self.delay_ms else ""
        if self.ksql:
            size = f"gap {self.size_ms} ms" if self.kind == "SESSION" else f"size {self.size_ms} ms{slide}"
            return f"{self.kind}({size}, grace {self.grace_ms} ms, EMIT {self.emit})"
        return f"{self.kind}({self.time.name or self.time.id}, {self.size_ms} ms{slide}{held})"


@dataclass(frozen=True)
class WindowTable(PlanNode):
    """Flink's windowing table function (``TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), size))``, or HOP): each row of
    ``input`` once per window holding its time, with the window's columns ``window_start``, ``window_end``
    and ``window_time`` (``window.start`` ...). A GROUP BY over it by ``window_start, window_end`` is the
    group window ``window`` (``plan.group_windows``)."""

    input: PlanNode = None  # type: ignore[assignment]
    window: GroupWindow = None  # type: ignore[assignment]

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        return f"WindowTable {self.window.describe()}"


@dataclass(frozen=True)
class Aggregate(PlanNode):
    """GROUP BY: a changelog keyed by the grouping expressions; with a Flink group ``window``, an append-only
    stream of one row per group and window, keyed by the grouping expressions and the window's start; with a
    ksqlDB ``window``, a changelog keyed by the grouping expressions and the window (``WINDOW_START``)."""

    input: PlanNode = None  # type: ignore[assignment]
    groups: tuple[tuple[Field, ast.Expr], ...] = ()
    aggregates: tuple[tuple[Field, ast.Call], ...] = ()
    window: Optional[GroupWindow] = None
    # the module of ``streamjoin.operators`` that runs it, chosen when it is bound (``plan.binder``): aggregate
    # (over a stream), table_aggregate (over a changelog), window_aggregate (a Flink group window, a ksqlDB TUMBLING
    # or HOPPING window), session_aggregate (a ksqlDB SESSION window)
    operator: str = "aggregate"

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        groups = ", ".join(expr_text(e) for _, e in self.groups)
        aggs = ", ".join(f"{expr_text(e)} AS {f.id}" for f, e in self.aggregates)
        window = f" in {self.window.describe()}" if self.window is not None else ""
        return f"Aggregate by ({groups}){window} computing {aggs}"


@dataclass(frozen=True)
class Sink(PlanNode):
    """Write to a topic. ``value_fields`` are written in the value, ``key`` in the record key."""

    input: PlanNode = None  # type: ignore[assignment]
    target: SourceInfo = None  # type: ignore[assignment]
    value_fields: tuple[str, ...] = ()

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        key = ", ".join(self.input.field(k).name for k in self.key) or "none"
        if self.target.window is not None:
            key += f" in its {self.target.window[0].lower()} window of {self.target.window[1]} ms"
        if self.target.database is not None:
            upsert = ", ".join(self.target.key_columns) or "none: rows are inserted"
            return f"Sink {self.target.kind.lower()} {self.target.name} ({self.target.database.describe()}, primary key {upsert})"
        return f"Sink {self.target.kind.lower()} {self.target.name} (topic {self.target.topic}, key {key}, format {self.target.value_format})"


def under_chain(node: PlanNode, kind: type) -> Optional[PlanNode]:
    """The first node of ``kind`` at or under ``node`` through a chain of single-input nodes (None when a
    node with other than one input comes first)."""
    while not isinstance(node, kind):
        if len(node.inputs) != 1:
            return None
        node = node.inputs[0]
    return node


def base_scan(node: PlanNode) -> Optional[Scan]:
    """The scan under a chain of single-input nodes (None when a join or union is in between)."""
    return under_chain(node, Scan)


def table_filter_operator(node: PlanNode) -> str:
    """The operator of a filter (WHERE, HAVING) over ``node``: ksqlDB's and Lenses' filters of a table are
    Kafka Streams' stateful ``table_filter``; a stream's, and Flink's, are stateless ('')."""
    return "table_filter" if node.kind == "TABLE" and naming_style(node) != "flink" else ""


def naming_style(node: PlanNode) -> str:
    """'flink' when every input under ``node`` was declared with Flink DDL (names keep their case, every
    column stays in the value), else 'ksql'."""
    styles = {n.source.style for n in walk(node) if isinstance(n, Scan)}
    return "flink" if styles == {"flink"} else "ksql"


def declared_by(node: PlanNode, dialect: str) -> bool:
    """Whether every input under ``node`` was declared with ``dialect``'s own DDL ('ksql', 'flink', 'lenses',
    'sqlstream'): where that system's rules (its refusals, its key names) apply rather than the shared ones."""
    return all(n.source.dialect == dialect for n in walk(node) if isinstance(n, Scan))


def walk(node: PlanNode):
    """Pre-order walk of a plan."""
    yield node
    for child in node.inputs:
        yield from walk(child)


def _window_text(w: ast.WindowSpec) -> str:
    def bound(b: ast.FrameBound) -> str:
        return f"{b.amount} {b.kind}" if b.amount is not None else b.kind

    text = f"{w.unit} BETWEEN {bound(w.lower)} AND {bound(w.upper)}"
    if w.order_by is not None:
        text = f"ORDER BY {expr_text(w.order_by)} {text}"
    return f"({text})"


def expr_text(e: Optional[ast.Expr]) -> str:
    """SQL-like text of a (bound) expression, for EXPLAIN and error messages."""
    if e is None:
        return ""
    if isinstance(e, Ref):
        return e.name or e.id
    if isinstance(e, ast.Column):
        return f"{e.qualifier.text}.{e.name.text}" if e.qualifier else e.name.text
    if isinstance(e, ast.Literal):
        if e.kind == "string":
            return "'" + str(e.value).replace("'", "''") + "'"
        return "NULL" if e.kind == "null" else str(e.value).upper() if e.kind == "boolean" else str(e.value)
    if isinstance(e, ast.Interval):
        return f"INTERVAL {e.millis} MILLISECOND"
    if isinstance(e, ast.TimeUnit):
        return e.unit
    if isinstance(e, ast.LambdaVar):
        return e.name
    if isinstance(e, ast.Lambda):
        params = e.params[0] if len(e.params) == 1 else f"({', '.join(e.params)})"
        return f"{params} => {expr_text(e.body)}"
    if isinstance(e, ast.Call):
        inner = "*" if e.star else ", ".join(expr_text(a) for a in e.args)
        if e.name in ("FLOOR", "CEIL") and len(e.args) == 2 and isinstance(e.args[1], ast.TimeUnit):
            inner = f"{expr_text(e.args[0])} TO {e.args[1].unit}"
        return f"{e.name}({'DISTINCT ' if e.distinct else ''}{inner})"
    if isinstance(e, ast.BinaryOp):
        return f"({expr_text(e.left)} {e.op} {expr_text(e.right)})"
    if isinstance(e, ast.UnaryOp):
        return f"{e.op} {expr_text(e.operand)}" if e.op == "NOT" else f"-{expr_text(e.operand)}"
    if isinstance(e, ast.IsNull):
        return f"{expr_text(e.operand)} IS {'NOT ' if e.negated else ''}NULL"
    if isinstance(e, ast.Between):
        return f"{expr_text(e.operand)} {'NOT ' if e.negated else ''}BETWEEN {expr_text(e.low)} AND {expr_text(e.high)}"
    if isinstance(e, ast.InList):
        return f"{expr_text(e.operand)} {'NOT ' if e.negated else ''}IN ({', '.join(expr_text(i) for i in e.items)})"
    if isinstance(e, ast.Like):
        escape = "" if e.escape is None else " ESCAPE '" + e.escape.replace("'", "''") + "'"
        return f"{expr_text(e.operand)} {'NOT ' if e.negated else ''}LIKE {expr_text(e.pattern)}{escape}"
    if isinstance(e, ast.Cast):
        return f"CAST({expr_text(e.operand)} AS {e.type.name})"
    if isinstance(e, ast.ArrayLiteral):
        return "ARRAY[" + ", ".join(expr_text(i) for i in e.items) + "]"
    if isinstance(e, ast.StructLiteral):
        return "STRUCT(" + ", ".join(f"{name.text}:={expr_text(v)}" for name, v in e.fields) + ")"
    if isinstance(e, ast.MapLiteral):
        return "MAP(" + ", ".join(f"{expr_text(k)}:={expr_text(v)}" for k, v in e.entries) + ")"
    if isinstance(e, ast.Star):
        return f"{e.qualifier.text}.*" if e.qualifier else "*"
    if isinstance(e, ast.Subscript):
        return f"{expr_text(e.base)}[{expr_text(e.index)}]" if e.index is not None else f"{expr_text(e.base)}->{e.field.text}"
    if isinstance(e, ast.Case):
        whens = " ".join(f"WHEN {expr_text(c)} THEN {expr_text(v)}" for c, v in e.whens)
        return f"CASE {whens}{' ELSE ' + expr_text(e.else_) if e.else_ is not None else ''} END"
    return type(e).__name__
