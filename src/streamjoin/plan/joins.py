"""Binding a join: the ON condition is split into what each operator needs, the join's shape is named from
the kinds of its inputs and its window form, and the operator that runs it is chosen — once, here; every
later step (validation, lowering, EXPLAIN) reads ``Join.shape``, ``Join.operator`` and ``Join.static_table``.

| left    | right   | window form                          | shape              | operator module  |
|---------|---------|--------------------------------------|--------------------|------------------|
| STREAM  | STREAM  | WITHIN d / WITHIN (b, a)             | stream-stream      | stream_stream    |
| STREAM  | STREAM  | OVER (RANGE/ROWS ...) on either side | instant-window     | instant_window   |
| STREAM  | TABLE   | OVER on the stream, table preserved  | instant-window     | framed_table     |
| STREAM  | TABLE   | OVER on the stream, table not        | instant-window     | stream_table     |
| STREAM  | STREAM  | Flink time bounds in ON / WHERE      | interval           | interval         |
| STREAM  | TABLE   | FOR SYSTEM_TIME AS OF rowtime        | temporal           | temporal         |
| STREAM  | TABLE   | FOR SYSTEM_TIME AS OF proctime       | temporal-proctime  | stream_table     |
| STREAM  | 'jdbc'  | FOR SYSTEM_TIME AS OF (proctime)     | lookup             | lookup           |
| STREAM  | LATERAL TABLE (f(t))                   | temporal-function  | temporal         |
| Flink inputs, no time bound                    | regular            | regular          |
| STREAM  | TABLE   | none                                 | stream-table       | stream_table     |
| TABLE   | TABLE   | both primary keys                    | table-table        | table_table      |
| TABLE   | TABLE   | a non-key column on one side         | foreign-key        | foreign_key      |

(The TABLE side may be on the left in each row.) A stream-table join whose table is bounded (a file, a
database table) is a *static table* join: the table is loaded at query start, no state and no clock; with
Flink inputs too (Flink would run a regular join over the bounded scan: the same rows, none retracted). A
lookup join reads the database as each micro-batch runs, and keeps no state.

ON is an AND of terms (DIALECT §4). A term is
- an equi-key: ``=`` with exactly one input on each side (expressions allowed);
- a one-input predicate: it restricts matching on that input only;
- a time bound between both inputs' time attributes (Flink interval join), kept as ``residual``;
- anything else is *unsupported* and recorded for the validator to refuse with the term quoted.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Optional

from ..errors import StatementError
from ..sql import ast
from . import expressions as ex
from .catalog import TemporalFunction, ViewInfo, display_name
from .nodes import (
    EXISTENCE, ROWTIME, Field, Filter, Join, JoinSide, PlanNode, Ref, Scan, base_scan, declared_by, expr_text, naming_style, walk,
)
from .intervals import time_attribute
from .scope import Scope, new_id
from .settings import REMATCH_RETENTION, interval_ms

if TYPE_CHECKING:
    from .binder import Binder

COMPARISONS = {"<", "<=", ">", ">="}


def _check_alias_repeated(item: ast.Join, left: Scope, ksql: bool) -> None:
    """Refuse a source joined under a name the join's left side already uses (``T JOIN U ... JOIN U``): its
    columns could not be told apart. A source joined to itself under two aliases is a self-join (DIALECT)."""
    if not isinstance(item.right, ast.Relation):
        return
    alias = (item.right.alias or item.right.name).text
    used = {f.qualifier.casefold() for f in left.node.fields if f.qualifier}
    if alias.casefold() not in used:
        return
    if ksql and len(used) > 1:
        message = f"N-way joins do not support multiple occurrences of the same source. Source: '{alias.upper()}'."
    else:
        message = f"{alias} is joined twice under one name: give each occurrence its own alias"
    raise StatementError(message, rule="duplicate-alias", pos=item.right.pos)


def bind_join(item: ast.Join, left: Scope, right_scope: Optional[Scope], binder: "Binder") -> Scope:
    right = right_scope
    if isinstance(item.right, ast.LateralTable):
        lateral = _bind_lateral_table(item.right, left, binder)
        right = Scope.of(lateral, lateral.alias)
    on = item.on
    join_type = {"COMMA": "INNER", "CROSS": "CROSS"}.get(item.kind, item.kind)
    input_keys = left.input_keys + right.input_keys
    both = Scope(_concat(left.node, right.node), left.merged + right.merged, input_keys)
    ksql_syntax = binder.plain_select and declared_by(both.node, "ksql")  # ksqlDB's analysis and refusals apply
    _check_alias_repeated(item, left, ksql_syntax)
    merged: tuple = ()
    pairs: list[tuple[ast.Expr, ast.Expr]] = []
    if item.using is not None or item.natural:
        names = [u.text for u in item.using] if item.using is not None else _common_names(left.node, right.node)
        for name in names:
            lref = left.resolve(ast.Column(ast.Ident(name)))
            rref = right.resolve(ast.Column(ast.Ident(name)))
            pairs.append((lref, rref))
            stand_in = ast.Call("COALESCE", (lref, rref)) if join_type in ("RIGHT", "FULL") else (rref if join_type == "RIGHT" else lref)
            merged += ((name, stand_in),)
    terms = [_bind_on_term(binder, t, both) for t in ex.conjuncts(on)]
    if ksql_syntax and isinstance(item.right, ast.Relation):
        _ksql_join_criteria(item, both, binder)
    left_ids = {f.id for f in left.node.fields} | {ROWTIME + "@L"}
    right_ids = {f.id for f in right.node.fields}
    left_filters, right_filters, residual, unsupported, conditions = [], [], [], [], []
    null_safe: set = set()  # the pairs that are IS NOT DISTINCT FROM equalities
    flink = naming_style(left.node) == "flink" and naming_style(right.node) == "flink"
    times = {time_attribute(left.node), time_attribute(right.node)} - {None}
    for term in terms:
        sides = _sides(term, left_ids, right_ids)
        if sides == {"L"}:
            left_filters.append(term)
        elif sides == {"R"}:
            right_filters.append(term)
        elif not sides:
            residual.append(term)
        elif _is_equi(term, left_ids, right_ids):
            l, r = term.left, term.right
            if _sides(l, left_ids, right_ids) == {"R"}:
                l, r = r, l
            pairs.append((l, r))
            if term.op == "<=>":
                null_safe.add((l, r))
        elif _is_time_bound(term) and (not flink or _compares(term, times)):
            residual.append(term)
        elif flink:  # Flink evaluates any further condition on the candidate pairs (DIALECT §4)
            conditions.append(term)
        else:
            unsupported.append(term)
    if on is None and item.using is None and not item.natural and item.kind not in ("CROSS", "COMMA"):
        pairs = _key_pairs(left.node, right.node)  # Lenses: no ON means equality of the keys
    system_time = _system_time(right.node)
    if system_time is not None and not isinstance(item.right, ast.LateralTable):  # AS OF names a left column
        system_time = binder.bind_expr(system_time, left)
    shape = classify(left.node, right.node, item, bool(residual), system_time)
    if shape in ("temporal", "temporal-proctime", "temporal-function"):
        pairs, extra = _on_version_key(pairs, right.node)
        conditions = [ast.BinaryOp("<=>" if (l, r) in null_safe else "=", l, r) for l, r in extra] + conditions
    node = _join_node(left.node, right.node, join_type, shape, pairs, left_filters, right_filters, residual, item,
                      system_time)
    node = replace(node, condition=ex.conjoin(conditions), ksql_syntax=ksql_syntax)
    node = replace(node, operator=_operator(node))
    node = replace(node, static_table=_static_table(node))
    if null_safe:
        flags = tuple(pair in null_safe for pair in pairs)
        node = replace(node, left_side=replace(node.left_side, null_safe=flags), right_side=replace(node.right_side, null_safe=flags))
    on_keys = on is None and item.using is None and not item.natural and item.kind not in ("CROSS", "COMMA")
    node = replace(node, unsupported_terms=tuple(unsupported), rematch_ms=_lenses_rematch(node, item, binder),
                   on_keys=on_keys)
    if item.null_aware:
        _refuse_nullable_not_in(pairs[:1], both.node, item)
    if join_type in EXISTENCE:  # the subquery's columns stay inside it
        return Scope(node, left.merged, left.input_keys)
    return Scope(node, left.merged + right.merged + merged, input_keys)


def _refuse_nullable_not_in(pairs, node: PlanNode, item: ast.Join) -> None:
    """``x NOT IN (SELECT y ...)`` runs as an anti join on ``x = y`` only where neither can be NULL: SQL makes
    NOT IN unknown for every row once the subquery holds a NULL, and for a NULL ``x`` once it holds anything."""
    nullable = {f.id for f in node.fields if f.nullable}
    for l, r in pairs:
        if any(isinstance(n, Ref) and n.id in nullable for e in (l, r) for n in ex.walk(e)):
            raise StatementError(
                f"NOT IN over {expr_text(l)} and {expr_text(r)}, which may be NULL: a NULL makes NOT IN unknown for "
                "every row. Declare both columns NOT NULL (or a PRIMARY KEY), or write NOT EXISTS (SELECT ... WHERE "
                f"{expr_text(l)} = {expr_text(r)})", rule="not-in-nullable", pos=item.pos)


DEFAULT_REMATCH_MS = 24 * 3600 * 1000


def _lenses_rematch(join: Join, item: ast.Join, binder: "Binder") -> Optional[int]:
    """How long a padded stream record waits for its table row (DIALECT §3's Lenses exception), or None:
    only in a stream-table LEFT join (or ``table RIGHT JOIN stream``) whose table is a Lenses
    ``SELECT TABLE`` view."""
    if join.shape != "stream-table":
        return None
    table_item = {"LEFT": item.right, "RIGHT": item.left}.get(join.join_type)
    if (join.join_type == "LEFT") != (join.left.kind == "STREAM") or not isinstance(table_item, ast.Relation):
        return None
    view = binder.catalog.lookup(table_item.name)
    if not isinstance(view, ViewInfo) or view.query.result_kind != "TABLE":
        return None
    retention = binder.catalog.properties.get(REMATCH_RETENTION)
    return interval_ms(retention) if retention is not None else DEFAULT_REMATCH_MS


def classify(left: PlanNode, right: PlanNode, item: ast.Join, has_time_bound: bool, system_time=None) -> str:
    """The join's shape, from (left kind, right kind, window form)."""
    if isinstance(item.right, ast.LateralTable):
        return "temporal-function"
    lwin, rwin = _window(left), _window(right)
    flink = naming_style(left) == "flink" and naming_style(right) == "flink"
    if system_time is not None:
        if database_of(right) is not None:
            return "lookup"
        return "temporal-proctime" if _is_proctime(system_time, left) else "temporal"
    if lwin is not None or rwin is not None:
        return "instant-window"
    kinds = (left.kind, right.kind)
    if kinds == ("STREAM", "STREAM"):
        if item.within is not None:
            return "stream-stream"
        if flink:
            return "interval" if has_time_bound else "regular"
        return "stream-stream"
    if "STREAM" in kinds:
        table = right if right.kind == "TABLE" else left
        bounded = all(n.source.bounded for n in walk(table) if isinstance(n, Scan))
        return "regular" if flink and not bounded else "stream-table"
    return "regular" if flink else "table-table"


def _join_node(left, right, join_type, shape, pairs, lf, rf, residual, item: ast.Join, system_time) -> Join:
    nullable_left = join_type in ("RIGHT", "FULL")
    nullable_right = join_type in ("LEFT", "FULL")
    fields = tuple(replace(f, nullable=f.nullable or nullable_left) for f in left.fields) + tuple(
        replace(f, nullable=f.nullable or nullable_right) for f in right.fields if join_type not in EXISTENCE
    )
    key_fields, equivalents = [], []
    # ksqlDB's synthetic key (``LogicalPlanner.buildJoinKey``): a FULL join's, or one whose ON compares no column
    synthetic = (len(pairs) == 1 and declared_by(left, "ksql") and declared_by(right, "ksql")
                 and (join_type == "FULL" or not any(isinstance(e, Ref) for e in pairs[0])))
    for i, (l, r) in enumerate(pairs):
        name = synthetic_key_name(left.fields + right.fields) if synthetic else _key_name(l, r)
        kf = Field("", name, new_id(f"jk{i}"), _type(l) or _type(r), hidden=True)
        key_fields.append(kf)
        equivalents.append(frozenset({kf.id} | {e.id for e in (l, r) if isinstance(e, Ref)})
                           | _inherited_equivalents((l, r), (left, right)))
    key, key_equivalents = tuple(f.id for f in key_fields), tuple(equivalents)
    kind = "TABLE" if (left.kind, right.kind) == ("TABLE", "TABLE") else "STREAM"
    row_fields: tuple[Field, ...] = ()
    if shape == "regular" and kind == "TABLE" and _pairs_on_keys(pairs, left, right) and join_type not in EXISTENCE:
        shape = "table-table"  # Flink's upsert result of a join on both primary keys is the KSQL semantic table
    if shape == "table-table" and not _pairs_on_keys(pairs, left, right):
        shape = "foreign-key"
        key, key_equivalents = _foreign_key_result_key(pairs, left, right, join_type, key, key_equivalents)
    if shape == "regular":
        kind, key, key_equivalents, row_fields = _regular_result_key(left, right, join_type, key, key_equivalents)
    return Join(
        fields + tuple(key_fields) + row_fields, kind, key, key_equivalents,
        left=left, right=right, join_type=join_type, shape=shape,
        left_side=JoinSide(tuple(p[0] for p in pairs), ex.conjoin(lf), _window(left)),
        right_side=JoinSide(tuple(p[1] for p in pairs), ex.conjoin(rf), _window(right)),
        residual=ex.conjoin(residual), within=item.within, system_time=system_time,
        join_key=tuple(f.id for f in key_fields), pos=item.pos,
    )


SHAPE_OPERATORS = {
    "stream-stream": "stream_stream", "instant-window": "instant_window", "interval": "interval",
    "temporal": "temporal", "temporal-function": "temporal", "temporal-proctime": "stream_table", "lookup": "lookup",
    "regular": "regular", "stream-table": "stream_table", "table-table": "table_table", "foreign-key": "foreign_key",
}


def _operator(join: Join) -> str:
    """The module of ``streamjoin.operators`` that runs ``join`` (the module docstring's table)."""
    if join.shape == "instant-window" and "TABLE" in (join.left.kind, join.right.kind):
        table_side = "right" if join.left.kind == "STREAM" else "left"
        preserved = {"LEFT": ("left",), "RIGHT": ("right",), "FULL": ("left", "right")}.get(join.join_type, ())
        return "framed_table" if table_side in preserved else "stream_table"
    return SHAPE_OPERATORS[join.shape]


def _static_table(join: Join) -> bool:
    """A stream-table lookup whose table is read from a bounded source (no topic under it)."""
    if join.operator != "stream_table":
        return False
    table = join.right if join.left.kind == "STREAM" else join.left
    return not any(isinstance(n, Scan) and not n.source.bounded for n in walk(table))


def _compares(term: ast.Expr, times: set) -> bool:
    """Whether a comparison reads only the inputs' time attributes (an interval bound, not a condition)."""
    refs = {n.id for n in ex.walk(term) if isinstance(n, Ref)}
    return bool(refs) and refs <= times


def _on_version_key(pairs, versioned: PlanNode):
    """A temporal join's equalities on the versioned table's primary key (the lookup), and the others (a
    condition on the version found, as Flink evaluates them)."""
    def on_a_key_column(e) -> bool:
        return isinstance(e, Ref) and any(e.id == k or e.id in eq for k, eq in zip(versioned.key, versioned.key_equivalents))

    keyed = [(l, r) for l, r in pairs if on_a_key_column(r)]
    if not keyed or len(keyed) == len(pairs):
        return pairs, []
    return keyed, [p for p in pairs if p not in keyed]


def _regular_result_key(left: PlanNode, right: PlanNode, join_type: str, join_key, join_key_equivalents):
    """A Flink regular join's result. INNER between two streams never retracts: a stream keyed by the join
    key; nor does a SEMI join of two streams (a left row is written once, when its first match arrives).
    Otherwise it is a changelog with one row per pair of input rows, keyed by both rows' identities: a
    table row's primary key, a stream record's ingestion position (a hidden ``<alias>_row`` column); a SEMI or
    ANTI join's rows are the left input's, keyed by its rows' identities alone."""
    if join_type in ("INNER", "SEMI") and (left.kind, right.kind) == ("STREAM", "STREAM"):
        return "STREAM", join_key, join_key_equivalents, ()
    key, equivalents, row_fields = (), (), ()
    for side, node in (("left", left), ("right", right))[:1 if join_type in EXISTENCE else 2]:
        if node.kind == "TABLE":
            key += tuple(node.key)
            equivalents += tuple(frozenset([k]) for k in node.key)
        else:
            scan = base_scan(node)
            name = f"{scan.alias if scan is not None and scan.alias else side}_row"
            row = Field("", name, new_id(f"{side}_row"), "string", hidden=True)
            row_fields += (row,)
            key += (row.id,)
            equivalents += (frozenset([row.id]),)
    return "TABLE", key, equivalents, row_fields


def _bind_lateral_table(lt: ast.LateralTable, left: Scope, binder: "Binder") -> PlanNode:
    fn = binder.catalog.lookup(lt.call.name)
    if not isinstance(fn, TemporalFunction):
        raise StatementError(f"unknown table function {lt.call.name}", rule="unknown-function", pos=lt.pos)
    if len(lt.call.args) != 1:
        raise StatementError(f"{fn.name} takes one argument: the time to look up", rule="function-arguments", pos=lt.call.pos)
    history = binder.catalog.source(fn.history)
    alias = lt.alias.text if lt.alias else fn.name
    as_of = binder.bind_expr(lt.call.args[0], left)
    scan = binder.scan(history, alias, None, as_of)
    key = tuple(f.id for f in scan.fields if f.name.casefold() == fn.key_column.casefold())
    return replace(scan, kind="TABLE", key=key, key_equivalents=tuple(frozenset([k]) for k in key))


def _sides(e: ast.Expr, left_ids: set, right_ids: set) -> set:
    sides = set()
    for node in ex.walk(e):
        if isinstance(node, Ref):
            if node.id in left_ids:
                sides.add("L")
            elif node.id in right_ids:
                sides.add("R")
            elif node.id == ROWTIME:
                sides.update({"L", "R"})
    return sides


def _is_equi(term: ast.Expr, left_ids, right_ids) -> bool:
    if not (isinstance(term, ast.BinaryOp) and term.op in ("=", "<=>")):
        return False
    return {frozenset(_sides(term.left, left_ids, right_ids)), frozenset(_sides(term.right, left_ids, right_ids))} == {
        frozenset({"L"}), frozenset({"R"})
    }


def _is_time_bound(term: ast.Expr) -> bool:
    return isinstance(term, ast.Between) or (isinstance(term, ast.BinaryOp) and term.op in COMPARISONS)


def _key_pairs(left: PlanNode, right: PlanNode):
    if len(left.key) != len(right.key) or not left.key:
        return []
    return [(Ref(l, left.field(l).type, left.field(l).name), Ref(r, right.field(r).type, right.field(r).name))
            for l, r in zip(left.key, right.key)]


def _pairs_on_keys(pairs, left: PlanNode, right: PlanNode) -> bool:
    return on_key([p[0] for p in pairs], left) and on_key([p[1] for p in pairs], right)


def foreign_key_sides(join: Join) -> tuple[str, str]:
    """Which side of a foreign-key join is the child (joins on a non-key column) and which the parent
    (joins on its whole primary key): ('right', 'left') or ('left', 'right')."""
    if on_key(join.left_side.keys, join.left):
        return "right", "left"
    return "left", "right"


def _foreign_key_result_key(pairs, left, right, join_type, join_key, join_key_equivalents):
    """A foreign-key join's result is keyed by the child's primary key (ksqlDB); when the parent side is
    preserved (RIGHT/FULL with the parent on that side) a parent without children needs a row of its
    own, so the join key is added to the result key."""
    parent_on_left = on_key([p[0] for p in pairs], left)
    child = right if parent_on_left else left
    if not (pairs and (parent_on_left or on_key([p[1] for p in pairs], right))):
        return join_key, join_key_equivalents  # neither side on its key: refused by validation
    parent_preserved = join_type == "FULL" or join_type == ("LEFT" if parent_on_left else "RIGHT")
    key = tuple(child.key) + (join_key if parent_preserved else ())
    equivalents = tuple(frozenset([k]) for k in child.key) + (join_key_equivalents if parent_preserved else ())
    return key, equivalents


def on_key(exprs, node: PlanNode) -> bool:
    """Whether ``exprs`` are exactly ``node``'s key columns (or columns known to equal them), each once."""
    if not exprs or len(exprs) != len(node.key):
        return False
    positions = set()
    for e in exprs:
        if not isinstance(e, Ref):
            return False
        hits = [i for i, k in enumerate(node.key)
                if e.id == k or (i < len(node.key_equivalents) and e.id in node.key_equivalents[i])]
        if not hits:
            return False
        positions.add(hits[0])
    return len(positions) == len(node.key)


def _common_names(left: PlanNode, right: PlanNode) -> list[str]:
    rnames = {f.name.casefold() for f in right.fields if not f.hidden}
    return [f.name for f in left.fields if not f.hidden and f.name.casefold() in rnames]


def _concat(left: PlanNode, right: PlanNode) -> PlanNode:
    return PlanNode(left.fields + right.fields, "STREAM", ())


def _ksql_join_criteria(item: ast.Join, both: Scope, binder: "Binder") -> None:
    """ksqlDB's analysis of an ON that is one equality, for a query in its syntax (refusals streamjoin makes
    too, in ksqlDB's words): a side that reads no source or two; both sides reading one source; an ON that
    does not read the source joined. Self-joins and ONs of several equalities, which ksqlDB refuses, run
    (DIALECT §4 goes further)."""
    on = item.on
    if on is None or item.using is not None or item.natural:
        return
    if not (isinstance(on, ast.BinaryOp) and on.op == "="):
        return
    fields = {f.id: f for f in both.node.fields}
    used = []
    for side in (on.left, on.right):
        sources = {fields[r.id].qualifier.upper() for r in ex.walk(binder.bind_expr(side, both))
                   if isinstance(r, Ref) and r.id in fields and fields[r.id].qualifier}
        if len(sources) != 1:
            raise StatementError(
                f"Invalid comparison expression '{_ksql_text(side, both, binder)}' in join '{_ksql_text(on, both, binder)}'. "
                "Each side of the join comparision must contain references from exactly one source.",
                rule="ksql-join-criteria", pos=on.pos)
        used.append(sources.pop())
    if used[0] == used[1]:
        raise StatementError("Each side of the join must reference exactly one source and not the same source. "
                             f"Left side references `{used[0]}` and right references `{used[1]}`",
                             rule="ksql-join-criteria", pos=on.pos)
    alias = (item.right.alias or item.right.name).text.upper()
    if alias not in used:
        raise StatementError(f"A join criteria is expected to reference the source (`{alias}`) in the FROM clause, "
                             f"instead the right source references `{used[1]}` and the left source references "
                             f"`{used[0]}`", rule="ksql-join-criteria", pos=on.pos)


def _ksql_text(expr: ast.Expr, scope: Scope, binder: "Binder") -> str:
    """An ON expression as ksqlDB prints it: comparisons parenthesised, columns qualified, in upper case."""
    if isinstance(expr, ast.BinaryOp):
        return f"({_ksql_text(expr.left, scope, binder)} {expr.op} {_ksql_text(expr.right, scope, binder)})"
    if isinstance(expr, ast.Column):
        qualifier = expr.qualifier.text if expr.qualifier is not None else None
        if qualifier is None:
            bound = binder.bind_expr(expr, scope)
            field = next((f for f in scope.node.fields if isinstance(bound, Ref) and f.id == bound.id), None)
            qualifier = field.qualifier if field is not None else None
        name = expr.name.text if expr.name.quoted else expr.name.text.upper()
        return f"{qualifier.upper()}.{name}" if qualifier else name
    if isinstance(expr, ast.Literal) and expr.kind in ("null", "boolean"):
        return str(expr.value).lower() if expr.value is not None else "null"  # ksqlDB writes null, true, false
    if isinstance(expr, ast.Literal):
        return f"'{expr.value}'" if expr.kind == "string" else str(expr.value)
    return expr_text(expr).upper()


def _bind_on_term(binder: "Binder", term: ast.Expr, scope: Scope) -> ast.Expr:
    """Bind one ON term; an unknown column in a ksqlDB query is reported as ksqlDB words it (an unknown
    qualifier anywhere in the term first)."""
    ksql = naming_style(scope.node) == "ksql"
    for column in ex.walk(term) if ksql else ():
        if (isinstance(column, ast.Column) and column.qualifier is not None
                and column.qualifier.text.casefold() not in scope.qualifiers):
            try:
                scope.resolve(column)  # a STRUCT field or a facet
            except StatementError:
                raise _unknown_qualifier(column.qualifier, column.pos) from None
    try:
        return binder.bind_expr(term, scope)
    except StatementError as err:
        column = next((c for c in ex.walk(term) if isinstance(c, ast.Column) and c.pos == err.pos), None)
        if err.rule != "unknown-column" or column is None or naming_style(scope.node) != "ksql":
            raise
        if column.qualifier is not None and column.qualifier.text.casefold() not in scope.qualifiers:
            raise _unknown_qualifier(column.qualifier, err.pos) from None
        name = ".".join(display_name(i, "ksql") for i in (column.qualifier, column.name) if i is not None)
        raise StatementError(f"JOIN ON column '{name}' cannot be resolved.", rule="unknown-column", pos=err.pos) from None


def _unknown_qualifier(qualifier: ast.Ident, pos) -> StatementError:
    """ksqlDB's refusal of a column qualified by no input of the join."""
    return StatementError(f"Failed to prepare statement: '{display_name(qualifier, 'ksql')}' is not a valid stream/table "
                          "name or alias.", rule="unknown-column", pos=pos)


def _inherited_equivalents(exprs, inputs) -> frozenset:
    """The columns an input join already knows equal to one of ``exprs`` (ksqlDB's join equivalence set:
    in ``S1 JOIN T2 ON S1.ID = T2.ID JOIN T3 ON S1.ID = T3.ID`` the result key equals T2.ID too). A FULL
    join's key equals neither of its sides' columns, so it passes none on."""
    refs = {e.id for e in exprs if isinstance(e, Ref)}
    out: set = set()
    for node in inputs:
        while isinstance(node, Filter):
            node = node.input
        if isinstance(node, Join) and node.join_type != "FULL":
            for i, eq in enumerate(node.key_equivalents):
                ons = (node.left_side.keys[i], node.right_side.keys[i]) if i < len(node.left_side.keys) else ()
                if refs & eq or any(e in ons for e in exprs):  # a column, or the same ON expression
                    out |= eq
    return frozenset(out)


def synthetic_key_name(fields) -> str:
    """ksqlDB's name for a synthetic join key (a FULL join's, or one on expressions only), a column of its own:
    ``ROWKEY``, or ``ROWKEY_n`` with the first n no input column uses."""
    taken = {f.name.upper() for f in fields}
    n = 0
    while (name := "ROWKEY" if n == 0 else f"ROWKEY_{n}") in taken:
        n += 1
    return name


def _key_name(l: ast.Expr, r: ast.Expr) -> str:
    for e in (l, r):
        if isinstance(e, Ref) and e.name:
            return e.name.split(".")[-1]
    return "KSQL_COL_0"


def _type(e: ast.Expr) -> str:
    return ex.static_type(e)


def _window(node: PlanNode):
    scan = base_scan(node)
    return scan.window if scan is not None else getattr(node, "window", None)


def database_of(node: PlanNode):
    """The database table (``DatabaseTable``) ``node`` reads, when it is a scan of one (filters aside)."""
    scan = base_scan(node)
    return scan.source.database if scan is not None else None


def _system_time(node: PlanNode):
    scan = base_scan(node)
    return scan.system_time if scan is not None else None


def _is_proctime(expr: ast.Expr, left: PlanNode) -> bool:
    scan = base_scan(left)
    if scan is None or scan.source.proctime_column is None:
        return False
    ids = {f.id for f in scan.fields if f.name == scan.source.proctime_column}
    return any(isinstance(n, Ref) and n.id in ids for n in ex.walk(expr))
