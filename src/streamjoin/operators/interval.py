"""Flink interval join: two streams, equalities (or none) and time bounds between their time attributes.

Semantics (DIALECT §3, Flink's time-interval join). The bounds (``plan.intervals``) give
``lower <= r.t - l.t <= upper``. The query's clock is the watermark (``connectors.event_time``). A record's
*close* is the last time of the other side it can match: ``l.t + upper`` for a left record, ``r.t - lower``
for a right one. A pair matches when keys are equal, the bounds hold and the earlier-read record is still
live when the later one arrives (the watermark at that arrival has not passed the earlier one's close);
it is emitted at once, at time ``max(l.t, r.t)``. A record of a preserved side (left in LEFT/FULL, right
in RIGHT/FULL) that has matched nothing is emitted null-padded at the first record whose watermark passes
its close. A record whose close the watermark already passed when it is read (late) still joins the
other side's live records, is not kept, and is emitted null-padded at once on a preserved side if it
matched nothing (otherwise counted as dropped). A null key never matches.

Algorithm and state: the windowed stream-stream operator (``operators.stream_stream``) in watermark mode:
per hash bucket of the join key, the stored records of both sides and the batch are joined vectorised
with pandas. State is every live record (key, time, close, ingestion order, payload, whether it still
awaits its close); a record is purged as soon as the watermark passes its close (after its null-padded
row, if due). Tick rows bring the batch-end watermark to every bucket.

Without an equality (Flink joins every pair inside the bounds) every record is in one bucket: a batch joins
its records with every live record of the other side in the window, on one core, with one bucket's state
(the same cost as a join whose every record has one key). Bounds that can never hold (``lower > upper``)
match nothing; an outer join pads each record once the watermark passes its close.

ON conditions over both inputs beyond the equalities and bounds (Flink: ``a.x < b.y``, ``OR``, functions)
are evaluated on each candidate pair inside the step (``operators.pair_condition``): a pair that fails is no
match, so in an outer join a record whose every pair fails is padded.
"""
from __future__ import annotations

from pyspark.sql import DataFrame

from ..plan.intervals import interval_bounds
from ..plan.nodes import Join
from .base import DeclaredState, LoweringContext
from .pair_condition import compile_condition, supported
from .stream_stream import STATE as WINDOWED_STATE, Window, lower_windowed


STATE = DeclaredState(
    WINDOWED_STATE.name, WINDOWED_STATE.version, keeps=WINDOWED_STATE.keeps, segments=WINDOWED_STATE.segments,
    purged="a record once the watermark passes its close (after its null-padded row, if due)")


class IntervalJoin:
    def state(self, join: Join) -> DeclaredState:
        return STATE

    def lower(self, join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext) -> DataFrame:
        bounds = interval_bounds(join)
        window = Window(
            before=-bounds.lower, after=bounds.upper, grace=0, eager=False,
            outer_left=join.join_type in ("LEFT", "FULL"), outer_right=join.join_type in ("RIGHT", "FULL"),
            watermark=True, condition=compile_condition(join.condition) if self.evaluates_condition(join) else None,
        )
        return lower_windowed(join, left, right, ctx, window)

    @staticmethod
    def evaluates_condition(join: Join) -> bool:
        """Whether the step evaluates ``join.condition`` on candidate pairs (else an INNER join's rows are
        filtered after it, in Spark, by the lowering)."""
        return join.condition is not None and supported(join.condition)


OPERATOR = IntervalJoin()
