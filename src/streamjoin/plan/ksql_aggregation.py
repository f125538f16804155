"""ksqlDB's own refusals of a GROUP BY query (its ``AggregateAnalyzer`` and ``QueryValidator``), in its words and
in the order it makes them, for a ksqlDB SELECT over ksqlDB-declared inputs. The binder calls these; the
shared rules (``non-grouped-column`` and the rest) still apply to every other query.

1. a GROUP BY expression holding an aggregate function;  2. an aggregate inside an aggregate;
3. a GROUP BY expression given twice;  4. a GROUP BY without any aggregate in SELECT or HAVING;
5. SELECT expressions that read a column outside an aggregate and are no GROUP BY expression (listed whole);
6. a HAVING column outside an aggregate that no GROUP BY expression holds;
7. an aggregate without GROUP BY;
and of its projection: 8. a grouping expression not selected; 9. one selected twice; 10. no value column;
then 11. an aggregate function of a table that ksqlDB cannot take back (its ``TableAggregationFunction``s only);
12. over a DELIMITED input, an aggregate whose running value is an ARRAY, MAP or STRUCT (ksqlDB keeps it in the
input's value format, which holds none: ``MaterializationUtil``).
"""
from __future__ import annotations

from typing import Optional, Sequence

from ..errors import StatementError
from ..sql import ast
from . import expressions as ex
from .nodes import Aggregate, PlanNode, Project, Ref, Scan, expr_text, walk


def ksql_text(e: ast.Expr, qualified: bool = True) -> str:
    """``e`` as ksqlDB prints it in a message: unquoted names upper-cased, arithmetic in parentheses;
    without ``qualified``, column names without their source."""
    def shown(n: ast.Expr) -> Optional[ast.Expr]:
        if isinstance(n, ast.Column):
            name = n.name if n.name.quoted else ast.Ident(n.name.text.upper())
            qualifier = n.qualifier if n.qualifier is None or n.qualifier.quoted else ast.Ident(n.qualifier.text.upper())
            return ast.Column(name, qualifier if qualified else None)
        if isinstance(n, Ref):
            return ast.Column(ast.Ident((n.name or n.id).rsplit(".", 1)[-1].upper()))
        return None

    return expr_text(ex.transform(e, shown))


def _aggregate_calls(e: ast.Expr) -> list[ast.Call]:
    return [x for x in ex.walk(e) if isinstance(x, ast.Call) and x.name in ex.AGGREGATES]


def check_grouping(select: ast.Select, items: Sequence[tuple[ast.Expr, object]], statement: str) -> None:
    """Rules 1, 2, 4, and 5 and 7 without GROUP BY, on the query as written (``items``: the SELECT list with
    ``*`` expanded; ``statement``: its kind as ksqlDB names it, ``CREATE TABLE AS SELECT``)."""
    for e in select.group_by:
        calls = _aggregate_calls(e)
        if calls:
            raise StatementError(f"GROUP BY does not support aggregate functions: {calls[0].name} is an aggregate "
                                 "function.", rule="group-by-aggregate", pos=e.pos)
    clauses = [e for e, _ in items] + ([select.having] if select.having is not None else [])
    for e in clauses:
        for call in _aggregate_calls(e):
            if any(_aggregate_calls(a) for a in call.args):
                raise StatementError(f"Aggregate functions can not be nested: {ksql_text(call)}",
                                     rule="nested-aggregate", pos=call.pos)
    if select.group_by and not any(_aggregate_calls(e) for e in clauses):
        raise StatementError("GROUP BY requires aggregate functions in either the SELECT or HAVING clause.",
                             rule="group-by-without-aggregate", pos=select.group_by[0].pos)
    if not select.group_by:
        offenders = [e for e, _ in items if _reads_outside_aggregates(e)]
        if offenders:
            raise non_aggregate_select(offenders)
        if select.time_window is None:  # (a WINDOW without GROUP BY is refused as such)
            raise _aggregate_without_group_by(items, statement)


def _reads_outside_aggregates(e: ast.Expr) -> bool:
    """Whether ``e`` reads a column other than inside an aggregate function."""
    if isinstance(e, ast.Call) and e.name in ex.AGGREGATES:
        return False
    return isinstance(e, (ast.Column, Ref)) or any(_reads_outside_aggregates(c) for c in ex.children(e))


def check_no_duplicate_groups(written: Sequence[ast.Expr], bound: Sequence[ast.Expr]) -> None:
    """Rule 3: the later of two GROUP BY expressions that read the same thing, as written."""
    for i, e in enumerate(bound):
        if e in bound[:i]:
            raise StatementError(f"Duplicate GROUP BY expression: {ksql_text(written[i])}", rule="duplicate-group-by",
                                 pos=written[i].pos)


def non_aggregate_select(offenders: Sequence[ast.Expr]) -> StatementError:
    """Rule 5 (and rule 7 where a column is selected beside the aggregates)."""
    listed = ", ".join(ksql_text(e, qualified=False) for e in offenders)
    return StatementError(f"Non-aggregate SELECT expression(s) not part of GROUP BY: {listed}\nEither add the "
                          "column(s) to the GROUP BY or remove them from the SELECT.", rule="non-grouped-column",
                          pos=offenders[0].pos)


def non_aggregate_having(column: ast.Expr) -> StatementError:
    """Rule 6."""
    return StatementError(f"Non-aggregate HAVING expression not part of GROUP BY: {ksql_text(column, qualified=False)}",
                          rule="non-grouped-column", pos=column.pos)


def _aggregate_without_group_by(items: Sequence[tuple[ast.Expr, object]], statement: str) -> StatementError:
    """Rule 7: ``statement`` names the statement kind as ksqlDB does (``CREATE TABLE AS SELECT``); ksqlDB
    counts ``COUNT(*)`` as ``COUNT(ROWTIME)``."""
    call = next(c for e, _ in items for c in _aggregate_calls(e))
    text = f"{call.name}(ROWTIME)" if call.star or not call.args else ksql_text(call)
    return StatementError(f"{statement} statement does not support aggregate function [{text}] without a GROUP BY "
                          "clause.", rule="aggregate-without-group-by", pos=call.pos)


def check_projection(project: Project, group_by: Sequence[ast.Expr], target: str) -> None:
    """Rules 8-10, on the projection of the aggregate (``project``); ``target``: the sink's name."""
    missing = [ksql_text(e, qualified=False) for e, k in zip(group_by, project.key) if project.field(k).hidden]
    if missing:
        raise StatementError(f"The query used to build `{target}` must include the grouping expression"
                             f"{'s' if len(missing) > 1 else ''} {_and_joined(missing)} in its projection (eg, SELECT "
                             f"{', '.join(missing)}...).", rule="key-not-projected", pos=group_by[0].pos)
    grouped = set(project.input.key)
    for key in grouped:
        names = [f.name for f, e in project.items if isinstance(e, Ref) and e.id == key]
        if len(names) > 1:
            raise StatementError(f"The projection contains a key column more than once: `{names[0]}` and "
                                 f"`{names[1]}`.", rule="key-projected-twice", pos=group_by[0].pos)
    if all(f.hidden or f.id in project.key for f in project.fields):
        raise StatementError("The projection contains no value columns.", rule="no-value-columns",
                             pos=group_by[0].pos if group_by else None)


TABLE_AGGREGATES = {"COUNT", "SUM", "AVG", "COLLECT_LIST", "HISTOGRAM", "CORRELATION", "ATTR"}  # the ones a table's retraction can undo, in ksqlDB


def check_table_aggregates(plan: PlanNode) -> None:
    """Rule 11."""
    for node in walk(plan):
        if isinstance(node, Aggregate) and node.input.kind == "TABLE":
            names = list(dict.fromkeys(call.name for _, call in node.aggregates if call.name not in TABLE_AGGREGATES))
            if names:
                plural = "s" if len(names) > 1 else ""
                raise StatementError(f"The aggregation function{plural} {_and_joined(names)} cannot be applied to a "
                                     "table source, only to a stream source.", rule="table-aggregate")


# aggregates whose running value ksqlDB keeps as an ARRAY, MAP or STRUCT (AVG: its sum and count; LATEST_BY_OFFSET:
# the value and its offset; TOPK: the list so far; the standard deviations: sum, count and M2)
STRUCTURED_INTERMEDIATE = {"AVG", "TOPK", "TOPKDISTINCT", "COLLECT_LIST", "COLLECT_SET", "LATEST_BY_OFFSET",
                           "EARLIEST_BY_OFFSET", "STDDEV_SAMPLE", "KSQL_STDDEV_SAMP", "HISTOGRAM",
                           "CORRELATION", "ATTR"}


def check_intermediate_types(plan: PlanNode) -> None:
    """Rule 12."""
    for node in walk(plan):
        if not isinstance(node, Aggregate):
            continue
        formats = {getattr(n.source, "value_format", "") for n in walk(node.input) if isinstance(n, Scan)}
        structured = [call for _, call in node.aggregates if call.name in STRUCTURED_INTERMEDIATE or call.distinct]
        if "DELIMITED" in formats and structured:
            raise StatementError("One of the functions used in the statement has an intermediate type that the value "
                                 "format can not handle. Please remove the function or change the format.",
                                 rule="value-format", pos=structured[0].pos)


def _and_joined(names: Sequence[str]) -> str:
    """``A``, ``A and B``, ``A, B and C`` (ksqlDB's ``GrammaticalJoiner.and()``)."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
