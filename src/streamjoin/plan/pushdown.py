"""What a query reads of a database table it captures at start (a static table, SQLstream's foreign tables):
the columns the query uses, and the rows its ON predicates on the table alone let through, as the SQL sent.

A predicate on the table side of a stream-table join only decides which table rows can match: a row that
fails it matches no stream record, whether it was read or not, so leaving it in the database changes no
result (INNER or LEFT). Only what SQL says the same way in PostgreSQL and SQLite is sent: comparisons,
AND/OR/NOT, IS [NOT] NULL, [NOT] IN and [NOT] BETWEEN over the table's columns and literals. Anything else
stays in Spark; the predicate is evaluated there too either way.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from ..connectors.database import quote, select_sql
from ..sql import ast
from . import expressions as ex
from .nodes import Join, JoinSide, PlanNode, Ref, Scan, base_scan, walk


@dataclass(frozen=True)
class DatabaseRead:
    columns: tuple[str, ...]  # the table's columns the query uses, in the table's order
    where: Optional[str] = None  # SQL, over the table's columns

    def sql(self, table: str) -> str:
        return select_sql(table, self.columns) + (f" WHERE {self.where}" if self.where else "")


def database_read(plan: PlanNode, scan: Scan) -> DatabaseRead:
    """What ``scan`` (a database table somewhere in ``plan``) needs to read."""
    names = {f.id: f.name for f in scan.fields if not f.hidden}
    used = _referenced(plan)
    columns = tuple(c.name for c in scan.source.columns if c.computed is None and
                    any(names.get(i) == c.name for i in used)) or tuple(c.name for c in scan.source.columns[:1])
    where = None
    for join in (n for n in walk(plan) if isinstance(n, Join) and n.static_table):
        side = join.right_side if base_scan(join.right) is scan else join.left_side if base_scan(join.left) is scan else None
        if side is not None and side.filter is not None:
            sent = [s for s in (_sql(term, names) for term in ex.conjuncts(side.filter)) if s is not None]
            where = " AND ".join(f"({s})" for s in sent) or None
    return DatabaseRead(columns, where)


def _referenced(plan: PlanNode) -> set[str]:
    """The ids of every column an expression anywhere in ``plan`` reads."""
    found: set[str] = set()

    def visit(value) -> None:
        if isinstance(value, Ref):
            found.add(value.id)
        elif isinstance(value, (tuple, list, frozenset)):
            for item in value:
                visit(item)
        elif isinstance(value, (ast.Expr, JoinSide)):
            for field in dataclasses.fields(value):
                visit(getattr(value, field.name))

    for node in walk(plan):
        for field in dataclasses.fields(node):
            if field.name not in ("fields", "input", "left", "right", "source", "target"):
                visit(getattr(node, field.name))
    return found


_COMPARISONS = {"=", "<>", "<", "<=", ">", ">="}


def _sql(e: ast.Expr, names: dict) -> Optional[str]:
    """``e`` as SQL over the table's columns, or None when it is not one of the forms sent."""
    if isinstance(e, Ref):
        return quote(names[e.id]) if e.id in names else None
    if isinstance(e, ast.Literal):
        if e.kind == "string":
            return "'" + str(e.value).replace("'", "''") + "'"
        if e.kind == "boolean":
            return "TRUE" if e.value else "FALSE"
        if e.kind in ("integer", "decimal"):
            return str(e.value)
        return None
    if isinstance(e, ast.BinaryOp) and e.op in _COMPARISONS | {"AND", "OR"}:
        left, right = _sql(e.left, names), _sql(e.right, names)
        return None if left is None or right is None else f"({left} {e.op} {right})"
    if isinstance(e, ast.UnaryOp) and e.op == "NOT":
        inner = _sql(e.operand, names)
        return None if inner is None else f"NOT ({inner})"
    if isinstance(e, ast.IsNull):
        inner = _sql(e.operand, names)
        return None if inner is None else f"{inner} IS {'NOT ' if e.negated else ''}NULL"
    if isinstance(e, ast.InList) and not e.ksql:  # ksqlDB's IN converts its values first: not SQL's
        parts = [_sql(x, names) for x in (e.operand, *e.items)]
        return None if None in parts else f"{parts[0]} {'NOT ' if e.negated else ''}IN ({', '.join(parts[1:])})"
    if isinstance(e, ast.Between):
        parts = [_sql(x, names) for x in (e.operand, e.low, e.high)]
        return None if None in parts else f"{parts[0]} {'NOT ' if e.negated else ''}BETWEEN {parts[1]} AND {parts[2]}"
    return None
