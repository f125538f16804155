"""Binder: a SELECT over the catalog becomes a logical plan.

Order of a query, as in ksqlDB: FROM (scans, views expanded, joins, laterals) → WHERE → GROUP BY /
aggregates → HAVING → PARTITION BY → SELECT projection → sink. Column references are resolved to
physical ids here; later stages never look at names again.
"""
from __future__ import annotations

from contextlib import contextmanager
import math
from dataclasses import replace
from typing import Callable, Optional

from ..connectors.formats import struct_fields
from ..errors import NotYetSupported, StatementError
from ..sql import ast
from . import expressions as ex
from . import ksql_aggregation, ksql_signatures
from .ksql_projection import check_reserved_names
from .catalog import Catalog, SourceInfo, TemporalFunction, ViewInfo, display_name
from .functions import (LAMBDA_FUNCTIONS, TABLE_FUNCTIONS, UNIT_ARGUMENT, aggregate_type, is_function, ksql_coercions,
                        ksql_comparisons, ksql_magic_timestamps, ksql_variants, ksql_written, lambda_variable_types,
                        unit_argument)
from .group_windows import auxiliary, group_window, ksql_window, lenses_group_window, new_window, window_bounds, with_window_columns
from .joins import bind_join
from .inference import infer_source
from .nodes import (
    EXISTENCE, OWN_ROWTIME, RECORD_POSITIONS, Aggregate, Field, Filter, Join, Lateral, PlanNode, Project, Ref, Repartition, Scan, WindowTable,
    declared_by, expr_text, naming_style, table_filter_operator, walk,
)
from .scope import ROWTIME_NAMES, Scope, UnknownColumn, new_id, synthetic_key
from .settings import collect_limit
from .subqueries import subqueries_as_joins
from .types import ksql_type_name


def _qualified_rowtimes(select: ast.Select) -> frozenset:
    """The inputs of a join whose ``alias.ROWTIME`` the query reads (casefolded aliases): each is its own
    record's time (ksqlDB), where an unqualified ROWTIME is the result row's."""
    if not isinstance(select.from_, ast.Join):
        return frozenset()
    exprs = [item.expr for item in select.items] + [select.where, select.having, *select.group_by, *select.partition_by]
    return frozenset(n.qualifier.text.casefold() for e in exprs if e is not None for n in ex.walk(e)
                     if isinstance(n, ast.Column) and n.qualifier is not None and n.name.text.casefold() in ROWTIME_NAMES)


def _reads_positions(select: ast.Select) -> bool:
    """Whether the query reads ksqlDB's ROWPARTITION or ROWOFFSET (``nodes.RECORD_POSITIONS``) anywhere."""
    exprs = [item.expr for item in select.items] + [select.where, select.having, *select.group_by, *select.partition_by]
    item = select.from_
    while isinstance(item, ast.Join):
        exprs.append(item.on)
        item = item.left
    return any(isinstance(n, ast.Column) and n.name.text.upper() in RECORD_POSITIONS
               for e in exprs if e is not None for n in ex.walk(e))


class Binder:
    def __init__(self, catalog: Catalog, sample_topic: Optional[Callable[[str], list]] = None):
        self.catalog = catalog
        self.sample_topic = sample_topic  # topic -> its first (key, value) records, for ``inferred``
        self._own_rowtimes: frozenset = frozenset()  # the SELECT being bound: inputs whose alias.ROWTIME it reads
        self.plain_select = True  # the SELECT being bound is no SELECT STREAM / SELECT TABLE (Lenses, SQLstream)
        self._positions = False  # the SELECT being bound reads ROWPARTITION or ROWOFFSET
        self.statement = "CREATE TABLE AS SELECT"  # the statement being planned, as ksqlDB names it in messages
        self.target = ""  # the name of the stream or table it writes

    # ------------------------------------------------------------------ queries

    def bind_select(self, select: ast.Select, *, style: Optional[str] = None) -> tuple[PlanNode, str]:
        """Plan a SELECT; returns the plan (ending in a Project) and the naming style of the query."""
        windows = {name.text.casefold(): spec for name, spec in select.windows}
        select = pull_where_into_comma_joins(subqueries_as_joins(select, self.catalog))
        outer_rowtimes, self._own_rowtimes = self._own_rowtimes, _qualified_rowtimes(select)
        outer_plain, self.plain_select = self.plain_select, select.result_kind is None
        outer_positions, self._positions = self._positions, _reads_positions(select)
        try:
            scope = self.bind_from(select.from_, windows)
        finally:
            self._own_rowtimes, self.plain_select, self._positions = outer_rowtimes, outer_plain, outer_positions
        node = scope.node
        style = style or naming_style(node)
        if style != "flink" and select.time_window is None:  # Lenses: GROUP BY tumble(1,m), ...
            window, group_by = lenses_group_window(select.group_by)
            if window is not None and not group_by:
                raise StatementError("GROUP BY needs a column beside its window", rule="time-window", pos=window.pos)
            if window is not None:
                select = replace(select, time_window=window, group_by=group_by)
        ksql = select.result_kind is None and style == "ksql" and declared_by(node, "ksql")  # ksqlDB's own refusals
        if ksql and select.bare_conditions:
            raise StatementError("Syntax Error: ksqlDB's GROUP BY and PARTITION BY take values, not conditions; "
                                 "put a condition in parentheses to group or partition by its truth",
                                 rule="syntax", pos=select.bare_conditions[0])
        _check_functions(select, ksql, declared_by(node, "ksql"))
        if declared_by(node, "ksql"):
            _check_ksql_literals(select)
            _check_ksql_expressions(select, node)
            select = _ksql_meanings(select)
        if isinstance(select.from_, ast.Join):
            node = _check_windowed_inputs(node, select.from_)
            scope = replace(scope, node=node)
        if select.where is not None:
            with _ksql_unknown_column("WHERE" if ksql else None):  # an unknown column first, as ksqlDB resolves them
                bound = self.bind_expr(select.where, scope)
            if ex.is_aggregate(select.where):
                raise StatementError("aggregate functions are not allowed in WHERE", rule="aggregate-in-where", pos=select.where.pos)
            node = _filtered(node, bound)
            scope = replace(scope, node=node)
        ksql_join = style == "ksql" and select.result_kind is None and isinstance(select.from_, ast.Join)
        ksql_partition = select.partition_by if style == "ksql" and select.result_kind is None and not ksql_join else ()
        items = self._expand_items(select.items, scope, ksql_join, ksql_partition, ksql)
        if ksql_join:
            items = _ksql_join_column_names(items, scope)
        if ksql:  # the items as written: a column * selects is never refused
            written = [(i.expr, i.alias) for i in select.items if not isinstance(i.expr, ast.Star)]
            check_reserved_names(_ksql_join_column_names(written, scope) if ksql_join else written,
                                 persistent=self.statement != "SELECT")
        if select.emit == "FINAL" and select.time_window is None:
            raise StatementError("EMIT FINAL is only supported for windowed aggregations.", rule="emit-final",
                                 pos=select.pos)
        aggregated = bool(select.group_by) or any(ex.is_aggregate(e) for e, _ in items)
        if ksql and aggregated:
            ksql_aggregation.check_grouping(select, items, self.statement)
        if select.time_window is not None and (style == "flink" or not select.group_by):
            raise StatementError("WINDOW clause requires a GROUP BY clause." if style != "flink" else
                                 "WINDOW TUMBLING / HOPPING / SESSION is ksqlDB's: over Flink tables write GROUP BY "
                                 "TUMBLE(time_attr, size) or a windowing table function", rule="time-window",
                                 pos=select.time_window.pos)
        if aggregated:
            node, items, scope = self._bind_aggregate(select, scope, items, style, ksql)
        elif select.having is not None:
            raise StatementError("HAVING needs GROUP BY", rule="having-without-group-by", pos=select.having.pos)
        rekey = [item for item in items if _named(item, "_key")] if select.result_kind else []
        if ksql and len(select.partition_by) > 1 and any(isinstance(e, ast.Literal) and e.kind == "null"
                                                        for e in select.partition_by):
            raise StatementError("Cannot PARTITION BY multiple columns including NULL", rule="partition-by",
                                 pos=select.partition_by[0].pos)
        if select.partition_by or rekey:
            with _ksql_unknown_column("PARTITION BY" if ksql else None):
                by = tuple(self.bind_expr(e, scope) for e in select.partition_by) or (
                    rekey[0][0] if len(rekey[0]) == 4 else self.bind_expr(rekey[0][0], scope),)
            node = _repartition(node, by, "PARTITION BY" if select.partition_by else "AS _key")
            scope = replace(scope, node=node)
        with _ksql_unknown_column("SELECT" if ksql else None):
            node = self._project(node, items, scope, style, keys_in_value=style == "flink" or select.result_kind == "STREAM")
        if ksql and aggregated:
            ksql_aggregation.check_projection(node, select.group_by, self.target)
            ksql_aggregation.check_table_aggregates(node)
            ksql_aggregation.check_intermediate_types(node)
        if rekey:  # Lenses `expr AS _key`: the record key, not a value field
            node = replace(node, fields=tuple(replace(f, hidden=True) if f.name.casefold() == "_key" else f
                                              for f in node.fields))
        kind = select.result_kind or node.kind
        if kind != node.kind:
            node = replace(node, kind=kind)
        return node, style

    def _expand_items(self, items, scope: Scope, ksql_join: bool, partition_by=(),
                      ksql: bool = False) -> list[tuple[ast.Expr, Optional[str]]]:
        """SELECT items with ``*`` expanded: (unbound expression, output name or None). ``*`` over several
        inputs names each column ``ALIAS_COLUMN``, and so does ``alias.*`` in a ksqlDB join (``ksql_join``).
        ``partition_by``: a ksqlDB PARTITION BY's expressions, whose schema ``*`` selects (``_partitioned_star``).
        ``ksql``: refusals in ksqlDB's words."""
        out: list[tuple[ast.Expr, Optional[str]]] = []
        for item in items:
            if isinstance(item.expr, ast.StructStar):
                base = item.expr.base
                fields = struct_fields(ex.static_type(self.bind_expr(base, scope)))
                if not fields:
                    raise StatementError(f"{expr_text(base)}->* needs a STRUCT", rule="expression-type", pos=item.expr.pos)
                out.extend((ast.Subscript(base, field=ast.Ident(name, quoted=True), pos=item.expr.pos), name)
                           for name, _ in fields)
            elif isinstance(item.expr, ast.Star) and item.expr.qualifier is None and partition_by:
                out.extend(_partitioned_star(scope.node, partition_by))
            elif isinstance(item.expr, ast.Star):
                q = item.expr.qualifier
                fields = [f for f in scope.node.fields if not f.hidden and (q is None or f.qualifier.casefold() == q.text.casefold())]
                if q is not None and not fields:
                    raise StatementError(f"'{display_name(q, 'ksql')}' is not a valid stream/table name or alias." if ksql
                                         else f"unknown input {q.text}", rule="unknown-column", pos=item.expr.pos)
                merged = {n.casefold() for n, _ in scope.merged}
                prefixed = len({f.qualifier for f in fields}) > 1 if q is None else ksql_join
                synthetic = synthetic_key(scope.node) if ksql_join and q is None else None
                if synthetic:  # ksqlDB: a FULL join's key is a column of its own (ROWKEY), which * selects;
                    # every input column, the ON columns too, stays in the value (NULL on a padded side)
                    out.append((ast.Column(ast.Ident(synthetic.name)), synthetic.name))
                seen = set()
                for f in fields:
                    if f.name.casefold() in merged:
                        if f.name.casefold() in seen:
                            continue
                        seen.add(f.name.casefold())
                        out.append((ast.Column(ast.Ident(f.name, True)), f.name))
                    else:
                        name = f"{f.qualifier}_{f.name}".upper() if prefixed and f.qualifier else f.name
                        out.append((ast.Column(ast.Ident(f.name, True), ast.Ident(f.qualifier, True) if f.qualifier else None), name))
            else:
                out.append((item.expr, item.alias))
        return out

    # ------------------------------------------------------------------ FROM

    def bind_from(self, item: ast.FromItem, windows: dict) -> Scope:
        if isinstance(item, ast.Relation):
            alias = (item.alias or item.name).text
            return Scope.of(self._bind_relation(item, windows), alias)
        if isinstance(item, ast.Lateral):
            scope = self.bind_from(item.source, windows)
            array = self.bind_expr(item.expr, scope)
            element = Field(item.alias.text, display_name(item.alias, naming_style(scope.node)), new_id(item.alias.text), "array-element")
            node = scope.node
            lateral = Lateral(node.fields + (element,), node.kind, node.key, node.key_equivalents,
                              input=node, expr=array, element=element)
            return replace(scope, node=lateral)
        if isinstance(item, ast.Join):
            left = _with_window_bounds(self.bind_from(item.left, windows))
            right = None if isinstance(item.right, ast.LateralTable) else _with_window_bounds(self.bind_from(item.right, windows))
            return bind_join(item, left, right, self)
        if isinstance(item, ast.WindowTable):
            return self._bind_window_table(item, windows)
        if isinstance(item, ast.LateralTable):
            raise StatementError("LATERAL TABLE must follow a comma or JOIN", rule="lateral-table-position", pos=item.pos)
        raise StatementError(f"unsupported FROM item {type(item).__name__}", rule="unsupported-from", pos=getattr(item, "pos", None))

    def _bind_window_table(self, item: ast.WindowTable, windows: dict) -> Scope:
        """``TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), size))``: ``t``'s columns and the window's (``plan.group_windows``)."""
        alias = (item.alias or item.source).text
        scope = Scope.of(self._bind_relation(ast.Relation(item.source, item.alias, pos=item.pos), windows), alias)
        time = scope.resolve(ast.Column(item.time, pos=item.time.pos))
        names = [(alias, f"window_{part}") for part in ("start", "end", "time")]
        window = new_window(item.function, time, item.sizes, scope.node, names, ast.Call(item.function, (time, *item.sizes), pos=item.pos))
        node = scope.node
        table = WindowTable(with_window_columns(node.fields, window), node.kind, node.key, node.key_equivalents,
                            input=node, window=window)
        return replace(scope, node=table)

    def _bind_relation(self, rel: ast.Relation, windows: dict) -> PlanNode:
        target = self.catalog.lookup(rel.name)
        if target is None and not self.plain_select:  # Lenses: a topic no statement declared
            target = self.inferred(rel.name)
        alias = rel.alias.text if rel.alias else rel.name.text
        window = rel.window
        if rel.window_name is not None:
            window = windows.get(rel.window_name.text.casefold())
            if window is None:
                raise StatementError(f"unknown window {rel.window_name.text}", rule="unknown-window", pos=rel.window_name.pos)
        if rel.event_time is not None and not isinstance(target, SourceInfo):
            raise StatementError("EVENTTIME BY reads a field of a topic's records: write it in the FROM of the view's "
                                 "own query", rule="event-time", pos=rel.event_time.pos)
        if rel.event_time is not None:
            target = replace(target, timestamp_column=self._event_time_column(target, alias, rel.event_time))
        if isinstance(target, ViewInfo):
            node, _ = self.bind_select(target.query)
            renamed = dict(zip([f.id for f in node.fields if not f.hidden], target.columns))
            fields = tuple(replace(f, qualifier=alias, name=renamed.get(f.id, f.name)) for f in node.fields)
            node = replace(node, fields=fields)
            if window is not None or rel.system_time is not None:
                node = _with_scan_options(node, window, rel.system_time)
            return node
        if isinstance(target, SourceInfo):
            if target.window is not None and target.kind == "TABLE":
                raise StatementError("KSQL does not support persistent queries on windowed tables.", rule="windowed-table",
                                     pos=rel.pos)
            scan = self.scan(target, alias, window, rel.system_time)
            if alias.casefold() in self._own_rowtimes and target.dialect in ("ksql", ""):
                # ``alias.ROWTIME`` in a ksqlDB join: the record's own time (of a query's sink too)
                scan = replace(scan, fields=scan.fields + (
                    Field(alias, OWN_ROWTIME, new_id(f"{alias}_rowtime"), "bigint", hidden=True),))
            if self._positions and target.dialect in ("ksql", ""):  # ksqlDB's ROWPARTITION and ROWOFFSET
                scan = replace(scan, fields=scan.fields + tuple(
                    Field(alias, name, new_id(f"{alias}_{name.lower()}"), type_, hidden=True)
                    for name, (_, type_) in RECORD_POSITIONS.items()))
            return scan
        if isinstance(target, TemporalFunction):
            raise StatementError(f"{target.name} is a temporal table function: use LATERAL TABLE ({target.name}(time))",
                                 rule="function-as-relation", pos=rel.pos)
        hint = "" if self.plain_select else (f": no statement declares it, and there is no topic {rel.name.text} with "
                                             "records to infer its schema from")
        raise StatementError(f"unknown stream or table {rel.name.text}{hint}", rule="unknown-source", pos=rel.name.pos)

    def inferred(self, name: ast.Ident) -> Optional[SourceInfo]:
        """The undeclared topic ``name`` as a stream with the schema its records imply (``plan.inference``),
        added to the catalog; None when there is no such topic or it holds no record yet."""
        records = self.sample_topic(name.text) if self.sample_topic is not None else []
        if not records:
            return None
        source = infer_source(name.text, name.text, records)
        self.catalog.add_source(source, pos=name.pos)
        return source

    def _event_time_column(self, source: SourceInfo, alias: str, expr: ast.Expr) -> str:
        """Lenses ``EVENTTIME BY field``: the value or key column (``_key``, ``_key.f``: epoch milliseconds, or a
        timestamp) whose value is each record's time instead of the record's own timestamp, for the query's
        clock, windows and joins."""
        scan = self.scan(source, alias)
        bound = self.bind_expr(expr, Scope.of(scan, alias))
        scan_fields = {f.id: f.name for f in scan.fields}
        column = source.column(scan_fields[bound.id]) if isinstance(bound, Ref) and bound.id in scan_fields else None
        if column is None or column.origin not in ("key", "value"):
            raise StatementError("EVENTTIME BY takes a field of the record's key or value, not an expression",
                                 rule="event-time", pos=expr.pos)
        if column.origin == "key" and source.key_format in ("AVRO", "PROTOBUF"):
            raise StatementError(f"EVENTTIME BY a field of an {source.key_format} key is not supported yet: the query's "
                                 "clock reads text and JSON keys", rule="event-time", pos=expr.pos)
        if column.type not in ("int", "bigint") and not column.type.startswith("timestamp"):
            raise StatementError(f"EVENTTIME BY {column.name}: the field must hold epoch milliseconds (INT or LONG) or "
                                 f"a TIMESTAMP, not {column.type.upper()}", rule="event-time", pos=expr.pos)
        return column.name

    def scan(self, source: SourceInfo, alias: str, window=None, system_time=None) -> Scan:
        table_keys = {k.casefold() for k in source.key_columns} if source.kind == "TABLE" else set()
        fields = tuple(
            Field(alias, c.name, new_id(f"{alias}_{c.name}"), c.type, nullable=c.nullable and c.name.casefold() not in table_keys)
            for c in source.columns
        )
        by_name = {f.name.casefold(): f.id for f in fields}
        key = tuple(by_name[k.casefold()] for k in source.key_columns)
        return Scan(fields, source.kind, key, tuple(frozenset([k]) for k in key),
                    source=source, alias=alias, window=window, system_time=system_time)

    # ------------------------------------------------------------------ expressions

    def bind_expr(self, e: ast.Expr, scope: Scope, variables: Optional[dict[str, str]] = None) -> ast.Expr:
        """``e`` with its columns resolved in ``scope``; ``variables``: the types of the lambda variables it sees."""
        variables = variables or {}

        def resolve(node: ast.Expr) -> Optional[ast.Expr]:
            if isinstance(node, ast.Column) and node.qualifier is None and node.name.text.upper() in variables:
                name = node.name.text.upper()
                return ast.LambdaVar(name, variables[name], pos=node.pos)
            if isinstance(node, ast.Column):
                return scope.resolve(node)
            if isinstance(node, ast.Call) and (node.name in LAMBDA_FUNCTIONS
                                               or any(isinstance(a, ast.Lambda) for a in node.args)):
                return self._bind_lambdas(node, scope, variables)
            if (isinstance(node, ast.Subscript) and node.field is not None and isinstance(node.base, ast.Column)
                    and node.base.qualifier is not None):  # alias._key.f / alias._value.f (Lenses)
                return scope.facet_field(node.base.name, node.field, node.base.qualifier)
            if isinstance(node, ast.Star) and not isinstance(node, Ref):
                return node
            if isinstance(node, ast.Call) and node.name in UNIT_ARGUMENT:  # TIMESTAMPADD(MINUTES, ...): a unit, no column
                call = unit_argument(node)
                return replace(call, args=tuple(a if isinstance(a, ast.TimeUnit) else self.bind_expr(a, scope, variables)
                                                for a in call.args))
            if isinstance(node, ast.StructLiteral):  # a field's name as the struct gets it: STRUCT(f := x) is STRUCT(F := x)
                return replace(node, fields=tuple((ast.Ident(ex.field_name(name), quoted=True),
                                                   self.bind_expr(value, scope, variables))
                                                  for name, value in node.fields))
            return None

        return ex.transform(e, resolve)

    def _bind_lambdas(self, call: ast.Call, scope: Scope, variables: dict[str, str]) -> ast.Call:
        """A call of a function taking lambdas (``functions.LAMBDA_FUNCTIONS``) or with lambda arguments: its other
        arguments bound first, then each lambda's body, its variables typed by the collection it runs over (and they
        hide columns of the same names)."""
        if call.name not in LAMBDA_FUNCTIONS:
            raise StatementError(f"{call.name} takes no lambda: only {', '.join(LAMBDA_FUNCTIONS)} do",
                                 rule="lambda-argument", pos=call.pos)
        args = [a if isinstance(a, ast.Lambda) else self.bind_expr(a, scope, variables) for a in call.args]
        types = lambda_variable_types(call.name, [ex.static_type(a) for a in args])
        over_map = bool(types) and ex.static_type(args[0]).startswith("map<")
        lambdas = [a for a in args if isinstance(a, ast.Lambda)]
        wanted = 2 if call.name == "TRANSFORM" and over_map else 1
        if (len(lambdas) != wanted or args.index(lambdas[0]) != len(args) - wanted
                or types and any(len(f.params) != len(types) for f in lambdas)):
            shapes = {"TRANSFORM": ("x => ...", "(k, v) => new key, (k, v) => new value"),
                      "FILTER": ("x => ...", "(k, v) => ..."),
                      "REDUCE": ("initial, (state, x) => ...", "initial, (state, k, v) => ...")}[call.name]
            raise StatementError(f"{call.name} over {'a MAP' if over_map else 'an ARRAY'} takes "
                                 f"{call.name}(collection, {shapes[over_map]})", rule="lambda-argument", pos=call.pos)
        return replace(call, args=tuple(  # a variable of a collection of unknown type has an unknown type
            replace(a, body=self.bind_expr(a.body, scope, {**variables, **dict(zip(a.params, types or ("",) * 3))}))
            if isinstance(a, ast.Lambda) else a for a in args))

    # ------------------------------------------------------------------ aggregation

    def _bind_aggregate(self, select: ast.Select, scope: Scope, items, style: str, ksql: bool = False):
        """``ksql``: ksqlDB's own refusals apply (``plan.ksql_aggregation``)."""
        window = ksql_window(select.time_window, select.emit, scope.node) if select.time_window is not None else None
        with _ksql_unknown_column("GROUP BY" if ksql else None):
            group_exprs = [self.bind_expr(window_bounds(e, window, "GROUP BY"), scope) for e in select.group_by]
        if ksql:
            ksql_aggregation.check_no_duplicate_groups(select.group_by, group_exprs)
        source = scope.node
        if style == "flink":  # GROUP BY TUMBLE(t, ...) / HOP(t, ...), or by a window table's start and end
            window, group_exprs, source = group_window(group_exprs, scope.node)
        groups = tuple((Field("", _name_of(e, style), new_id("g"), _type_of(e)), e) for e in group_exprs)
        aggs: list[tuple[Field, ast.Call]] = []

        def lift(e: ast.Expr) -> Optional[ast.Expr]:
            for f, g in groups:
                if e == g:
                    return Ref(f.id, f.type, f.name)
            column = auxiliary(e, window)
            if column is not None:
                return column
            if window is not None and isinstance(e, Ref) and e.id in {c.id for c in window.columns}:
                return e  # a window table's column: the aggregate's own
            if isinstance(e, ast.Call) and e.name in ex.AGGREGATES:
                counts_rows = e.star or not e.args  # COUNT(*), and ksqlDB's COUNT()
                problem = ksql_signatures.call_problem(*ksql_written(e)) if ksql and not counts_rows else None
                if problem is not None:  # ksqlDB's aggregate signatures, before the call is planned into another
                    raise StatementError(problem, rule="expression-type", pos=e.pos)
                limit = collect_limit(self.catalog.properties, e.name) if ksql else None
                if limit is not None and len(e.args) == 1:  # planned as the aggregate's parameter
                    e = replace(e, args=(*e.args, ast.Literal(limit, "integer", pos=e.pos)))
                for f, a in aggs:
                    if a == e:
                        return Ref(f.id, f.type, f.name)
                e = _one_argument(e)
                if e.name in ex.TOP_K:
                    _check_top_k(e)
                if e.name in ex.BY_OFFSET:
                    e = _by_offset(e)
                argument = _type_of(e.args[0]) if e.args and not e.star else ""
                kind = aggregate_type(e.name, argument, style)
                if e.name in ex.BY_OFFSET and len(e.args) > 1 and e.args[1].value is not None and kind:
                    kind = f"array<{kind}>"  # the first (last) n values
                f = Field("", e.name, new_id(e.name.lower()), kind)
                aggs.append((f, e))
                return Ref(f.id, f.type, f.name)
            if isinstance(e, Ref):
                raise _NotGrouped(e)
            return None

        bound_items, offenders = [], []
        for e, name in items:
            try:
                with _ksql_unknown_column("SELECT" if ksql else None):
                    bound_items.append((ex.transform(self.bind_expr(window_bounds(e, window, "SELECT"), scope), lift), name))
            except _NotGrouped:
                if not ksql:
                    raise
                offenders.append(e)  # ksqlDB lists every such SELECT expression, whole
        if offenders:
            raise ksql_aggregation.non_aggregate_select(offenders)
        having = None
        if select.having is not None:
            try:
                having = ex.transform(self.bind_expr(window_bounds(select.having, window, "HAVING"), scope), lift)
            except _NotGrouped as err:
                raise ksql_aggregation.non_aggregate_having(err.column) if ksql else err from None
        # a Flink group window's rows are a stream keyed by group and window start; a ksqlDB windowed aggregate is
        # a table keyed by its groups, its rows carrying their window beside the key (``nodes.WINDOW_START``)
        appends = window is not None and not window.ksql
        key = tuple(f.id for f, _ in groups) + ((window.start.id,) if appends else ())
        fields = with_window_columns(tuple(f for f, _ in groups), window) + tuple(f for f, _ in aggs)
        node: PlanNode = Aggregate(fields, "STREAM" if appends else "TABLE", key,
                                   tuple(frozenset([k]) for k in key), input=source, groups=groups,
                                   aggregates=tuple(aggs), window=window, operator=_aggregate_operator(source, window))
        if having is not None:
            node = Filter(node.fields, node.kind, node.key, node.key_equivalents, input=node, predicate=having, where="HAVING",
                          operator=table_filter_operator(node))
        # each item bound, and the expression as written, which names it (``COUNT(*)`` is ksqlDB's KSQL_COL_n)
        bound = [(e, name, True, written) for (e, name), (written, _) in zip(bound_items, items)]
        return node, bound, Scope(node, (), scope.input_keys)

    # ------------------------------------------------------------------ projection

    def _project(self, node: PlanNode, items, scope: Scope, style: str, keys_in_value: bool = False) -> Project:
        """``keys_in_value``: the result keeps its key columns in the value (Flink, ``SELECT STREAM``), so a
        column of an outer join's padded side stays itself (NULL where that side is missing) rather than
        standing for the join key; ksqlDB moves a projected key column into the record key instead."""
        padded = _padded_ids(node) if keys_in_value else frozenset()
        out_items: list[tuple[Field, ast.Expr]] = []
        candidates: list[tuple[int, int, int]] = []  # (key position, rank, item index)
        used_names: set[str] = set()
        generated = GeneratedNames(f.name for f in _named_input(scope.node).fields if not f.hidden)
        as_written = declared_by(scope.node, "lenses")  # Lenses keeps every name as written, an alias too
        for index, item in enumerate(items):
            bound = len(item) == 4  # (bound expression, alias, True, as written): from ``_bind_aggregate``
            expr = item[0] if bound else self.bind_expr(item[0], scope)
            written, alias = item[3] if bound else item[0], item[1]
            if as_written and alias is None and isinstance(written, ast.Column):
                alias = written.name
            if as_written and isinstance(alias, ast.Ident):
                alias = replace(alias, quoted=True)
            name = self._output_name(written, alias, style, index, generated)
            if name.casefold() in used_names:
                message = (f"Duplicate value columns found in schema: `{name}` {ksql_type_name(_type_of(expr))}"
                           if style == "ksql" else f"the output has two columns named {name}: add an alias")
                raise StatementError(message, rule="duplicate-column", pos=getattr(written, "pos", None))
            used_names.add(name.casefold())
            source_field = next((x for x in node.fields if isinstance(expr, Ref) and x.id == expr.id), None)
            f = Field("", name, new_id(name), _type_of(expr), nullable=source_field.nullable if source_field else True)
            key_pos = _key_position(node, expr, exact=isinstance(expr, Ref) and expr.id in padded)
            if key_pos is not None:
                candidates.append((key_pos, _key_rank(node, expr, key_pos), len(out_items)))
            out_items.append((f, expr))
        key_ids: list[Optional[str]] = [None] * len(node.key)
        chosen: dict[int, ast.Expr] = {}
        for key_pos, _, index in sorted(candidates):
            f, expr = out_items[index]
            if key_ids[key_pos] is None:  # the first viable column of this key position stands for it
                key_ids[key_pos], chosen[key_pos] = f.id, expr
                out_items[index] = (f, Ref(node.key[key_pos], _type_of(expr), f.name))  # the key as the node carries it
            elif style == "ksql" and not keys_in_value and _is_join(node) and expr == chosen[key_pos]:
                names = sorted(g.name for g, _ in out_items if g.id in (f.id, key_ids[key_pos]))
                raise StatementError(f"The projection contains a key column (`{expr.name.replace('.', '_').upper()}`) "
                                     f"more than once, aliased as: {' and '.join(names)}.", rule="key-projected-twice",
                                     pos=getattr(items[index][0], "pos", None))
        for i, kid in enumerate(key_ids):
            if kid is None:  # the key was not projected: carry it, hidden
                kf = node.field(node.key[i])
                hidden = Field("", kf.name, new_id("key_" + kf.name), kf.type, hidden=True)
                out_items.append((hidden, Ref(kf.id, kf.type, kf.name)))
                key_ids[i] = hidden.id
        key = tuple(key_ids)
        return Project(tuple(f for f, _ in out_items), node.kind, key, tuple(frozenset([k]) for k in key),
                       input=node, items=tuple(out_items))

    @staticmethod
    def _output_name(expr: ast.Expr, alias, style: str, index: int, generated: "GeneratedNames") -> str:
        if isinstance(alias, ast.Ident):
            return display_name(alias, style)
        if isinstance(alias, str):
            return alias
        return _name_of(expr, style, index, generated)


class _NotGrouped(StatementError):
    """A column read outside an aggregate function that no GROUP BY expression holds."""

    def __init__(self, column: Ref):
        self.column = column
        super().__init__(f"{column.name} must be in GROUP BY or inside an aggregate function", rule="non-grouped-column",
                         pos=column.pos)


@contextmanager
def _ksql_unknown_column(clause: Optional[str]):
    """An unknown column in ``clause``, in ksqlDB's words (None: the shared ones)."""
    try:
        yield
    except UnknownColumn as err:
        if clause is None:
            raise
        column = ksql_aggregation.ksql_text(err.column, qualified=clause != "PARTITION BY")
        if clause == "WHERE" and column in ("WINDOWSTART", "WINDOWEND"):  # a window bound: known to the Analyzer, not
            # to the WHERE clause's type check
            raise StatementError(f"Error in WHERE expression: Unknown column {column}.", rule="unknown-column",
                                 pos=err.pos) from None
        # ksqlDB's Analyzer adds why for PARTITION BY, which applies to the input, not to the result
        why = (f" '{column}' must be a column in the source schema since PARTITION BY is applied on the input."
               if clause == "PARTITION BY" else "")
        raise StatementError(f"{clause} column '{column}' cannot be resolved.{why}", rule="unknown-column",
                             pos=err.pos) from None


def _one_argument(call: ast.Call) -> ast.Call:
    """ksqlDB's aggregates of several columns, planned as aggregates of one STRUCT of them (the aggregate operators
    take one argument): TOPK(sort, c0, c1, ..., k), the k records with the largest ``sort``, each as a
    STRUCT<sort_col, col0, col1, ...> (``TopkKudaf``), ordered by its first field; CORRELATION(x, y) of STRUCT<X, Y>."""
    def row(names, values):
        return ast.StructLiteral(tuple((ast.Ident(n, quoted=True), v) for n, v in zip(names, values)), pos=call.pos)

    if call.name == "TOPK" and len(call.args) > 2:
        (first, *others), k = call.args[:-1], call.args[-1]
        return replace(call, args=(row(["sort_col"] + [f"col{i}" for i in range(len(others))], (first, *others)), k))
    if call.name == "CORRELATION":
        if len(call.args) != 2 or call.star:
            raise StatementError("CORRELATION takes two columns: CORRELATION(x, y)", rule="aggregate-arguments",
                                 pos=call.pos)
        return replace(call, args=(row(["X", "Y"], call.args),))
    return call


def _by_offset(call: ast.Call) -> ast.Call:
    """ksqlDB's EARLIEST_BY_OFFSET and LATEST_BY_OFFSET (x [, n] [, ignoreNulls]), their parameters literals:
    planned as (x) for one value with NULLs ignored (the default), else as (x, n or NULL, ignoreNulls)."""
    for i, arg in enumerate(call.args[1:], 2):
        if not isinstance(arg, ast.Literal):
            shown = arg.name.rsplit(".", 1)[-1] if isinstance(arg, Ref) else expr_text(arg)  # a column by its name
            raise StatementError(f"Parameter {i} passed to function {call.name} must be a literal constant, but was "
                                 f"expression: '{shown}'", rule="aggregate-arguments", pos=getattr(arg, "pos", call.pos))
    kinds = [a.kind for a in call.args[1:]]
    if kinds not in ([], ["boolean"], ["integer"], ["integer", "boolean"]) or call.star or (
            kinds[:1] == ["integer"] and call.args[1].value < 1):
        raise StatementError(f"{call.name} takes a column, then a count of values (an integer literal of at least 1), "
                             f"whether NULLs are ignored (a boolean literal), or both", rule="aggregate-arguments",
                             pos=call.pos)
    count = call.args[1].value if kinds[:1] == ["integer"] else None
    ignore_nulls = call.args[-1].value if kinds[-1:] == ["boolean"] else True
    if count is None and ignore_nulls:
        return replace(call, args=call.args[:1])
    return replace(call, args=(call.args[0], ast.Literal(count, "integer" if count else "null", pos=call.pos),
                               ast.Literal(ignore_nulls, "boolean", pos=call.pos)))


def _check_top_k(call: ast.Call) -> None:
    """ksqlDB's TOPK and TOPKDISTINCT take a column (TOPK: and further columns, ``_one_argument``) and how many of its
    largest values to keep: an integer literal of at least 1."""
    k = call.args[1] if len(call.args) == 2 else None
    if not (isinstance(k, ast.Literal) and k.kind == "integer" and k.value >= 1) or call.star:
        raise StatementError(f"{call.name} takes a column and an integer literal of at least 1: {call.name}(col, k)",
                             rule="aggregate-arguments", pos=call.pos)


def _check_functions(select: ast.Select, ksql: bool, ksql_inputs: bool) -> None:
    """Refuse a call of a function no dialect and no Spark SQL function has (``plan.functions``), before Spark
    would; ``ksql``: in ksqlDB's words; ``ksql_inputs``: the query's inputs were all declared with ksqlDB's DDL."""
    clauses = [item.expr for item in select.items] + [select.where, select.having, *select.group_by]
    for clause in filter(None, clauses):
        for call in ex.walk(clause):
            if isinstance(call, ast.Call) and not is_function(call.name, ksql_inputs):
                raise StatementError(f"Can't find any functions with the name '{call.name}'" if ksql
                                     else f"unknown function {call.name}", rule="unknown-function", pos=call.pos)


def _check_ksql_literals(select: ast.Select) -> None:
    """ksqlDB's parser refuses a number literal its type cannot hold: an integer beyond BIGINT, a number in E notation
    beyond DOUBLE (an integer with a minus sign is one literal there). Its message names the place as its
    ``ParsingException`` does for a node: one column past where the literal starts."""
    clauses = [item.expr for item in select.items] + [select.where, select.having, *select.group_by, *select.partition_by]
    for clause in filter(None, clauses):
        negated = {id(e.operand): e for e in ex.walk(clause) if isinstance(e, ast.UnaryOp) and e.op == "-"}
        for e in ex.walk(clause):
            if not isinstance(e, ast.Literal) or e.kind not in ("integer", "decimal"):
                continue
            sign = "-" if id(e) in negated else ""
            pos = negated[id(e)].pos if sign else e.pos
            if e.kind == "integer" and e.value > 2 ** 63 - (0 if sign else 1):
                problem = f"Invalid numeric literal: {sign}{e.value}"
            elif e.kind == "decimal" and "E" in e.value.upper() and math.isinf(float(e.value)):
                problem = f"Number overflows DOUBLE: {sign}{e.value}"
            else:
                continue
            raise StatementError(f"Failed to prepare statement: line {pos.line}:{pos.column + 1}: {problem}",
                                 rule="numeric-literal", pos=pos)


_TABLE_FUNCTION_SIGNATURES = {"EXPLODE": ("explode(ARRAY<DECIMAL> input)", "explode(ARRAY<T> list)"),
                               "CUBE_EXPLODE": ("cube_explode(ARRAY<T> columns)",)}  # as ksqlDB lists them


def _column_type(node: PlanNode, e: ast.Expr) -> str:
    """The type of ``e`` when it is a column of ``node`` named once; "" otherwise."""
    if not isinstance(e, ast.Column):
        return ""
    found = [f.type for f in node.fields if not f.hidden and f.name.casefold() == e.name.text.casefold()
             and (e.qualifier is None or f.qualifier.casefold() == e.qualifier.text.casefold())]
    return found[0] if len(found) == 1 else ""


def _check_ksql_expressions(select: ast.Select, input_: PlanNode) -> None:
    """ksqlDB's refusals of expressions it cannot run: a table function (EXPLODE) over a table or beside an
    aggregation, and a CASE whose every branch is NULL (it has no type)."""
    items = [item.expr for item in select.items]
    generators = [c for e in items for c in ex.walk(e) if isinstance(c, ast.Call) and c.name in TABLE_FUNCTIONS]
    if generators and input_.kind == "TABLE":
        raise StatementError("Table source is not supported with table functions", rule="table-function",
                             pos=generators[0].pos)
    if generators and (select.group_by or any(ex.is_aggregate(e) for e in items)):
        raise StatementError("Table functions cannot be used with aggregations.", rule="table-function",
                             pos=generators[0].pos)
    for call in generators:  # a column that is no ARRAY, as ksqlDB's function lookup refuses it
        types = [_column_type(input_, a) for a in call.args]
        if call.args and all(types) and not types[0].startswith("array<"):
            shown = ", ".join(ksql_type_name(t) for t in types)
            raise StatementError(f"Function '{call.name.lower()}' does not accept parameters ({shown}).\nValid "
                                 f"alternatives are:\n" + "\n".join(_TABLE_FUNCTION_SIGNATURES[call.name]),
                                 rule="expression-type", pos=call.pos)
    for clause in filter(None, items + [select.where, select.having]):
        for case in ex.walk(clause):
            results = [then for _, then in case.whens] + [case.else_] if isinstance(case, ast.Case) else []
            if results and all(r is None or (isinstance(r, ast.Literal) and r.kind == "null") for r in results):
                raise StatementError("Invalid Case expression. All case branches have NULL type", rule="expression-type",
                                     pos=case.pos)


def _ksql_meanings(select: ast.Select) -> ast.Select:
    """``select`` with every call of a name ksqlDB gives its own meaning made a call of that meaning
    (``functions.ksql_variants``), its comparisons FALSE with a NULL operand (``functions.ksql_comparisons``), and its
    IN lists and constructors typed as ksqlDB types them (``functions.ksql_coercions``), and the times its WHERE
    compares ROWTIME or a window bound with written as text (``functions.ksql_magic_timestamps``)."""
    def each(exprs):
        return tuple(ksql_comparisons(ksql_coercions(ksql_variants(e))) for e in exprs)

    def condition(e):
        return e and ksql_comparisons(ksql_coercions(ksql_variants(e)), condition=True)

    return replace(select, items=tuple(replace(i, expr=ksql_comparisons(ksql_coercions(ksql_variants(i.expr))))
                                       for i in select.items),
                   where=condition(ksql_magic_timestamps(select.where)), having=condition(select.having),
                   group_by=each(select.group_by), partition_by=each(select.partition_by))


def _aggregate_operator(input_: PlanNode, window) -> str:
    """The operator module of a GROUP BY over ``input_`` (``Aggregate.operator``)."""
    if window is not None:
        return "session_aggregate" if window.kind == "SESSION" else "window_aggregate"
    return "table_aggregate" if input_.kind == "TABLE" else "aggregate"


def _partitioned_star(node: PlanNode, partition_by) -> list[tuple[ast.Expr, Optional[str]]]:
    """``*`` under a ksqlDB PARTITION BY selects the repartitioned schema (``PartitionByParamsFactory``): the
    PARTITION BY expressions (the new key: a column by its name, ``s->f`` by the field's, others by generated
    names), then the input's value columns, then its old key columns, each column once."""
    fields = [f for f in node.fields if not f.hidden]
    moved = {e.name.text.casefold() for e in partition_by if isinstance(e, ast.Column)}
    out = [(e, display_name(e.field, "ksql") if isinstance(e, ast.Subscript) and e.field is not None else None)
           for e in partition_by]
    keys = [f for f in fields if f.id in node.key]
    values = [f for f in fields if f.id not in node.key]
    out += [(ast.Column(ast.Ident(f.name, True)), f.name) for f in values + keys if f.name.casefold() not in moved]
    return out


def _filtered(node: PlanNode, predicate: ast.Expr) -> PlanNode:
    """``node`` filtered by WHERE's ``predicate``; below a SEMI or ANTI join, which passes on its left input's
    rows (and only their columns): a left row that fails WHERE never enters it, where a filter after a
    changelog would write a tombstone for each row it fails, written or not."""
    if isinstance(node, Join) and node.join_type in EXISTENCE:
        return replace(node, left=_filtered(node.left, predicate))
    return Filter(node.fields, node.kind, node.key, node.key_equivalents, input=node, predicate=predicate,
                  operator=table_filter_operator(node))


def _ksql_join_column_names(items, scope: Scope) -> list:
    """ksqlDB's names for a join's unaliased column references: ``X.C`` is named ``X_C`` when ``C`` is a
    column of more than one of the joined sources (key columns included) or a pseudo-column (``ROWTIME``),
    else ``C`` (its ``AstSanitizer``). Only for ksqlDB queries: Lenses and SQLstream (``SELECT STREAM``)
    keep the bare names."""
    sources: dict[str, set[str]] = {}
    for f in scope.node.fields:
        if f.qualifier and not f.hidden:
            sources.setdefault(f.name.casefold(), set()).add(f.qualifier.casefold())
    out = []
    for expr, name in items:
        if name is None and isinstance(expr, ast.Column) and expr.qualifier is not None:
            column = expr.name.text.casefold()
            if len(sources.get(column, ())) > 1 or column in ROWTIME_NAMES:
                name = f"{display_name(expr.qualifier, 'ksql')}_{display_name(expr.name, 'ksql')}"
        out.append((expr, name))
    return out


def pull_where_into_comma_joins(select: ast.Select) -> ast.Select:
    """``FROM a, b WHERE a.x = b.y``: WHERE terms over both inputs of a comma join become its ON."""
    terms = ex.conjuncts(select.where)
    if not terms:
        return select

    def aliases(item: ast.FromItem) -> set[str]:
        if isinstance(item, ast.Relation):
            return {(item.alias or item.name).text.casefold()}
        if isinstance(item, ast.LateralTable):
            return {item.alias.text.casefold()} if item.alias else set()
        if isinstance(item, ast.Join):
            return aliases(item.left) | aliases(item.right)
        if isinstance(item, ast.Lateral):
            return aliases(item.source)
        return set()

    def qualifiers(e: ast.Expr) -> Optional[set[str]]:
        cols = [n for n in ex.walk(e) if isinstance(n, ast.Column)]
        if any(c.qualifier is None for c in cols):
            return None
        return {c.qualifier.text.casefold() for c in cols}

    def rewrite(item: ast.FromItem) -> ast.FromItem:
        if not isinstance(item, ast.Join):
            return item
        item = replace(item, left=rewrite(item.left))
        if item.kind != "COMMA":
            return item
        left, right = aliases(item.left), aliases(item.right)
        moved = []
        for t in list(terms):
            qs = qualifiers(t)
            if qs and qs <= left | right and qs & left and qs & right:
                moved.append(t)
                terms.remove(t)
        return replace(item, on=ex.conjoin(moved)) if moved else item

    from_ = rewrite(select.from_)
    return replace(select, from_=from_, where=ex.conjoin(terms))


def _name_of(e: ast.Expr, style: str, index: int = 0, generated: Optional["GeneratedNames"] = None) -> str:
    """The output name of an unaliased expression: a column's name; Flink's ``EXPR$<position>``; ksqlDB's
    generated names (``GeneratedNames``)."""
    if isinstance(e, ast.Column):
        return display_name(e.name, style)
    if isinstance(e, Ref) and e.name:
        return e.name.split(".")[-1]
    if style == "flink":  # Calcite: EXPR$<position in the SELECT list>
        return f"EXPR${index}"
    generated = generated or GeneratedNames(())
    if isinstance(e, ast.Subscript) and e.field is not None:
        return generated.next(display_name(e.field, style))
    return generated.next(GENERATED_PREFIX)


GENERATED_PREFIX = "KSQL_COL"


class GeneratedNames:
    """ksqlDB's names for unaliased expressions of one SELECT (its ``ColumnNames``): ``KSQL_COL_0``,
    ``KSQL_COL_1``, ... numbered over the generated names only; a struct field ``s->f`` is named ``F``, then
    ``F_1``, ``F_2``...; a number that an input column already uses (``KSQL_COL_3``, ``F_1``; a bare
    ``F`` counts as 0) is skipped."""

    def __init__(self, input_columns):
        self.used: dict[str, set[int]] = {}
        for name in input_columns:
            stem, number = _numbered(name)
            self.used.setdefault(stem, set()).add(number)
        self.next_number: dict[str, int] = {}

    def next(self, stem: str) -> str:
        number = self.next_number.get(stem, 0)
        while number in self.used.get(stem, ()):
            number += 1
        self.next_number[stem] = number + 1
        return f"{stem}_{number}" if number or stem == GENERATED_PREFIX else stem


def _numbered(name: str) -> tuple[str, int]:
    """``NAME_12`` -> (``NAME``, 12); ``NAME`` -> (``NAME``, 0)."""
    stem, _, digits = name.rpartition("_")
    return (stem, int(digits)) if stem and digits.isdigit() else (name, 0)


def _named_input(node: PlanNode) -> PlanNode:
    """The node whose column names ksqlDB's generated names avoid: an aggregate's input, not the aggregate
    (whose grouping columns are named by the projection itself)."""
    while isinstance(node, Filter):
        node = node.input
    return node.input if isinstance(node, Aggregate) else node


def _type_of(e: ast.Expr) -> str:
    return ex.static_type(e)


def _named(item, name: str) -> bool:
    """Whether a SELECT item is aliased ``name`` (a Lenses facet: ``AS _key``, ``AS _value``)."""
    alias = item[1]
    text = alias.text if isinstance(alias, ast.Ident) else alias
    return isinstance(text, str) and text.casefold() == name


def _key_position(node: PlanNode, expr: ast.Expr, exact: bool = False) -> Optional[int]:
    """Which key column ``expr`` is (or is known to equal); ``exact``: only the key column itself. Under a
    PARTITION BY, an expression it partitions by is that key column (``SELECT a->b AS k ... PARTITION BY a->b``)."""
    if isinstance(node, Repartition) and expr in node.by:
        return node.by.index(expr)
    if not isinstance(expr, Ref):
        return None
    for i, k in enumerate(node.key):
        equivalents = node.key_equivalents[i] if i < len(node.key_equivalents) else frozenset([k])
        if expr.id == k or (not exact and expr.id in equivalents):
            return i
    return None


def _is_join(node: PlanNode) -> bool:
    while isinstance(node, Filter):
        node = node.input
    return isinstance(node, Join)


def _key_rank(node: PlanNode, expr: Ref, key_pos: int) -> int:
    """Which of several projected columns equal to a key column becomes the key: the key itself, then
    the one of the left-most input (ksqlDB's viable key columns, in join-tree order: in ``FROM tt JOIN t
    ON t.id = tt.id``, ``tt.id`` even when ``t.id`` is projected first); the other stays a value column."""
    if not isinstance(expr, Ref) or expr.id == node.key[key_pos]:  # the key, or the expression a PARTITION BY keys by
        return -1
    return next((i for i, f in enumerate(node.fields) if f.id == expr.id), len(node.fields))


def _padded_ids(node: PlanNode) -> frozenset:
    """The fields of the side(s) an outer join under ``node`` pads with NULL (DIALECT §4: such a column is
    NULL in a padded row, even an ON column)."""
    while isinstance(node, Filter):
        node = node.input
    if not isinstance(node, Join):
        return frozenset()
    sides = {"LEFT": (node.right,), "RIGHT": (node.left,), "FULL": (node.left, node.right)}.get(node.join_type, ())
    return frozenset(f.id for side in sides for f in side.fields)


def _repartition(node: PlanNode, by: tuple[ast.Expr, ...], reason: str) -> PlanNode:
    """Re-key ``node`` by ``by``: a field reference keeps its field; other expressions get a hidden one."""
    fields = list(node.fields)
    key = []
    for e in by:
        if isinstance(e, Ref) and any(f.id == e.id for f in fields):
            key.append(e.id)
        else:
            f = Field("", "KSQL_COL", new_id("pk"), _type_of(e), hidden=True)
            fields.append(f)
            key.append(f.id)
    return Repartition(tuple(fields), node.kind, tuple(key), tuple(frozenset([k]) for k in key),
                       input=node, by=by, reason=reason)


def _with_scan_options(node: PlanNode, window, system_time) -> PlanNode:
    scans = [n for n in walk(node) if isinstance(n, Scan)]
    if len(scans) != 1 or scans[0] is not node:
        raise NotYetSupported("an OVER window or FOR SYSTEM_TIME on a view with operators", issue=6)
    return replace(node, window=window, system_time=system_time)




def _check_windowed_inputs(node: PlanNode, at: ast.Join) -> PlanNode:
    """ksqlDB's rules for joins of windowed sources (``WINDOW_TYPE``), in its words: never beside an unwindowed
    source; session windows only with session windows, hopping and tumbling only with hopping and tumbling; and
    no repartition of a windowed source — each side joined on its own key, both sides' keys holding windows of
    one kind and size. A join of two windowed sources matches their windows too (``Join.window_keys``)."""
    scans = [n for n in walk(node) if isinstance(n, Scan) and not n.source.bounded]
    windowed = [n for n in scans if n.source.window is not None]
    if not windowed:
        return node
    plain = [n for n in scans if n.source.window is None]
    if plain:
        raise StatementError(f"Can not join windowed source to non-windowed source.\n`{windowed[0].source.name}` is "
                             f"{windowed[0].source.window[0]} windowed\n`{plain[0].source.name}` is not windowed",
                             rule="windowed-join", pos=at.pos)
    kinds = [n.source.window[0] for n in windowed[:2]]
    if (kinds[0] == "SESSION") != (kinds[1] == "SESSION"):
        raise StatementError(
            f"Incompatible windowed sources.\nLeft source: {kinds[0]}\nRight source: {kinds[1]}\nSession windowed "
            "sources can only be joined to other session windowed sources, and may still not result in expected "
            "behaviour as session bounds must be an exact match for the join to work\nHopping and tumbling windowed "
            "sources can only be joined to other hopping and tumbling windowed sources", rule="windowed-join", pos=at.pos)
    on_own_keys = isinstance(node, Join) and all(
        isinstance(k, Ref) and k.id in side.key for side, keys in ((node.left, node.left_side.keys),
                                                                    (node.right, node.right_side.keys)) for k in keys)
    if not on_own_keys or windowed[0].source.window != windowed[1].source.window:
        raise StatementError("Implicit repartitioning of windowed sources is not supported. See "
                             "https://github.com/confluentinc/ksql/issues/4385.", rule="windowed-join", pos=at.pos)
    if not (isinstance(node.left, Scan) and isinstance(node.right, Scan)):
        raise StatementError("joins of more than two windowed sources are not supported yet (issue #25)",
                             rule="windowed-join", pos=at.pos)
    matched = 2 if kinds[0] == "SESSION" else 1  # a time window's key holds its start, a session's start and end
    return replace(node, window_keys=tuple(zip(node.left.window_bounds[:matched], node.right.window_bounds[:matched])))


def _with_window_bounds(scope: Scope) -> Scope:
    """A ksqlDB windowed source read by a join: its key's window as two more columns, WINDOWSTART and WINDOWEND
    (after its key columns, as ksqlDB's ``SELECT *`` lists them), which the join matches and passes on."""
    scan = scope.node
    if not isinstance(scan, Scan) or scan.source.window is None:
        return scope
    bounds = tuple(Field(scan.alias, name, new_id(f"{scan.alias}_{name}"), "bigint") for name in ("WINDOWSTART", "WINDOWEND"))
    after_key = max((i + 1 for i, f in enumerate(scan.fields) if f.id in scan.key), default=0)
    fields = scan.fields[:after_key] + bounds + scan.fields[after_key:]
    return replace(scope, node=replace(scan, fields=fields, window_bounds=tuple(f.id for f in bounds)))
