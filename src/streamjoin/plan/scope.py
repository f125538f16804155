"""Name resolution: which plan field a column reference means."""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from ..errors import PREPARING, StatementError
from ..sql import ast
from .nodes import OWN_ROWTIME, RECORD_POSITIONS, ROWTIME, WINDOW_END, WINDOW_START, Field, Join, PlanNode, Ref, Scan, walk

_ids = itertools.count()

ROWTIME_NAMES = {"rowtime"}
WINDOW_BOUND_NAMES = {"windowstart", "windowend"}
KEY_NAMES = {"rowkey", "_key"}


def new_id(hint: str) -> str:
    """A fresh physical column name, unique within the statement being planned."""
    clean = re.sub(r"[^A-Za-z0-9_]", "_", hint)[:40]
    return f"c{next(_ids)}_{clean}"


def restart_ids() -> None:
    """Number a new statement's columns from 0: a query's column names (and so the state its operators
    keep) follow from its own text, not from what else the process planned before it."""
    global _ids
    _ids = itertools.count()


def matches(ident: ast.Ident, name: str) -> bool:
    return ident.text == name if ident.quoted else ident.text.casefold() == name.casefold()


class UnknownColumn(StatementError):
    """A name no input has; ``column`` as written (ksqlDB words it by the clause: ``binder.bind_select``)."""

    def __init__(self, column: ast.Column):
        self.column = column
        where = f" of {column.qualifier.text}" if column.qualifier else ""
        super().__init__(f"unknown column {column.name.text}{where}", rule="unknown-column", pos=column.pos)


@dataclass(frozen=True)
class Scope:
    """The fields visible to expressions over ``node``; ``merged`` maps a USING/NATURAL column name to
    the expression that stands for it unqualified."""

    node: PlanNode
    merged: tuple[tuple[str, ast.Expr], ...] = ()
    # key field ids of each named input (for ``alias._key`` / ``alias.ROWKEY`` after a join)
    input_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @staticmethod
    def of(node: PlanNode, alias: str) -> "Scope":
        return Scope(node, (), ((alias, node.key),))

    @property
    def qualifiers(self) -> set[str]:
        return {f.qualifier.casefold() for f in self.node.fields if f.qualifier}

    def resolve(self, col: ast.Column) -> ast.Expr:
        name = col.name.text
        if col.qualifier is None:
            for merged_name, expr in self.merged:
                if merged_name.casefold() == name.casefold():
                    return expr
        candidates = self._candidates(col, matches)
        if not candidates and (col.name.quoted or (col.qualifier is not None and col.qualifier.quoted)):
            # a quoted name that differs only in case from the one column it can mean (SQLstream's
            # `b1."ticker"` over a stream declared with an unquoted ticker)
            candidates = self._candidates(col, lambda ident, name: ident.text.casefold() == (name or "").casefold())
        if not candidates and col.qualifier is not None and col.qualifier.text.casefold() not in self.qualifiers:
            nested = self.facet_field(col.qualifier, col.name) or self._struct_field(col)
            if nested is not None:
                return nested
        if len(candidates) == 1:
            f = candidates[0]
            return Ref(f.id, f.type, _qualified(f), pos=col.pos)
        if len(candidates) > 1:
            could = sorted({f"{c.qualifier.upper()}.{c.name}" for c in candidates})
            raise StatementError(  # ksqlDB's words
                f"Column '{name.upper() if not col.name.quoted else name}' is ambiguous. Could be "
                f"{', '.join(could[:-1])} or {could[-1]}.", rule="ambiguous-column", pos=col.pos, stage=PREPARING)
        pseudo = self._pseudo(col)
        if pseudo is not None:
            return pseudo
        raise UnknownColumn(col)

    def _candidates(self, col: ast.Column, same) -> list[Field]:
        return [f for f in self.node.fields
                if not f.hidden and same(col.name, f.name) and (col.qualifier is None or same(col.qualifier, f.qualifier))]

    def facet_field(self, facet: ast.Ident, name: ast.Ident, qualifier: ast.Ident | None = None) -> ast.Expr | None:
        """Lenses ``_key.f`` (a field of the record key: key column ``f``) and ``_value.f`` (value column
        ``f``), optionally of one input (``alias._key.f``); None for any other qualifier."""
        kind = facet.text.casefold()
        if kind == "_value":
            return self.resolve(ast.Column(name, qualifier, pos=name.pos))
        if kind != "_key":
            return None
        key_ids = self.node.key
        if qualifier is not None:
            key_ids = next((ids for alias, ids in self.input_keys if matches(qualifier, alias)), ())
        keys = [f for f in self.node.fields if f.id in key_ids and f.name.casefold() == name.text.casefold()]
        if len(keys) != 1:
            raise StatementError(f"_key.{name.text} is not a field of the key", rule="unknown-column", pos=name.pos)
        return Ref(keys[0].id, keys[0].type, _qualified(keys[0]), pos=name.pos)

    def _struct_field(self, col: ast.Column) -> ast.Expr | None:
        """``s.f`` where ``s`` is a struct column (a Lenses nested field), not an input's alias."""
        candidates = [f for f in self.node.fields if not f.hidden and matches(col.qualifier, f.name)]
        if len(candidates) != 1 or not candidates[0].type.startswith("struct"):
            return None
        f = candidates[0]
        return ast.Subscript(Ref(f.id, f.type, _qualified(f), pos=col.pos), field=col.name, pos=col.pos)

    def _pseudo(self, col: ast.Column) -> ast.Expr | None:
        name = col.name.text.casefold()
        if col.qualifier is not None and col.qualifier.text.casefold() not in self.qualifiers:
            raise StatementError(f"unknown input {col.qualifier.text}", rule="unknown-column", pos=col.pos)
        if name in ROWTIME_NAMES:
            own = [f for f in self.node.fields if f.hidden and f.name == OWN_ROWTIME and col.qualifier is not None
                   and matches(col.qualifier, f.qualifier)]
            if own:  # a joined input's record time (``Binder``: ``alias.ROWTIME`` in a join)
                return Ref(own[0].id, "bigint", f"{own[0].qualifier}.ROWTIME", pos=col.pos)
            return Ref(ROWTIME, "bigint", "ROWTIME", pos=col.pos)
        if name.upper() in RECORD_POSITIONS:  # ksqlDB's ROWPARTITION / ROWOFFSET: the scans' hidden copies (``Binder``)
            found = [f for f in self.node.fields if f.hidden and f.name == name.upper()
                     and (col.qualifier is None or matches(col.qualifier, f.qualifier))]
            if len(found) > 1:
                raise StatementError(f"Column '{name.upper()}' is ambiguous. Could be "
                                     f"{' or '.join(f'{f.qualifier.upper()}.{f.name}' for f in found)}.",
                                     rule="ambiguous-column", pos=col.pos)
            if found:
                return Ref(found[0].id, found[0].type, _qualified(found[0]), pos=col.pos)
        if name in WINDOW_BOUND_NAMES and _windowed_scan(self.node):  # a windowed source's window (its key's)
            column = WINDOW_START if name == "windowstart" else WINDOW_END
            return Ref(column, "bigint", name.upper(), pos=col.pos)
        synthetic = synthetic_key(self.node)
        if col.qualifier is None and synthetic is not None and name == synthetic.name.casefold():
            return Ref(synthetic.id, synthetic.type, synthetic.name, pos=col.pos)
        if name in KEY_NAMES:
            key_ids = self.node.key
            if col.qualifier is not None:
                key_ids = next((ids for alias, ids in self.input_keys if matches(col.qualifier, alias)), ())
            keys = [f for f in self.node.fields if f.id in key_ids]
            if len(keys) == 1:
                f = keys[0]
                return Ref(f.id, f.type, _qualified(f), pos=col.pos)
            raise StatementError(
                f"{col.name.text} needs an input with exactly one key column", rule="unknown-column", pos=col.pos
            )
        return None


def synthetic_key(node: PlanNode) -> Field | None:
    """A ksqlDB join's synthetic key column (``ROWKEY`` or ``ROWKEY_n``, which no input has; ``plan.joins``), when
    ``node`` is that join or passes its key on unchanged."""
    while not isinstance(node, Join) and len(node.inputs) == 1 and node.key == node.inputs[0].key:
        node = node.inputs[0]
    if isinstance(node, Join) and len(node.key) == 1:
        f = node.field(node.key[0])
        inputs = {x.name.upper() for x in node.left.fields + node.right.fields}
        return f if f.name.upper().startswith("ROWKEY") and f.name.upper() not in inputs else None
    return None


def _qualified(f: Field) -> str:
    return f"{f.qualifier}.{f.name}" if f.qualifier else f.name


def _windowed_scan(node: PlanNode) -> bool:
    """Whether ``node`` reads a ksqlDB windowed source (``WINDOW_TYPE``): its rows carry their key's window."""
    return any(isinstance(n, Scan) and n.source.window is not None for n in walk(node))
