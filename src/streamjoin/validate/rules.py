"""Refusal rules, checked in order on every join of a plan before anything runs, then the checks of the plan
as a whole (static tables, event times, the types of its expressions).

Each join rule is a function ``(join) -> message or None`` registered with a stable name; the first rule that
returns a message refuses the statement, naming the rule and the join's position.
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable, Optional

from ..errors import StatementError
from ..plan.ddl import declared_key_format
from ..operators import pair_condition
from ..plan import expressions as ex
from ..plan import ksql_coercion, ksql_signatures
from ..plan.ksql_coercion import NUMBERS, base_type
from ..plan.frames import frame_of, frame_problem
from ..plan.intervals import interval_bounds, time_attribute
from ..plan.joins import on_key
from ..plan.types import ksql_type_name
from ..plan.functions import arity_problem, ksql_name
from ..plan.nodes import (
    EXISTENCE, Aggregate, Filter, Join, Lateral, PlanNode, Project, Ref, Repartition, Scan, base_scan, declared_by, expr_text,
    naming_style, walk,
)
from ..sql import ast

Rule = Callable[[Join], Optional[str]]
RULES: list[tuple[str, Rule]] = []


def rule(name: str):
    def register(fn: Rule) -> Rule:
        RULES.append((name, fn))
        return fn

    return register


def validate(plan: PlanNode) -> None:
    """Raise StatementError for the first rule any join of ``plan`` breaks."""
    joins = [n for n in walk(plan) if isinstance(n, Join)]
    for join in reversed(joins):  # innermost first: the order the user wrote them
        for name, check in RULES:
            message = check(join)
            if message:
                raise StatementError(message, rule=name, pos=join.pos)
    _check_static_tables(plan, joins)
    _check_kafka_value_grouping(plan)
    _check_event_times(plan)
    _check_expressions(plan)


def _node_expressions(node: PlanNode):
    """(clause, expression) of each expression ``node`` computes: clause is WHERE or HAVING for a filter's
    predicate, else None."""
    if isinstance(node, Filter):
        yield node.where, node.predicate
    elif isinstance(node, (Project, Aggregate)):
        for _, e in getattr(node, "items", ()) + getattr(node, "groups", ()) + getattr(node, "aggregates", ()):
            yield None, e
    elif isinstance(node, Lateral):
        yield None, node.expr
    elif isinstance(node, Repartition):
        for e in node.by:
            yield None, e
    elif isinstance(node, Join) and node.condition is not None:
        yield None, node.condition


def _check_expressions(plan: PlanNode) -> None:
    """Calls of translated functions with a number of arguments they do not take, and, over inputs declared
    with ksqlDB's DDL, what ksqlDB's type checker refuses (``ExpressionTypeManager``): comparisons of values
    ksqlDB cannot compare, arithmetic on what is not a number (``+`` of two strings concatenates them) and calls
    of its functions that fit none of their signatures (``plan.ksql_signatures``). Operands whose type the plan does
    not know are let through."""
    ksql = declared_by(plan, "ksql")
    texts = _ksql_column_texts(plan)
    for node in walk(plan):
        for clause, expression in _node_expressions(node):
            kind = _ksql_base(expression)
            if ksql and clause in ("WHERE", "HAVING") and kind and kind != "BOOLEAN":
                shown = ksql_type_name(ex.static_type(expression)) or kind
                raise StatementError(f"Type error in {clause} expression: Should evaluate to boolean but is "
                                     f"{_ksql_text_of(expression, texts)} ({shown}) instead.", rule="expression-type",
                                     pos=getattr(expression, "pos", None))
            if ksql and isinstance(node, Project) and isinstance(expression, ast.Literal) and expression.kind == "null":
                raise StatementError("Can't infer a type of null. Please explicitly cast it to a required type, e.g. "
                                     "CAST(null AS VARCHAR).", rule="expression-type", pos=expression.pos)
            for e in ex.walk(expression):
                problem = _expression_problem(e, texts) if ksql else None
                if problem is None and isinstance(e, ast.Call):
                    problem = arity_problem(e)
                    if problem is not None and not ksql:
                        problem = f"{e.name} does not take {len(e.args)} argument(s)"
                if problem is not None:
                    if ksql and clause in ("WHERE", "HAVING"):
                        problem = f"Error in {clause} expression: {problem}"
                    raise StatementError(problem, rule="expression-type", pos=getattr(e, "pos", None))


_COMPARISONS = {"=": "EQUAL", "<>": "NOT_EQUAL", "<": "LESS_THAN", "<=": "LESS_THAN_OR_EQUAL", ">": "GREATER_THAN",
                ">=": "GREATER_THAN_OR_EQUAL", "<=>": "IS_NOT_DISTINCT_FROM"}
_EQUALITIES = ("=", "<>", "<=>")


def _ksql_base(e) -> str:
    """ksqlDB's base type of ``e``: its static type's, with a decimal literal a DECIMAL (``1.5``) and arithmetic
    on numbers the widest of its operands' (as ksqlDB's ``Operator.resultType``); "" if unknown."""
    if isinstance(e, ast.Literal) and e.kind == "decimal":
        return "DECIMAL"
    if isinstance(e, ast.BinaryOp) and e.op in ("+", "-", "*", "/", "%"):
        bases = {_ksql_base(e.left), _ksql_base(e.right)}
        if bases <= set(NUMBERS):
            return max(bases, key=NUMBERS.index)
        return "STRING" if e.op == "+" and bases == {"STRING"} else ""
    return base_type(ex.static_type(e))


def _comparable(left: str, op: str, right: str) -> bool:
    """ksqlDB's ``ComparisonUtil``: which base types compare, and with which operators."""
    if left in NUMBERS:
        return right in NUMBERS
    if left == "STRING":
        return right in ("STRING", "DATE", "TIMESTAMP", "TIME")
    if left in ("DATE", "TIMESTAMP"):
        return right in ("DATE", "TIMESTAMP", "STRING")
    if left == "TIME":
        return right in ("TIME", "STRING")
    if left in ("BOOLEAN", "ARRAY", "MAP", "STRUCT"):
        return right == left and op in _EQUALITIES
    return right == left


def _ksql_column_texts(plan: PlanNode) -> dict:
    """Column id -> how ksqlDB's messages write the column: an aggregate as its call (``SUM(V)``), a column of
    a join's input as ``ALIAS_NAME`` (ksqlDB's names inside a join), any other by its name."""
    joined = any(isinstance(n, Join) for n in walk(plan))
    texts = {}
    for node in walk(plan):
        for f in node.fields:
            name = f.name.upper()
            texts[f.id] = f"{f.qualifier.upper()}_{name}" if joined and f.qualifier else name
    for node in walk(plan):
        if isinstance(node, Aggregate):
            for f, call in node.aggregates:
                texts[f.id] = _ksql_text_of(call, texts)
    return texts


def _ksql_text_of(e, texts: dict) -> str:
    """``e`` written as ksqlDB writes an expression in a message: its columns named as ``texts`` says, TRUE and
    FALSE in lower case."""
    def as_ksql(node):
        if isinstance(node, Ref):
            return replace(node, name=texts.get(node.id, node.name))
        if isinstance(node, ast.Literal) and node.kind == "boolean":
            return Ref("", "boolean", "true" if node.value else "false")
        return None

    return expr_text(ex.transform(e, as_ksql))


def _expression_problem(e, texts: dict) -> Optional[str]:
    """What ksqlDB's type checker says of one operation ``e`` (its columns named as ``texts`` says), or None."""
    if isinstance(e, ast.InList):
        return _in_list_problem(e, texts)
    if isinstance(e, (ast.ArrayLiteral, ast.MapLiteral)) or isinstance(e, ast.Call) and e.name == "MAP" and not e.args:
        return _constructor_problem(e)
    if isinstance(e, ast.Call) and e.name not in ex.AGGREGATES:  # an aggregate's call is checked when bound
        return ksql_signatures.call_problem(ksql_name(e.name), e.args)
    if isinstance(e, ast.Cast):
        return _cast_problem(e)
    if isinstance(e, ast.StructLiteral):
        names = [name.text if name.quoted else name.text.upper() for name, _ in e.fields]
        return "Duplicate field names found in STRUCT" if len(set(names)) < len(names) else None
    if not isinstance(e, ast.BinaryOp) or (e.op not in _COMPARISONS and e.op not in ("+", "-", "*", "/", "%")):
        return None
    if e.op in _COMPARISONS and any(isinstance(side, ast.Literal) and side.kind == "null" for side in (e.left, e.right)):
        return f"Comparison with NULL not supported: {_ksql_text_of(e.left, texts)} {e.op} {_ksql_text_of(e.right, texts)}"
    bases = [_ksql_base(e.left), _ksql_base(e.right)]
    if not all(bases):
        return None
    if e.op in _COMPARISONS:
        if _comparable(bases[0], e.op, bases[1]):
            return None
        shown = [ksql_type_name(ex.static_type(side)) or base for side, base in zip((e.left, e.right), bases)]
        return (f"Cannot compare {_ksql_text_of(e.left, texts)} ({shown[0]}) to "
                f"{_ksql_text_of(e.right, texts)} ({shown[1]}) with {_COMPARISONS[e.op]}.")
    if all(b in NUMBERS for b in bases) or (e.op == "+" and bases == ["STRING"] * 2):
        return None
    return f"Error processing expression: {_ksql_text_of(e, texts)}. Unsupported arithmetic types. {bases[0]} {bases[1]}"


def _is_null(e) -> bool:
    """Whether ``e`` is the NULL literal (a value of no type of its own)."""
    return isinstance(e, ast.Literal) and e.kind == "null"


_ISSUE_4239 = "(see https://github.com/confluentinc/ksql/issues/4239)"


def _constructor_problem(e) -> Optional[str]:
    """ksqlDB's refusals of an ARRAY[...] or MAP(k := v, ...) constructor: empty, all NULL (no type to give it), or
    with values that do not fold into one type (``plan.ksql_coercion``)."""
    if isinstance(e, ast.ArrayLiteral):
        if not e.items:
            return f"Array constructor cannot be empty. Please supply at least one element {_ISSUE_4239}."
        if all(_is_null(v) for v in e.items):
            return (f"Cannot construct an array with all NULL elements {_ISSUE_4239}. As a workaround, you may cast a "
                    "NULL value to the desired type.")
        groups = [e.items]
    else:
        entries = getattr(e, "entries", ())
        if not entries:
            return f"Map constructor cannot be empty. Please supply at least one key value pair {_ISSUE_4239}."
        for part, word in ((0, "keys"), (1, "values")):
            if all(_is_null(entry[part]) for entry in entries):
                return f"Cannot construct a map with all NULL {word}"
        groups = [[k for k, _ in entries], [v for _, v in entries]]
    for values in groups:
        try:
            ksql_coercion.common_type(values)
        except ksql_coercion.BadLiteral as err:
            return str(err)
        except ksql_coercion.NotCoercible:
            return None  # left to Spark's own typing, as before
    return None


def _cast_problem(e: ast.Cast) -> Optional[str]:
    """ksqlDB casts to an ARRAY, MAP or STRUCT only from one of the same kind."""
    source, target = ex.static_type(e.operand), ex.static_type(e)
    kind = base_type(target)
    if kind in ("ARRAY", "MAP", "STRUCT") and source and base_type(source) != kind:
        return f"Invalid Select: Cast of {ksql_type_name(source)} to {ksql_type_name(target)} is not supported"
    return None


def _in_list_problem(e: ast.InList, texts: dict) -> Optional[str]:
    """ksqlDB's check of ``x IN (a, b, ...)``: the operand and the values must fold into one type
    (``plan.ksql_coercion``)."""
    try:
        ksql_coercion.common_type((e.operand, *e.items))
    except ksql_coercion.BadLiteral as err:
        return f"Invalid Predicate: {err}"
    except ksql_coercion.NotCoercible as err:
        return (f"Invalid Predicate: operator does not exist: {ksql_type_name(err.target)} = "
                f"{ksql_type_name(err.source)} ({_ksql_text_of(err.item, texts)})"
                "\nHint: You might need to add explicit type casts.")
    return None


def _check_event_times(plan: PlanNode) -> None:
    """The query's clock reads each topic's records once: two inputs over one topic must take their time from
    the same field (a Lenses ``EVENTTIME BY`` on one of them only would give the topic two times)."""
    times: dict = {}
    for scan in (n for n in walk(plan) if isinstance(n, Scan) and not n.source.bounded):
        seen = times.setdefault(scan.source.topic, scan.source.timestamp_column)
        if seen != scan.source.timestamp_column:
            fields = " and ".join(f or "the record's timestamp" for f in (seen, scan.source.timestamp_column))
            raise StatementError(f"topic {scan.source.topic} is read twice with different record times ({fields}): "
                                 "give both the same EVENTTIME BY", rule="event-time")


def _check_kafka_value_grouping(plan: PlanNode) -> None:
    """ksqlDB groups no source whose value format is KAFKA."""
    if not any(isinstance(n, Aggregate) for n in walk(plan)) or not declared_by(plan, "ksql"):
        return
    names = ", ".join(dict.fromkeys(n.alias.upper() for n in walk(plan)
                                    if isinstance(n, Scan) and n.source.value_format == "KAFKA"))
    if names:
        raise StatementError(f"Source(s) {names} are using the 'KAFKA' value format. This format does not yet "
                             "support GROUP BY.", rule="kafka-value-format-group-by")


def _check_static_tables(plan: PlanNode, joins: list[Join]) -> None:
    """A source read from a file or a database is a static table: it may only be the table side of a
    stream-table join, or the table of a lookup join."""
    allowed = set()
    for join in joins:
        if join.shape == "lookup":
            allowed.add(id(base_scan(join.right)))
        elif _stream_table(join):
            table = join.right if join.right.kind == "TABLE" else join.left
            scan = base_scan(table)
            if scan is not None:
                allowed.add(id(scan))
    for node in walk(plan):
        if isinstance(node, Scan) and node.source.bounded and id(node) not in allowed:
            where = (f"a table in a database ({node.source.database.table})" if node.source.database
                     else f"read from a file ({node.source.bounded_path})")
            raise StatementError(
                f"{node.source.name} is {where}: such a static table can only be joined to a stream, as the table "
                "side of a stream-table join (or looked up, FOR SYSTEM_TIME AS OF)", rule="static-table-use")


def _kinds(join: Join) -> tuple[str, str]:
    return join.left.kind, join.right.kind


def _stream_table(join: Join) -> bool:
    """A stream-table join, with or without an OVER window on the stream (SQLstream)."""
    return join.shape == "stream-table" or (join.shape == "instant-window" and "TABLE" in _kinds(join))


def _ksql(join: Join) -> bool:
    """Whether every input of ``join`` was declared with ksqlDB's DDL (its refusals and messages apply)."""
    return declared_by(join, "ksql")


_KSQL_JOIN_TYPES = {"INNER": "[INNER] JOIN", "LEFT": "LEFT [OUTER] JOIN", "RIGHT": "RIGHT [OUTER] JOIN",
                    "FULL": "[FULL] OUTER JOIN"}


def _ksql_join_text(join: Join) -> str:
    """``L LEFT [OUTER] JOIN R``, as ksqlDB names a join in its messages (by its sources' names)."""
    def name(node: PlanNode, keys) -> str:  # the source the side's ON expression reads
        refs = {r.id for k in keys[:1] for r in ex.walk(k) if isinstance(r, Ref)}
        scans = [n for n in walk(node) if isinstance(n, Scan) and refs & {f.id for f in n.fields}] or [base_scan(node)]
        return scans[0].source.name.upper() if scans[0] is not None else "?"
    return (f"{name(join.left, join.left_side.keys)} {_KSQL_JOIN_TYPES.get(join.join_type, join.join_type)} "
            f"{name(join.right, join.right_side.keys)}")


def _stream_frame(join: Join):
    """The OVER window of a stream-table join's stream side, or None."""
    return join.left_side.window if join.left.kind == "STREAM" else join.right_side.window


# ---------------------------------------------------------------- the rules, in order


@rule("subquery-join")
def subquery_join(join: Join) -> Optional[str]:
    """``[NOT] EXISTS`` / ``[NOT] IN`` subqueries run as Flink's regular semi and anti joins (``plan.subqueries``)."""
    if join.join_type in EXISTENCE and join.shape != "regular":
        return (f"a [NOT] EXISTS or [NOT] IN subquery runs as a Flink regular {join.join_type} join: both inputs "
                "declared with Flink's CREATE TABLE, and no time bounds between them")
    return None


@rule("lookup-join")
def lookup_join(join: Join) -> Optional[str]:
    """Flink's rules for a lookup join (a 'jdbc' table FOR SYSTEM_TIME AS OF), in its words where it has them."""
    if join.shape != "lookup":
        return None
    table = base_scan(join.right)
    name = table.source.name
    if join.join_type not in ("INNER", "LEFT"):
        return (f"Temporal table join currently only support INNER JOIN and LEFT JOIN, but was {join.join_type} JOIN "
                f"(lookup of {name})")
    if not isinstance(join.right, Scan):
        return f"a lookup join reads the database table {name} itself: filter it in the ON clause, not in a view"
    if not (isinstance(join.system_time, Ref) and _is_proctime_field(join.left, join.system_time.id)):
        return (f"FOR SYSTEM_TIME AS OF {expr_text(join.system_time)}: a lookup join of the database table {name} "
                "is as of the stream's processing time (a PROCTIME() column of the left input)")
    if not join.left_side.keys:
        return f"Temporal table join requires an equality condition on fields of table [{name}]."
    columns = {f.id for f in table.fields if not f.hidden}
    for left, right in zip(join.left_side.keys, join.right_side.keys):
        if not (isinstance(right, Ref) and right.id in columns):
            return (f"Temporal table join requires an equality condition on fields of table [{name}]: "
                    f"{expr_text(right)} is not a column of it")
        types = [ex.static_type(left), ex.static_type(right)]
        if all(types) and _type_kind(types[0]) != _type_kind(types[1]):
            return (f"Temporal table join requires equivalent condition of the same type, but the condition is "
                    f"{expr_text(left)}[{types[0].upper()}]={expr_text(right)}[{types[1].upper()}]")
    if any(join.left_side.null_safe):
        return "LookupJoin doesn't support join condition contains 'a IS NOT DISTINCT FROM b'"
    if join.residual is not None:
        return f"{expr_text(join.residual)}: a lookup join has no time bounds (the database table has no time)"
    return None


def _is_proctime_field(node: PlanNode, field_id: str) -> bool:
    scan = base_scan(node)
    return scan is not None and scan.source.proctime_column is not None and any(
        f.id == field_id and f.name == scan.source.proctime_column for f in scan.fields)


@rule("join-on-condition")
def on_condition_terms(join: Join) -> Optional[str]:
    if join.unsupported_terms:
        term = expr_text(join.unsupported_terms[0])
        return (
            f"ON term {term} is not allowed: each AND-ed term of ON must be an equality with exactly one input "
            "on each side, or a predicate that references one input only"
        )
    return None


@rule("join-key-types")
def join_key_types(join: Join) -> Optional[str]:
    """ksqlDB refuses an equality between join keys of different types (INT = BIGINT too) when every input
    was declared with its DDL; in Lenses and SQLstream scripts columns of one kind (numbers, strings, ...)
    are comparable, so only kinds that differ are refused there."""
    if naming_style(join) == "flink":
        return None
    ksql = _ksql(join)
    for left, right in zip(join.left_side.keys, join.right_side.keys):
        types = [t for t in (ex.static_type(left), ex.static_type(right)) if t]
        if len(types) == 2 and (ksql_type_name(types[0]) != ksql_type_name(types[1]) if ksql
                                else _type_kind(types[0]) != _type_kind(types[1])):
            return (f"Invalid join condition: types don't match. Got {_ksql_text(left)}{{{ksql_type_name(types[0])}}} = "
                    f"{_ksql_text(right)}{{{ksql_type_name(types[1])}}}.")
    return None


@rule("join-key-map")
def join_key_map(join: Join) -> Optional[str]:
    """ksqlDB refuses a join key whose type is or holds a MAP: a map's serialized form (so its partition)
    depends on its entries' order. Streams joined on one here would still match, so only ksqlDB scripts
    are refused."""
    if not _ksql(join):
        return None
    for left in join.left_side.keys:
        t = ex.static_type(left)
        if "map<" in t:
            name = _ksql_text(left).replace(".", "_")
            return ("Map keys, including types that contain maps, are not supported as they may lead to unexpected "
                    f"behavior due to inconsistent serialization. Key column name: `{name}`. Column type: "
                    f"{ksql_type_name(t)}. See https://github.com/confluentinc/ksql/issues/6621 for more.")
    return None


_NUMBERS = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")


@rule("key-formats-differ")
def key_formats_differ(join: Join) -> Optional[str]:
    """Lenses: a join without ON compares the records' keys, which it cannot across two key formats."""
    left, right = base_scan(join.left), base_scan(join.right)
    if not join.on_keys or left is None or right is None:
        return None
    formats = declared_key_format(left.source), declared_key_format(right.source)
    if formats[0] == formats[1]:
        return None
    return (f"the join compares the keys of {left.source.name} ({formats[0]}) and {right.source.name} ({formats[1]}), "
            "which are stored in different formats: write one of them again with the other's key format "
            "(INSERT INTO t STORE KEY AS ... SELECT ...) and join that")


def _type_kind(spark_type: str) -> str:
    """A Spark DDL type's kind: 'number', or the type's name without parameters (string, array, ...)."""
    name = spark_type.split("(")[0].split("<")[0].strip().lower()
    return "number" if name in _NUMBERS else name


def _ksql_text(e) -> str:
    """An expression as ksqlDB quotes it in a message: unquoted qualifiers upper-cased, as it reads them."""
    return re.sub(r"\b([A-Za-z_][A-Za-z0-9_]*)\.", lambda m: m.group(1).upper() + ".", expr_text(e))


@rule("cross-join-needs-windows")
def cross_join_needs_windows(join: Join) -> Optional[str]:
    if join.join_type == "CROSS" and join.shape not in ("instant-window",) and _kinds(join) != ("TABLE", "TABLE"):
        return "CROSS JOIN of streams needs an OVER window on each stream"
    return None


@rule("stream-stream-needs-within")
def stream_stream_needs_window(join: Join) -> Optional[str]:
    if join.shape == "stream-stream" and join.within is None:
        return "a join between two streams needs a window: add WITHIN <duration> (e.g. WITHIN 1 HOUR)"
    return None


@rule("window-frame")
def window_frame(join: Join) -> Optional[str]:
    if join.shape != "instant-window":
        return None
    for node, side in ((join.left, join.left_side), (join.right, join.right_side)):
        if side.window is not None and node.kind == "TABLE":
            return "an OVER window bounds a stream; a table has no window"
        problem = frame_problem(side.window)
        if problem:
            return problem
    return None


@rule("windowed-join-input")
def windowed_join_input(join: Join) -> Optional[str]:
    """An OVER-window join reads each input in rowtime order; an outer windowed join below it emits its
    null-padded rows after their instant, so they would arrive late."""
    if join.shape != "instant-window":
        return None
    for node in [*walk(join.left), *walk(join.right)]:
        if (isinstance(node, Join) and node.join_type in ("LEFT", "RIGHT", "FULL")
                and node.shape in ("instant-window", "stream-stream", "interval")):
            return ("the input of an OVER-window join cannot be an outer windowed join: its null-padded rows "
                    "leave after their rowtime; make the inner join the outer one's input instead")
    return None


@rule("table-stream-order")
def table_stream_order(join: Join) -> Optional[str]:
    """ksqlDB refuses a join with the table on the left (DIALECT keeps ``table RIGHT JOIN stream``, which
    is ``stream LEFT JOIN table``)."""
    if (_ksql(join) and _stream_table(join) and not _framed(join) and _kinds(join) == ("TABLE", "STREAM")
            and join.join_type != "RIGHT"):
        return ("Invalid join order: table-stream joins are not supported; only stream-table joins. "
                f"Got {_ksql_join_text(join)}.")
    return None


@rule("stream-table-full-outer")
def stream_table_full_outer(join: Join) -> Optional[str]:
    if _stream_table(join) and join.join_type == "FULL" and not _framed(join):
        ours = ("FULL OUTER join between a stream and a table needs a tumbling frame on the stream "
                "(OVER (ORDER BY FLOOR(ROWTIME TO HOUR) RANGE CURRENT ROW)); otherwise use INNER or LEFT")
        if _ksql(join):  # ksqlDB's words first
            return f"Invalid join type: full-outer join not supported for stream-table join. Got {_ksql_join_text(join)}. {ours}"
        return ours
    return None


def _framed(join: Join) -> bool:
    """Whether the stream side of a stream-table join has a tumbling frame (it may preserve the table)."""
    window = _stream_frame(join)
    return window is not None and frame_problem(window) is None and frame_of(window).kind == "tumble"


@rule("stream-table-preserved-side")
def stream_table_preserved_side(join: Join) -> Optional[str]:
    if not _stream_table(join) or _framed(join):
        return None
    if _kinds(join) == ("STREAM", "TABLE") and join.join_type == "RIGHT":
        return "stream RIGHT JOIN table is not supported: the stream must be the preserved side (table RIGHT JOIN stream)"
    if _kinds(join) == ("TABLE", "STREAM") and join.join_type == "LEFT":
        return "table LEFT JOIN stream is not supported: the stream must be the preserved side (stream LEFT JOIN table)"
    return None


@rule("stream-table-equi-join")
def stream_table_equi_join(join: Join) -> Optional[str]:
    if _stream_table(join) and not join.left_side.keys:
        return "a stream-table join must be an equi-join (ON stream_expr = table.key); theta and cross joins are refused"
    return None


@rule("stream-table-on-table-key")
def stream_table_on_table_key(join: Join) -> Optional[str]:
    if not _stream_table(join) and join.shape not in ("temporal", "temporal-proctime"):
        return None
    table, table_keys = (join.right, join.right_side.keys) if join.right.kind == "TABLE" else (join.left, join.left_side.keys)
    scan = base_scan(table)
    if _stream_table(join) and scan is not None and scan.source.kind == "STREAM":
        return None  # a table built from a stream (Lenses SELECT TABLE) is keyed by the join expression
    if _stream_table(join) and scan is not None and scan.source.database is not None:
        return None  # a database table's rows are joined as they are: each row that matches (Flink's bounded scan)
    if not on_key(table_keys, table):
        if _ksql(join) and join.left_side.keys:
            return ("Invalid join condition: stream-table joins require to join on the table's primary key. "
                    f"Got {_ksql_text(join.left_side.keys[0])} = {_ksql_text(join.right_side.keys[0])}.")
        key = ", ".join(table.field(k).name for k in table.key)
        offending = ", ".join(expr_text(e) for e in table_keys if not (isinstance(e, Ref) and e.id in table.key))
        detail = f": {offending} is not the key" if offending else ""
        return f"a join with a table must match the table's primary key ({key}) in an equality{detail}"
    return None


@rule("kafka-value-format-join")
def kafka_value_format_join(join: Join) -> Optional[str]:
    """ksqlDB joins no source whose value format is KAFKA (a single primitive, no columns to carry)."""
    scans = [n for n in walk(join) if isinstance(n, Scan) and n.source.value_format == "KAFKA"]
    if not scans or not _ksql(join):
        return None
    names = ", ".join(dict.fromkeys(s.alias.upper() for s in scans))
    return f"Source(s) {names} are using the 'KAFKA' value format. This format does not yet support JOIN."


@rule("ksql-table-table-join")
def ksql_table_table_join(join: Join) -> Optional[str]:
    """ksqlDB's table-table joins: the ON equality names the right table's primary key (a join on both keys,
    or a foreign-key join from a left table's column), and a foreign-key join joins two tables of the script
    (not a step of an n-way join). Written in ksqlDB's syntax, anything else is refused with ksqlDB's words
    (Lenses queries join a parent on the left, and streamjoin runs those). RIGHT and FULL foreign-key joins,
    which ksqlDB refuses, run (DIALECT goes further)."""
    if not join.ksql_syntax or _kinds(join) != ("TABLE", "TABLE") or len(join.left_side.keys) != 1:
        return None
    left, right = join.left_side.keys[0], join.right_side.keys[0]
    if not _on_primary_key(right, join.right):
        return ("Invalid join condition: table-table joins require to join on the primary key of the right input "
                f"table. Got {_on_text(join)}.")
    if _on_primary_key(left, join.left):
        return None
    if base_scan(join.left) is None or base_scan(join.right) is None:
        return ("Invalid join condition: foreign-key table-table joins are not supported as part of n-way joins. "
                f"Got {_on_text(join)}.")
    return None


def _on_primary_key(expr, node: PlanNode) -> bool:
    """Whether ``expr`` is ``node``'s one primary key column (or a column a join below knows equal to it)."""
    return (isinstance(expr, Ref) and len(node.key) == 1
            and (expr.id == node.key[0] or any(expr.id in eq for eq in node.key_equivalents[:1])))


def _on_text(join: Join) -> str:
    """The ON equality as written, its columns qualified by their inputs' aliases (``LT.ID1 = RT.F2``)."""
    fields = {f.id: f for f in (*join.left.fields, *join.right.fields)}

    def text(expr) -> str:
        field = fields.get(expr.id) if isinstance(expr, Ref) else None
        if field is None or not field.qualifier:
            return expr_text(expr)
        return f"{field.qualifier.upper()}.{field.name}"

    left, right = join.left_side.keys[0], join.right_side.keys[0]
    flipped = (getattr(right, "pos", None) and getattr(left, "pos", None)
               and (right.pos.line, right.pos.column) < (left.pos.line, left.pos.column))
    return f"{text(right)} = {text(left)}" if flipped else f"{text(left)} = {text(right)}"


@rule("table-table-on-key")
def table_table_on_key(join: Join) -> Optional[str]:
    if join.shape != "foreign-key":
        return None
    if on_key(join.left_side.keys, join.left) or on_key(join.right_side.keys, join.right):
        return None
    keys = " and ".join(", ".join(t.field(k).name for k in t.key) for t in (join.left, join.right))
    return (f"a join between two tables must match the primary key of at least one of them ({keys}) in an "
            "equality; the other side may use any column (a foreign-key join)")


@rule("table-table-full-outer-filter")
def table_table_full_outer_filter(join: Join) -> Optional[str]:
    if join.shape in ("table-table", "foreign-key") and join.join_type == "FULL" and (
        join.left_side.filter is not None or join.right_side.filter is not None
    ):
        return ("a FULL OUTER join of two tables cannot restrict matching with a one-input ON predicate "
                "(two unmatched rows would share one key): move it to WHERE")
    return None


@rule("interval-join-watermarks")
def interval_join_watermarks(join: Join) -> Optional[str]:
    if join.shape not in ("interval", "temporal", "temporal-function"):
        return None
    for side, node in (("left", join.left), ("right", join.right)):
        if time_attribute(node) is None:
            what = "an interval join" if join.shape == "interval" else "an event-time temporal join"
            return f"{what} needs an event-time attribute on both inputs: declare WATERMARK FOR on the {side} input"
    return None


@rule("interval-bound")
def interval_bound(join: Join) -> Optional[str]:
    if join.shape != "interval":
        return None
    try:
        interval_bounds(join)
    except StatementError as err:
        return err.message
    return None


@rule("temporal-join-type")
def temporal_join_type(join: Join) -> Optional[str]:
    if join.shape.startswith("temporal") and join.join_type not in ("INNER", "LEFT"):
        return f"a temporal join is INNER or LEFT (the versioned table on the right), not {join.join_type}"
    if join.shape in ("temporal", "temporal-function") and not (isinstance(join.system_time, Ref) and join.system_time.id == time_attribute(join.left)):
        return (f"FOR SYSTEM_TIME AS OF {expr_text(join.system_time)} must name the left input's time attribute "
                "(its WATERMARK FOR column, or a PROCTIME() column)")
    return None


@rule("regular-join-equi")
def regular_join_equi(join: Join) -> Optional[str]:
    if join.shape == "regular" and not join.left_side.keys:
        return ("a regular join (no time bounds) needs an equality between the inputs (ON a.k = b.k); "
                "for a time-bounded join add bounds on both time attributes")
    if join.shape == "regular" and join.residual is not None:
        return (f"{expr_text(join.residual)} is not an interval join bound: both inputs need WATERMARK FOR "
                "on the compared columns")
    return None


@rule("join-condition")
def join_condition(join: Join) -> Optional[str]:
    """Flink's further ON conditions: an INNER join of streams keeps the rows that pass, a temporal join keeps
    the version found or pads it away (LEFT); interval and regular joins evaluate them on each candidate pair,
    where they decide padding and retractions, within what ``operators.pair_condition`` evaluates."""
    if join.condition is None or join.shape == "lookup" or (
            join.shape in ("interval", "regular") and pair_condition.supported(join.condition)):
        return None
    if join.shape.startswith("temporal") or (join.join_type == "INNER" and join.kind == "STREAM"):
        return None
    return (f"the ON condition {expr_text(join.condition)} of a {join.join_type} {join.shape} join uses an "
            "expression not evaluated on candidate pairs yet (comparisons, arithmetic, AND/OR/NOT, IS NULL, BETWEEN, "
            "IN, UPPER, LOWER, ABS, COALESCE are; issue #26)")
