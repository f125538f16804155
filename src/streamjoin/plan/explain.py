"""EXPLAIN and DESCRIBE text: each plan node describes itself; this module indents the tree."""
from __future__ import annotations

from typing import Callable, Optional

from .catalog import SourceInfo
from .nodes import Aggregate, Filter, Join, PlanNode, Repartition, Scan, Sink, walk
from .inference import is_inferred
from .pushdown import database_read
from .settings import setting_notes


def explain_text(plan: PlanNode, state_of: Optional[Callable] = None, settings: Optional[dict] = None) -> str:
    """The plan as text; ``state_of(node)`` (``lower.operator_table.declared_state``), when given, says what
    each stateful operator keeps; ``settings``, the script's SETs, what each does here."""
    lines = ["Logical plan:"]
    _tree(plan, 1, lines)
    lines.append("Physical plan:")
    lines.extend("  " + line for line in _physical(plan, state_of or (lambda node: None)))
    if settings:
        lines.append("Settings:")
        lines.extend("  " + line for line in setting_notes(settings))
    return "\n".join(lines)


def _tree(node: PlanNode, depth: int, lines: list[str]) -> None:
    kind = f" -> {node.kind.lower()}"
    lines.append("  " * depth + node.describe() + kind)
    for child in node.inputs:
        _tree(child, depth + 1, lines)


def _physical(plan: PlanNode, state_of: Callable) -> list[str]:
    """Where work runs in Spark: repartitions (shuffles), stateful operators and their state."""
    out = ["Source: streamjoin_topics (one stream over every input topic, in ingestion order)"]
    stack = [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, Repartition):
            out.append(f"Repartition (Spark shuffle) by {node.describe().split(' by ', 1)[1]}")
        if isinstance(node, Join) and node.static_table:
            tables = [n for n in walk(node) if isinstance(n, Scan) and n.source.database]
            origin = "the database" if tables else "its file"
            out.append(f"Broadcast hash join of the stream with the table loaded once from {origin} when the query "
                       "starts (stream-static: no state)")
            out.extend(f"  SQL sent: {database_read(plan, t).sql(t.source.database.table)}" for t in tables)
        elif isinstance(node, Join) and node.operator == "lookup":
            out.append("Lookup join (operators.lookup): per partition of a micro-batch, one query to the database for "
                       "its records' distinct keys, on the executors; no state, no shuffle of its own")
        elif isinstance(node, Join):
            out.append(f"Repartition both inputs by a hash bucket of the join key; operator operators.{node.operator} "
                       f"({node.shape})")
        if isinstance(node, Aggregate):
            out.append(f"Repartition by a hash bucket of the GROUP BY key; operator operators.{node.operator}")
        if isinstance(node, Filter) and node.operator:
            out.append(f"Repartition by a hash bucket of the table's key; operator operators.{node.operator} "
                       f"({node.where}: a tombstone only for a key whose previous row passed)")
        state = state_of(node)
        if state is not None:
            out.append("  " + state.describe())
        if isinstance(node, Sink) and node.target.database is not None:
            keys = ", ".join(node.target.key_columns)
            out.append(f"Sink: {node.target.database.describe()}, from the executors, one transaction per partition: "
                       + (f"each key's last change upserted or deleted on ({keys})" if keys
                          else "rows inserted, each part of a micro-batch once (noted in streamjoin_sink_commits)"))
        elif isinstance(node, Sink):
            out.append(f"Sink: topic {node.target.topic}, exactly once per micro-batch (batch id)")
        stack.extend(node.inputs)
    return out


def describe_text(info: SourceInfo) -> str:
    if info.database is not None:  # no topic and no formats: a table in a database
        lines = [f"Name: {info.name}", f"Type: {info.kind}", f"Source: {info.database.describe()}"]
    else:
        lines = [f"Name: {info.name}", f"Type: {info.kind}", f"Topic: {info.topic}",
                 f"Key format: {info.key_format}", f"Value format: {info.value_format}"]
    if info.timestamp_column:
        lines.append(f"Timestamp column: {info.timestamp_column}")
    if info.watermark_delay_ms is not None:
        lines.append(f"Watermark delay: {info.watermark_delay_ms} ms")
    lines.append("Columns (inferred from the topic's records):" if is_inferred(info) else "Columns:")
    for c in info.columns:
        tag = " (key)" if c.name in info.key_columns else ""
        null = "" if c.nullable else " NOT NULL"
        lines.append(f"  {c.name} {c.type.upper()}{null}{tag}")
    return "\n".join(lines)
