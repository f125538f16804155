"""The protocol every join operator implements, and what lowering hands it.

A join operator receives the two lowered inputs (DataFrames in the physical row layout of
``plan.nodes``: one column per field id plus ``_rowtime``, ``_seq``, ``_sub`` and ``_tombstone`` on
changelogs) and the bound ``Join`` node, and returns one DataFrame in the same layout holding the join's
fields and its key columns. Time-driven operators also read the tick rows of ``ctx.records`` (see
``connectors.embedded_source``) so every state bucket sees the batch-end stream time. Each operator module states its algorithm, its state and when that state is
purged in its docstring, and declares its state (``DeclaredState``, from its ``state(node)``) for EXPLAIN and
for the query's checkpoint.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional, Protocol

from pyspark.sql import DataFrame

from ..plan.nodes import Join, PlanNode

if TYPE_CHECKING:
    from ..connectors.late_records import LateRecords


DEFAULT_TIME_BUCKETS = 8  # state buckets when lowering outside the engine (benchmarks); the engine's: runtime.checkpoint_layout


@dataclass(frozen=True)
class LoweringContext:
    """What an operator may need besides its inputs: where its query keeps checkpoints, and settings."""

    checkpoint_dir: str
    properties: dict
    records: Optional[DataFrame] = None  # the query's raw source rows, tick rows included
    time_buckets: int = DEFAULT_TIME_BUCKETS
    dead_letters: Optional[Callable] = None  # (source name, its failures' explainer) -> connectors.dead_letters.DeadLetters
    # (rows, {name: value}) -> rows, adding up each ``value`` per batch under its ``name`` (``runtime.observed_counts``):
    # the rows a stateless step drops, its own counts, a stateful operator's counters (``operators.state.run_segmented``)
    observe_counts: Optional[Callable[[DataFrame, dict], DataFrame]] = None
    # the topics whose own clocks records carry in ``_topic_times``, in its order (``lower.lowering.side_topics``)
    side_topics: tuple = ()
    plan: Optional[PlanNode] = None  # the whole query being lowered (what a database read needs: ``plan.pushdown``)
    # where a static join's table is checkpointed at query start (emptied by the engine first); none: in memory
    loaded_tables: Optional[str] = None
    # the checkpoint is of state layout 1 (``runtime.checkpoint_layout``): each bucket's meta value in a value state
    meta_in_value_state: bool = False
    # what the query's operators drop as late or for a null key goes to a topic (``connectors.late_records``)
    late_records: Optional["LateRecords"] = None

@dataclass(frozen=True)
class DeclaredState:
    """What a stateful operator keeps in Spark's state store, per hash bucket of its join (or group) key
    (``operators.state``). EXPLAIN prints it; ``name`` and ``version`` are saved in the query's checkpoint
    layout (``runtime.checkpoint_layout``), and a checkpoint whose state another version wrote is refused
    before the query starts: ``version`` goes up whenever a change to the operator makes the values it
    stored before unreadable or wrong to read."""

    name: str  # the operator, as checkpoints name it
    version: int
    keeps: str  # what a bucket holds
    segments: str  # how a bucket's rows are split into the segments a batch reads and writes
    purged: str  # when a stored row leaves
    # with more than one keyed stage (each a shuffle by hash bucket and a step): what each stage is keyed by, in
    # order; empty for one stage, keyed by the join (or group) key
    stages: tuple[str, ...] = ()

    def describe(self) -> str:
        return (f"state {self.name} v{self.version} per hash bucket: {self.keeps}; segments: {self.segments}; "
                f"purged: {self.purged}")


class JoinOperator(Protocol):
    def lower(self, join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext) -> DataFrame: ...
    def state(self, join: Join) -> Optional[DeclaredState]: ...
