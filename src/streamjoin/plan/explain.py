"""EXPLAIN and DESCRIBE. EXPLAIN shows a query twice: its logical plan (each plan node describes itself) and
what runs in Spark, as a graph (``QueryGraph``): the topics it reads, their decoding, filters where they run,
the shuffles by hash bucket, each operator with its kind, window and state, and the sink. The text form prints
that graph's steps in the order records flow; ``plan.drawing`` draws the same graph (SVG, DOT, Mermaid)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from .catalog import SourceInfo
from .inference import is_inferred
from .nodes import (Aggregate, Filter, Join, Lateral, PlanNode, Project, Repartition, Scan, Sink, WindowTable, expr_text,
                    join_grace, walk)
from .pushdown import database_read
from .settings import BOOTSTRAP, INGESTION_ORDER, STATE_TTL, setting_notes



@dataclass
class Step:
    """One box of a query's graph: ``kind`` is 'source', 'step' (stateless, in the task that reads the records),
    'shuffle' (a Spark exchange), 'operator' (keeps state) or 'sink'."""

    number: int
    kind: str
    title: str
    lines: list[str] = field(default_factory=list)


@dataclass
class QueryGraph:
    """What runs for one query: steps, and edges (from step, to step, label) in the direction records flow."""

    name: str
    steps: list[Step] = field(default_factory=list)
    edges: list[tuple[int, int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, kind: str, title: str, lines: list[str], *inputs: tuple[int, str]) -> int:
        step = Step(len(self.steps) + 1, kind, title, [line for line in lines if line])
        self.steps.append(step)
        self.edges.extend((source, step.number, label) for source, label in inputs)
        return step.number

    def inputs_of(self, number: int) -> list[int]:
        return [a for a, b, _ in self.edges if b == number]


def explain_text(plan: PlanNode, state_of: Optional[Callable] = None, settings: Optional[dict] = None) -> str:
    """The plan as text; ``state_of(node)`` (``lower.operator_table.declared_state``), when given, says what
    each stateful operator keeps; ``settings``, the script's SETs, what each does here."""
    lines = ["Logical plan:"]
    _tree(plan, 1, lines)
    lines.append("What runs in Spark (in the order records flow):")
    lines.extend("  " + line for line in graph_text(query_graph(plan, state_of, settings)))
    if settings:
        lines.append("Settings:")
        lines.extend("  " + line for line in setting_notes(settings))
    return "\n".join(lines)


def graph_text(graph: QueryGraph) -> list[str]:
    out = list(graph.notes)
    for step in graph.steps:
        inputs = graph.inputs_of(step.number)
        fed = f"  <- [{'], ['.join(map(str, inputs))}]" if inputs else ""
        out.append(f"[{step.number}] {step.title}{fed}")
        out.extend(f"    {line}" for line in step.lines)
    return out


def _tree(node: PlanNode, depth: int, lines: list[str]) -> None:
    kind = f" -> {node.kind.lower()}"
    lines.append("  " * depth + node.describe() + kind)
    for child in node.inputs:
        _tree(child, depth + 1, lines)


def query_graph(plan: PlanNode, state_of: Optional[Callable] = None, settings: Optional[dict] = None,
                name: str = "") -> QueryGraph:
    """The graph of what runs for ``plan`` (see ``explain_text`` for the arguments)."""
    settings = settings or {}
    graph = QueryGraph(name)
    topics = sorted({n.source.topic for n in walk(plan) if isinstance(n, Scan) and not n.source.bounded})
    if topics:
        if settings.get(BOOTSTRAP):
            order = ("in the order they were produced" if settings.get(INGESTION_ORDER) == "produced"
                     else "by record timestamp")
            where = f"Kafka at {settings[BOOTSTRAP]}, partitions merged {order}"
        else:
            where = "the embedded topics, in ingestion order"
        graph.notes.append(f"Input: one Spark source reads {', '.join(topics)} from {where}")
    _Builder(graph, plan, state_of or (lambda node: None), settings).add(plan)
    late_topic = settings.get("streamjoin.late.topic")
    if late_topic:
        graph.notes.append(f"Late records: every record dropped as late or for a null key is also written to topic "
                           f"{late_topic}, with why, the stream time and where it was read")
    return graph


class _Builder:
    def __init__(self, graph: QueryGraph, plan: PlanNode, state_of: Callable, settings: dict):
        self.graph, self.plan, self.state_of, self.settings = graph, plan, state_of, settings

    def add(self, node: PlanNode) -> int:
        """Add ``node`` and what feeds it; the number of the step its rows leave from."""
        g = self.graph
        if isinstance(node, Scan):
            return self._scan(node)
        if isinstance(node, Join):
            return self._join(node)
        (child,) = node.inputs
        fed = self.add(child)
        if isinstance(node, Filter) and node.operator:
            shuffle = self._shuffle(node, "the table's key", [], (fed, ""))
            return g.add("operator", f"Table filter (operators.{node.operator})",
                         [f"{node.where} {expr_text(node.predicate)}",
                          "a tombstone only for a key whose previous row passed", *self._state(node)], (shuffle, ""))
        if isinstance(node, Filter):
            return g.add("step", f"Filter [{node.where}]", [expr_text(node.predicate)], (fed, ""))
        if isinstance(node, Aggregate):
            groups = ", ".join(expr_text(e) for _, e in node.groups)
            shuffle = self._shuffle(node, "the GROUP BY key", [groups], (fed, ""))
            aggregates = ", ".join(f"{expr_text(e)} AS {f.name}" for f, e in node.aggregates)
            window = [f"window: {node.window.describe()}"] if node.window is not None else []
            return g.add("operator", f"Aggregate (operators.{node.operator})",
                         [f"GROUP BY {groups}", aggregates, *window, *self._state(node)], (shuffle, ""))
        if isinstance(node, Repartition):
            return g.add("shuffle", f"Repartition [{node.reason}]",
                         [f"by ({', '.join(expr_text(e) for e in node.by)}): the rows' new key"], (fed, ""))
        if isinstance(node, Project):
            return g.add("step", "Project", [", ".join(f"{expr_text(e)} AS {f.name}" for f, e in node.items)], (fed, ""))
        if isinstance(node, Sink):
            return g.add("sink", f"Sink {node.target.kind.lower()} {node.target.name}", self._sink(node), (fed, ""))
        if isinstance(node, (Lateral, WindowTable)):
            return g.add("step", type(node).__name__, [node.describe()], (fed, ""))
        return g.add("step", node.describe(), [], (fed, ""))

    def _scan(self, scan: Scan) -> int:
        info, g = scan.source, self.graph
        title = f"{info.kind.lower()} {info.name} AS {scan.alias}"
        if info.database is not None:
            if scan.system_time is not None:  # a lookup join reads it per micro-batch: drawn with the join
                return g.add("source", f"Database {title}", [info.database.describe()])
            return g.add("source", f"Database {title}", [info.database.describe(), "read once, when the query starts",
                                                           f"SQL sent: {database_read(self.plan, scan).sql(info.database.table)}"])
        if info.bounded_path:
            return g.add("source", f"File {title}", [f"{info.bounded_path}, read once when the query starts"])
        partitions = f"{info.partitions} partition{'s' if info.partitions != 1 else ''}"
        topic = g.add("source", f"Topic {info.topic}", [f"{partitions}; key {info.key_format}, value {info.value_format}"
                                                        + (f" ({info.changelog_format})" if info.changelog_format else "")])
        time = (f"event time: column {info.timestamp_column}" if info.timestamp_column
                else "event time: the record's timestamp")
        watermark = (f"watermark: {info.watermark_column or info.timestamp_column} - {info.watermark_delay_ms} ms"
                     if info.watermark_delay_ms is not None else "")
        window = f"OVER {scan.describe().split(' OVER ', 1)[1]}" if scan.window is not None else ""
        return g.add("step", f"Decode {title}", [
            f"{len([f for f in scan.fields if not f.hidden])} columns from key and value; a record that does not decode "
            "is dead-lettered with its reason", time, watermark, window], (topic, ""))

    def _join(self, join: Join) -> int:
        g = self.graph
        left, right = self.add(join.left), self.add(join.right)
        on = " AND ".join(f"{expr_text(a)} = {expr_text(b)}" for a, b in zip(join.left_side.keys, join.right_side.keys))
        lines = [f"{join.join_type} {join.shape} join", f"ON {on}" if on else "no equality: every row in one bucket"]
        if join.window_keys:
            lines.append("and " + ("their keys' sessions" if len(join.window_keys) > 1 else "their keys' windows"))
        if join.within is not None:
            lines.append(self._window(join))
        for label, side in (("left", join.left_side), ("right", join.right_side)):
            if side.filter is not None:
                lines.append(f"{label} rows match only where {expr_text(side.filter)}")
        for label, e in (("each pair within the window", join.residual), ("each candidate pair", join.condition)):
            if e is not None:
                lines.append(f"on {label}: {expr_text(e)}")
        if join.rematch_ms is not None:
            lines.append(f"a padded row is re-matched by a later table row for {join.rematch_ms} ms")
        if join.operator == "regular":
            ttl = self.settings.get(STATE_TTL)
            lines.append(f"retention: {STATE_TTL} = {ttl}" if ttl else "retention: rows kept until retracted (no "
                         f"'{STATE_TTL}')")
        if join.static_table:
            tables = [n for n in walk(join) if isinstance(n, Scan) and n.source.bounded]
            origin = "the database" if any(t.source.database for t in tables) else "its file"
            return g.add("operator", "Broadcast hash join", [*lines, f"the table, loaded once from {origin}, is sent to "
                                                             "every task: stream-static, no state, no shuffle"],
                         (left, "stream"), (right, "table"))
        if join.operator == "lookup":
            return g.add("operator", "Lookup join (operators.lookup)", [
                *lines, "per partition of a micro-batch: one query to the database for its records' distinct keys, "
                        "on the executors; no state, no shuffle"], (left, "stream"), (right, "looked up"))
        shuffle = self._shuffle(join, "the join key", [on], (left, "left"), (right, "right"))
        return g.add("operator", f"Join (operators.{join.operator})", [*lines, *self._state(join)], (shuffle, ""))

    def _window(self, join: Join) -> str:
        within = join.within
        text = f"window: {_duration(within.before_ms)} before, {_duration(within.after_ms)} after"
        if join.operator == "interval":
            return text + "; a record is kept until the watermark passes its close"
        grace = join_grace(within)
        retention = f"retention {_duration(within.before_ms + within.after_ms + grace)}"
        if within.grace_ms is None:
            return text + f"; no GRACE PERIOD: grace {_duration(grace)} ({retention})"
        return text + f"; grace {_duration(grace)} ({retention})"

    def _shuffle(self, node: PlanNode, key: str, lines: list[str], *inputs: tuple[int, str]) -> int:
        """The shuffle into ``node``'s operator: by ``key``, or by each of its stages' keys before the stage."""
        state = self.state_of(node)
        if state is not None and state.stages:
            return self.graph.add("shuffle", "Shuffle by hash bucket before each stage",
                                  [f"stage {i}: by {k}" for i, k in enumerate(state.stages, 1)], *inputs)
        return self.graph.add("shuffle", f"Shuffle by hash bucket of {key}", lines, *inputs)

    def _state(self, node: PlanNode) -> list[str]:
        state = self.state_of(node)
        if state is None:
            return []
        return [f"state {state.name} v{state.version} per hash bucket: {state.keeps}",
                f"segments: {state.segments}", f"purged: {state.purged}"]

    def _sink(self, sink: Sink) -> list[str]:
        target = sink.target
        if target.database is not None:
            keys = ", ".join(target.key_columns)
            return [target.database.describe(), "from the executors, one transaction per partition: " + (
                f"each key's last change upserted or deleted on ({keys})" if keys
                else "rows inserted, each part of a micro-batch once (noted in streamjoin_sink_commits)")]
        key = ", ".join(sink.input.field(k).name for k in sink.key) or "none"
        if target.window is not None:
            key += f" in its {target.window[0].lower()} window of {_duration(target.window[1])}"
        partitions = f"{target.partitions} partition{'s' if target.partitions != 1 else ''}"
        return [f"topic {target.topic} ({partitions}); key {key}; key {target.key_format}, value {target.value_format}",
                "exactly once: each micro-batch written once (its batch id)"]


def _duration(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


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
