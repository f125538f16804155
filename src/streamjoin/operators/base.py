"""The protocol every join operator implements, and what lowering hands it.

A join operator receives the two lowered inputs (DataFrames in the physical row layout of
``plan.nodes``: one column per field id plus ``_rowtime``, ``_seq``, ``_sub`` and ``_tombstone`` on
changelogs) and the bound ``Join`` node, and returns one DataFrame in the same layout holding the join's
fields and its key columns. Time-driven operators also read the tick rows of ``ctx.records`` (see
``connectors.embedded_source``) so every state bucket sees the batch-end stream time. Each operator module states its algorithm, its state and when that state is
purged in its docstring.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Protocol

from pyspark.sql import Column, DataFrame

from ..plan.nodes import Join


DEFAULT_TIME_BUCKETS = 8  # state buckets when lowering outside the engine (benchmarks); the engine's: runtime.checkpoint_layout


@dataclass(frozen=True)
class LoweringContext:
    """What an operator may need besides its inputs: where its query keeps checkpoints, and settings."""

    checkpoint_dir: str
    properties: dict
    records: Optional[DataFrame] = None  # the query's raw source rows, tick rows included
    time_buckets: int = DEFAULT_TIME_BUCKETS
    dead_letters: Optional[Callable] = None  # source name -> connectors.dead_letters.DeadLetters
    # (rows, reason, dropped) -> rows, counting the rows a stateless step then drops (runtime.observed_drops)
    observe_drops: Optional[Callable[[DataFrame, str, Column], DataFrame]] = None
    # the topics whose own clocks records carry in ``_topic_times``, in its order (``lower.lowering.side_topics``)
    side_topics: tuple = ()

class JoinOperator(Protocol):
    def lower(self, join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext) -> DataFrame: ...
