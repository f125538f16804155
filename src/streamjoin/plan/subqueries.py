"""Subqueries in WHERE, as Flink plans them: ``[NOT] EXISTS`` and ``[NOT] IN`` become semi and anti joins.

``FROM a WHERE EXISTS (SELECT ... FROM b WHERE c)`` is ``a`` SEMI JOIN ``b`` ON ``c``: the rows of ``a`` that
have at least one row of ``b`` passing ``c`` with them (the correlated equalities of ``c`` are the join
key, its other terms filter ``b`` or the pairs). ``x IN (SELECT y FROM b WHERE c)`` is the same with
``x = y`` added to ``c``. Under NOT (or ``NOT IN``) it is an ANTI join: the rows of ``a`` with no such row.
Each subquery keeps its own columns: the outer query sees only ``a``'s, and an unqualified column in the
subquery is the subquery's own when its source has one of that name (SQL's inner scope first).

A subquery is accepted only as a term of WHERE's AND chain; anywhere else (under OR, in SELECT) it is
refused. ``NOT IN`` over a column that may be NULL is refused while planning the join (``plan.joins``): a
NULL on either side makes NOT IN unknown for every row, which a keyed anti join cannot see.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..errors import StatementError
from ..sql import ast
from . import expressions as ex
from .catalog import Catalog, SourceInfo

SUBQUERIES = (ast.Exists, ast.InSelect)


def subqueries_as_joins(select: ast.Select, catalog: Catalog) -> ast.Select:
    """``select`` with each ``[NOT] EXISTS`` / ``[NOT] IN`` term of its WHERE turned into a semi or anti join
    of its FROM (module docstring)."""
    kept, from_ = [], select.from_
    for term in ex.conjuncts(select.where):
        negated, inner = False, term
        if isinstance(term, ast.UnaryOp) and term.op == "NOT" and isinstance(term.operand, SUBQUERIES):
            negated, inner = True, term.operand
        if not isinstance(inner, SUBQUERIES):
            kept.append(term)
            continue
        query = _own_columns_qualified(_checked(inner.query), catalog)
        on = ex.conjuncts(query.where)
        null_aware = False
        if isinstance(inner, ast.InSelect):
            items = query.items
            if len(items) != 1 or isinstance(items[0].expr, ast.Star):
                raise StatementError("the subquery of IN selects exactly one column", rule="subquery", pos=inner.pos)
            negated = negated != inner.negated
            null_aware = negated
            operand = _qualified(inner.operand, select.from_, catalog)  # outside the subquery: the outer FROM's
            on = [ast.BinaryOp("=", operand, items[0].expr, pos=inner.pos)] + on
        from_ = ast.Join(from_, query.from_, "ANTI" if negated else "SEMI", on=ex.conjoin(on), null_aware=null_aware,
                         pos=inner.pos)
    select = replace(select, from_=from_, where=ex.conjoin(kept))
    for e in [item.expr for item in select.items] + [select.where, select.having]:
        for node in ex.walk(e) if e is not None else ():
            if isinstance(node, SUBQUERIES):
                raise StatementError("a subquery is supported as a term of WHERE joined by AND: [NOT] EXISTS (SELECT ...) "
                                     "or x [NOT] IN (SELECT y ...)", rule="subquery-position", pos=node.pos)
    return select


def _checked(query: ast.Select) -> ast.Select:
    """A subquery of the form a semi or anti join can run: a FROM and a WHERE, nothing that groups or windows."""
    extra = [name for name, present in (("GROUP BY", query.group_by), ("HAVING", query.having),
                                        ("PARTITION BY", query.partition_by), ("WINDOW", query.windows),
                                        ("EMIT", query.emit)) if present]
    if extra:
        raise StatementError(f"a subquery in WHERE with {', '.join(extra)} is not supported: it joins its FROM and "
                             "WHERE only (issue #26)", rule="subquery", pos=query.pos)
    return query


def _own_columns_qualified(query: ast.Select, catalog: Catalog) -> ast.Select:
    """The subquery with each unqualified column its FROM relation has qualified by that relation's alias."""
    items = tuple(replace(i, expr=_qualified(i.expr, query.from_, catalog)) for i in query.items)
    where = _qualified(query.where, query.from_, catalog) if query.where is not None else None
    return replace(query, items=items, where=where)


def _qualified(e: ast.Expr, from_: ast.FromItem, catalog: Catalog) -> ast.Expr:
    """``e`` with each unqualified column of ``from_`` (when it is one relation) qualified by its alias."""
    if not isinstance(from_, ast.Relation):
        return e
    source = catalog.lookup(from_.name)
    names = {c.name.casefold() for c in source.columns} if isinstance(source, SourceInfo) else set()
    alias = from_.alias or from_.name

    def qualify(node: ast.Expr) -> Optional[ast.Expr]:
        if isinstance(node, ast.Column) and node.qualifier is None and node.name.text.casefold() in names:
            return replace(node, qualifier=ast.Ident(alias.text, alias.quoted))
        return None

    return ex.transform(e, qualify)
