"""ksqlDB's refusals of a query's SELECT, in its words, for a ksqlDB query over ksqlDB-declared inputs.

Reserved names (its ``Analyzer``): no SELECT item may be named as a system column (``ROWTIME``, ``ROWPARTITION``,
``ROWOFFSET``, ``WINDOWSTART``, ``WINDOWEND``) by an alias; a persistent query may not select one unaliased either
(a transient SELECT may).

The key (its ``validateKeyPresent``): a CREATE ... AS SELECT or INSERT INTO must select its result's key. A transient SELECT, Lenses, SQLstream and
Flink carry an unselected key along unseen; so does a script in old KSQL's style, whose inputs name their key with
the ``KEY`` property (its result key was the implicit ``ROWKEY``: the seeds' partitioning example). By what keys
the result (ksqlDB checks the first of these it meets under the SELECT):

- a ``PARTITION BY``: every partitioning expression must be selected (``PARTITION BY NULL`` keys nothing);
- a join: a foreign-key join's result is keyed by the left table's primary key, every one of its columns must
  be selected; any other join's key equals the ON columns ksqlDB calls viable (``JoinTree.viableKeyColumns``):
  those of the ON equality that are plain columns, with, in an n-way join, the viable columns of an input join
  whose key the ON reads (its equivalence set), and at least one of them must be selected; with none (an ON of
  expressions only) the key is a synthetic ``ROWKEY`` column, which must be selected itself. A FULL join keeps
  streamjoin's rule (DIALECT: the result key is the join key of whichever side is present, as the seeds select
  it through ``L.ID AS ID``), and so does a join on several equalities (ksqlDB refuses those);
- a source with key columns: every one of them must be selected.
An aggregate's grouping expressions are checked with its other rules (``ksql_aggregation``).
"""
from __future__ import annotations

from typing import Optional, Sequence

from ..errors import StatementError
from ..sql import ast
from . import expressions as ex
from ..connectors.formats import infers_columns
from .nodes import Filter, Join, PlanNode, Project, Ref, Repartition, Scan, expr_text, walk

SYNTHETIC_KEY_DOC = "https://cnfl.io/2LV7ouS"  # ksqlDB's DocumentationLinks.SYNTHETIC_JOIN_KEY_DOC_URL


SYSTEM_COLUMNS = ("ROWTIME", "ROWPARTITION", "ROWOFFSET", "WINDOWSTART", "WINDOWEND")


def check_reserved_names(items: Sequence[tuple[ast.Expr, object]], persistent: bool) -> None:
    """Refuse a SELECT item (written expression, alias or None) named as a system column."""
    for expr, alias in items:
        column = expr.name.text if isinstance(expr, ast.Column) else None
        name = alias.text if isinstance(alias, ast.Ident) else alias if isinstance(alias, str) else column
        reserved = next((c for c in SYSTEM_COLUMNS if name is not None and name.upper() == c), None)
        if reserved is None:
            continue
        if column is None or column.upper() != reserved:
            raise StatementError(f"`{reserved}` is a reserved column name. You cannot use it as an alias for a column.",
                                 rule="reserved-name", pos=getattr(alias, "pos", None) or expr.pos)
        if persistent:
            raise StatementError(f"Reserved column name in select: `{reserved}`. Please remove or alias the column.",
                                 rule="reserved-name", pos=expr.pos)


def check_key_selected(plan: PlanNode, target: str, pos: ast.Pos) -> None:
    """Refuse ``plan`` (a query writing ``target``; ``pos``: its SELECT) when its SELECT leaves out its key. Called
    once the query's other refusals have passed: ksqlDB checks the key last."""
    if not isinstance(plan, Project) or any(isinstance(n, Scan) and "key" in dict(n.source.properties) for n in walk(plan)):
        return
    selected = {e.id for f, e in plan.items if isinstance(e, Ref) and not f.hidden}
    node = plan.input
    while isinstance(node, Filter):
        node = node.input
    if isinstance(node, (Repartition, Scan)):
        _check_keys_once(plan, node)
    if isinstance(node, Repartition):
        if not all(isinstance(e, ast.Literal) and e.value is None for e in node.by) and not set(node.key) <= selected:
            _not_included(target, "partitioning expression", [_qualified_text(e, node.input) for e in node.by], True,
                          getattr(node.by[0], "pos", pos))
    elif isinstance(node, Join):
        _check_join(node, selected, target)
    elif isinstance(node, Scan) and not set(node.key) <= selected:
        _not_included(target, "key column", [node.field(k).name for k in node.key], True, pos)


def _check_keys_once(plan: Project, keyed: PlanNode) -> None:
    """ksqlDB's ``FinalProjectNode``: a key column selected twice (copying a key into the value takes AS_VALUE), and a
    projection of nothing but key columns, are refused."""
    for key in keyed.key:
        names = sorted(f.name for f, e in plan.items if isinstance(e, Ref) and e.id == key and not f.hidden)
        if len(names) > 1:
            listed = ", ".join(names[:-1]) + " and " + names[-1]
            raise StatementError(f"The projection contains a key column (`{keyed.field(key).name}`) more than once, "
                                 f"aliased as: {listed}.\nEach key column must only be in the projection once. If you "
                                 "intended to copy the key into the value, then consider using the AS_VALUE function to "
                                 "indicate which key reference should be copied.", rule="key-projected-twice")
    shown = [(f, e) for f, e in plan.items if not f.hidden]
    inferred = any(isinstance(n, Scan) and not n.source.value_columns  # from a schema registry this planner does not read
                   and infers_columns(n.source.value_format, dict(n.source.properties)) for n in walk(keyed))
    if shown and not inferred and all(isinstance(e, Ref) and e.id in keyed.key for _, e in shown):
        raise StatementError("The projection contains no value columns.", rule="no-value-columns")


def _not_included(target: str, kind: str, keys: Sequence[str], every: bool, pos: ast.Pos, synthetic: bool = False
                  ) -> None:
    """ksqlDB's ``throwKeysNotIncludedError``: ``every`` key must be selected, or (not ``every``) one of them."""
    plural = len(keys) > 1
    listed = keys[0] if not plural else f"{', '.join(keys[:-1])} {'and' if every else 'or'} {keys[-1]}"
    message = (f"Key{'s' if every and plural else ''} missing from projection (ie, SELECT). "
               + (f"See {SYNTHETIC_KEY_DOC}." if synthetic else "")
               + f"\nThe query used to build `{target}` must include the {kind}{'s' if plural else ''} {listed} in its "
               f"projection (eg, SELECT {', '.join(keys) if every else keys[0]}...).")
    if synthetic:
        message += (f"\n{keys[0]} was added as a synthetic key column because the join criteria did not match any source "
                    "column. This expression must be included in the projection and may be aliased.")
    raise StatementError(message, rule="key-not-projected", pos=pos)


def _check_join(join: Join, selected: set, target: str) -> None:
    if len(join.join_key) != 1 or join.join_type == "FULL":
        return
    if join.shape == "foreign-key":
        table = _leftmost(join)
        missing = [table.field(k) for k in table.key if k not in selected]
        if missing:
            plural = "s" if len(missing) > 1 else ""
            raise StatementError(
                f"Primary key column{plural} missing in projection. For foreign-key table-table joins, the projection "
                f"must include all primary key columns from the left input table (`{missing[0].qualifier.upper()}`). "
                f"Missing column{plural}: {', '.join(f'`{f.name}`' for f in missing)}.", rule="key-not-projected", pos=join.pos)
        return
    viable = _viable(join)
    if selected & ({*join.join_key} | {e.id for e in viable}):
        return
    if not viable:  # a synthetic key
        _not_included(target, "join expression", [next(f.name for f in join.fields if f.id == join.join_key[0])],
                      False, join.pos, synthetic=True)
    _not_included(target, "join expression", [_qualified(join, e) for e in viable], False, join.pos)


def _qualified_text(e: ast.Expr, node: PlanNode) -> str:
    """``e`` as ksqlDB prints a partitioning expression: its columns qualified by their source."""
    def shown(n: ast.Expr) -> Optional[ast.Expr]:
        if isinstance(n, Ref):
            field = next((f for f in node.fields if f.id == n.id), None)
            if field is not None:
                qualifier = ast.Ident(field.qualifier.upper()) if field.qualifier else None
                return ast.Column(ast.Ident(field.name), qualifier)
        return None

    return expr_text(ex.transform(e, shown))


def _join(node: PlanNode) -> Optional[Join]:
    while isinstance(node, Filter):
        node = node.input
    return node if isinstance(node, Join) else None


def _leftmost(join: Join) -> PlanNode:
    node: PlanNode = join
    while (inner := _join(node)) is not None:
        node = inner.left
    return node


def _on(join: Join) -> tuple[ast.Expr, ast.Expr]:
    return join.left_side.keys[0], join.right_side.keys[0]


def _equivalent(node: PlanNode) -> list[ast.Expr]:
    """ksqlDB's join equivalence set: the ON's two sides, with an input join's set when the ON reads one of its
    members. An outer join's key equals neither side: empty."""
    join = _join(node)
    if join is None or join.join_type == "FULL" or len(join.join_key) != 1:
        return []
    own = list(_on(join))
    out = list(own)
    for side in (join.left, join.right):
        inherited = _equivalent(side)
        if any(e in own for e in inherited):
            out += [e for e in inherited if e not in out]
    return out


def _viable(node: PlanNode) -> list[Ref]:
    """ksqlDB's viable key columns, in its order: the left input's, the ON's left column, the right input's, the
    ON's right column; only those in the equivalence set."""
    join = _join(node)
    if join is None or join.join_type == "FULL" or len(join.join_key) != 1:
        return []
    equivalent = _equivalent(join)
    out: list[Ref] = []
    left, right = _on(join)
    for e in (*_viable(join.left), left, *_viable(join.right), right):
        if isinstance(e, Ref) and e in equivalent and e not in out:
            out.append(e)
    return out


def _qualified(join: Join, column: Ref) -> str:
    """``ALIAS.COLUMN``, as ksqlDB prints a qualified column."""
    field = next(f for f in join.fields if f.id == column.id)
    return f"{field.qualifier.upper()}.{field.name}"
