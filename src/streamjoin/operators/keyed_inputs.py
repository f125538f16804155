"""Preparing a join's two inputs for a keyed operator, and small pandas helpers the operators share.

Each side gets its join-key expressions evaluated into shared columns ``__k0..``, a side tag, whether the
row may match (its one-input ON predicates hold and its key is not null), whether it deletes its key (a
changelog tombstone), and a state bucket: a hash of the join key modulo the number of buckets. A bucket is
the unit of operator state (``operators.state``): few buckets mean few state reads and writes per
micro-batch, more buckets spread the work over more cores.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, IntegralType

from ..connectors.embedded_source import TICK_TOPIC
from ..connectors.late_records import ORIGIN, described_column
from ..lower.expressions import compile_expr
from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, TOMBSTONE, TOPIC_TIMES, Join, JoinSide, PlanNode, Ref, under_chain
from ..sql import ast
from .base import LoweringContext
from .state import keep_dropped, key_index  # noqa: F401 - the operators' one key index, re-exported beside their helpers

SIDE, OK, NULL_KEY, BUCKET, DELETE = "__side", "__ok", "__null_key", "__bucket", "__delete"
CLOCK_STEPS = "__clock_steps"  # on tick rows, when asked for: every clock value the batch reached, rising
NO_TIME = np.iinfo(np.int64).min  # a null clock (no time read yet), as an int64 that sorts first
TICK = 3  # the side tag of tick rows: after both inputs' rows of the same ingestion position


def key_names(n: int) -> list[str]:
    return [f"__k{i}" for i in range(n)]


def payload(df: DataFrame) -> list[str]:
    """The field columns of a lowered input (everything but metadata)."""
    return [c for c in df.columns if not c.startswith("_")]


def tag_side(df: DataFrame, side: int, join_side: JoinSide, keys: Sequence[str], node: Optional[PlanNode] = None) -> DataFrame:
    """``df`` as one side of a join: ``join_side`` gives its key expressions and ON predicates. ``node``: the
    plan node ``df`` lowers; a join-key column known to equal one of its key columns is read from the key
    column itself, which a tombstone carries too. A NULL key matches nothing, except in an IS NOT DISTINCT
    FROM equality (``JoinSide.null_safe``), where it matches NULL."""
    key_exprs, match_filter = join_side.keys, join_side.filter
    if node is not None:
        key_exprs = [canonical_key(e, node) for e in key_exprs]
    ok = F.coalesce(compile_expr(match_filter), F.lit(False)) if match_filter is not None else F.lit(True)
    tombstone = F.coalesce(F.col(TOMBSTONE), F.lit(False)) if TOMBSTONE in df.columns else F.lit(False)
    prepared = df.select("*", F.lit(side).alias(SIDE), ok.alias(OK), tombstone.alias(DELETE),
                         *[compile_expr(e).alias(k) for k, e in zip(keys, key_exprs)])
    if TOMBSTONE in df.columns:
        prepared = prepared.drop(TOMBSTONE)
    if TOPIC_TIMES in df.columns:  # read into a windowed join's side clocks before this, if at all
        prepared = prepared.drop(TOPIC_TIMES)
    not_null = F.lit(True)
    for i, k in enumerate(keys):
        if not (i < len(join_side.null_safe) and join_side.null_safe[i]):
            not_null = not_null & F.col(k).isNotNull()
    return prepared.withColumn(OK, F.col(OK) & not_null).withColumn(NULL_KEY, ~not_null)


def tick_rows(ctx: LoweringContext, topic_times: bool = False, clock_steps: bool = False) -> DataFrame:
    """The batch's tick rows (one per bucket, carrying the batch-end clock and, as their rowtime, the clock
    at the batch's first record), tagged ``TICK``; see
    ``connectors.embedded_source``. Time-driven operators union them with their bucketed inputs."""
    side_clocks = [F.col("topic_times").alias(TOPIC_TIMES)] if topic_times and "topic_times" in ctx.records.columns else []
    steps = [F.col("clock_steps").alias(CLOCK_STEPS)] if clock_steps else []
    return ctx.records.where(F.col("topic") == TICK_TOPIC).select(
        F.col("partition").alias(BUCKET), F.lit(TICK).alias(SIDE), F.col("seq").alias(SEQ),
        F.col("stream_time").alias(STREAM_TIME), F.col("timestamp").alias(ROWTIME), *side_clocks, *steps,
    )


def tick_only_clock(rows) -> Optional[int]:
    """The batch-end clock (``NO_TIME`` if none yet) when a bucket's rows (an Arrow table, as
    ``state.run_segmented``'s ``idle`` gets them) are only tick rows; None when they hold a record."""
    import pyarrow.compute as pc

    if pc.any(pc.not_equal(rows.column(SIDE), TICK)).as_py():
        return None
    clock = pc.max(rows.column(STREAM_TIME)).as_py()
    return NO_TIME if clock is None else int(clock)


def canonical_key(e: ast.Expr, node: PlanNode) -> ast.Expr:
    """``e`` read from ``node``'s key column when ``node`` knows them equal. Not under a FULL join's key: that
    equals neither side's ON column on the rows it pads (ksqlDB: a later join on ``L.ID`` drops them)."""
    full = under_chain(node, Join)
    if full is not None and full.join_type == "FULL" and full.key == node.key:
        return e
    if isinstance(e, Ref):
        for i, k in enumerate(node.key):
            if i < len(node.key_equivalents) and e.id in node.key_equivalents[i]:
                return Ref(k, e.type, e.name)
    return e


def bucketed(df: DataFrame, columns: Sequence[str], buckets: int) -> DataFrame:
    """A bucket per row from its key columns; without any (a join with no equality) every row is in bucket 0."""
    if not columns:
        return df.withColumn(BUCKET, F.lit(0))
    return df.withColumn(BUCKET, F.pmod(F.xxhash64(*columns), F.lit(buckets)).cast("int"))


def clock_values(column) -> np.ndarray:
    """Times (a clock column, or any ms column) as int64, ``NO_TIME`` where null."""
    values = np.asarray(column, dtype=float)
    return np.where(np.isnan(values), NO_TIME, values).astype(np.int64)


def integral_columns(df: DataFrame, columns: Sequence[str]) -> list[str]:
    """Columns of an integral Spark type: pandas hands them over as floats when a batch holds a null."""
    types: dict[str, DataType] = {f.name: f.dataType for f in df.schema.fields}
    return [c for c in columns if isinstance(types[c], IntegralType)]


def restore_integers(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Turn float columns back into int64 once their nulls are gone, so keys compare and hash alike."""
    for c in columns:
        if c in frame.columns and frame[c].dtype.kind == "f" and not frame[c].isna().any():
            frame[c] = frame[c].astype(np.int64)
    return frame


def take(values: np.ndarray, positions: np.ndarray, present: np.ndarray) -> np.ndarray:
    """``values[positions]`` where ``present``, None elsewhere (positions may be -1 there)."""
    if values.dtype.kind in "mM":  # numpy would turn datetimes into integers in an object array
        values = pd.Series(values).to_numpy(dtype=object)
    out = np.full(len(positions), None, dtype=object)
    out[present] = values[positions[present]]
    return out


def null_unless(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``values`` where ``keep``, null elsewhere: NaN or NaT in the values' own dtype when it has one, so the
    column stays typed; otherwise objects with None (an integer or boolean column)."""
    if keep.all():
        return values
    if values.dtype.kind == "f":
        return np.where(keep, values, np.nan)
    if values.dtype.kind in "mM":
        return np.where(keep, values, np.array("NaT", dtype=values.dtype))
    return np.where(keep, values.astype(object), None)


def key_codes(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """A number per distinct key of ``frame`` (NULLs a key of their own), for each row."""
    if not keys:
        return np.zeros(len(frame), np.int64)
    return frame.groupby(list(keys), sort=False, dropna=False).ngroup().to_numpy()


def previous_row(codes: np.ndarray) -> np.ndarray:
    """For each row, the position of the row before it with the same code (``key_codes``), or -1."""
    before = pd.Series(np.arange(len(codes))).groupby(codes, sort=False).shift(1).to_numpy()
    return np.where(np.isnan(before), -1, before).astype(np.int64)


def version_ends(identity: np.ndarray, start: np.ndarray, closer_identity: np.ndarray, closer_at: np.ndarray,
                 overwrite_lag: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Versions of rows (``identity``: a code per row, ``start``: the position a version begins at, -1 for a stored
    one) each end at their row's next event: the next version's start (plus ``overwrite_lag``), or a closing
    event (``closer_identity`` at ``closer_at``: a retraction, a leave); inf if none. Returns the ends and, per
    closing event, the version it closes (-1: none is open)."""
    n = len(identity)
    item_identity = np.concatenate([identity, closer_identity])
    item_at = np.concatenate([start, closer_at]).astype(float)
    item_version = np.concatenate([np.arange(n), np.full(len(closer_at), -1)])
    order = np.lexsort((item_at, item_identity))
    same, at, version = item_identity[order][1:] == item_identity[order][:-1], item_at[order], item_version[order]
    lag = np.where(np.append(version[1:], -1) >= 0, overwrite_lag, 0.0)
    following = np.where(np.append(same, False), np.append(at[1:], np.inf) + lag, np.inf)
    ends = np.full(n, np.inf)
    ends[version[version >= 0]] = following[version >= 0]
    previous = np.where(np.insert(same, 0, False), np.insert(version[:-1], 0, -1), -1)
    closes = np.full(len(closer_at), -1)
    closers = version < 0
    closes[order[closers] - n] = previous[closers]
    return ends, closes


def count_dropped(saved: dict, reason: str, n: int) -> None:
    """Add ``n`` to the operator's count of records dropped for ``reason`` (read by ``runtime.metrics``)."""
    dropped = saved.setdefault("dropped", {})
    dropped[reason] = dropped.get(reason, 0) + int(n)


def drop_records(saved: dict, reason: str, rows: pd.DataFrame, mask: np.ndarray) -> None:
    """The records of ``rows`` (a step's input rows) where ``mask`` holds are dropped for ``reason``: counted,
    and kept for the query's late-records topic when it has one (``state.keep_dropped``)."""
    count_dropped(saved, reason, int(np.count_nonzero(mask)))
    keep_dropped(reason, rows, mask)


def described_by(df: DataFrame, *selected: str) -> list[str]:
    """What an operator that selects its input's columns (``selected`` among them) must keep beside them for
    ``drop_records`` to describe a dropped record: its origin and its time, when the query keeps late records."""
    if ORIGIN not in df.columns:
        return []
    return [c for c in (ORIGIN, ROWTIME) if c in df.columns and c not in selected]


def observe_dropped(df: DataFrame, ctx: LoweringContext, reason: str, condition) -> DataFrame:
    """``df``, whose rows where ``condition`` holds a stateless step drops for ``reason``: those counted per batch
    (``ctx.observe_counts``) and, when the query keeps late records, described for that topic (as ``drop_records``
    describes what a stateful step drops)."""
    if ctx.observe_counts is not None:
        df = ctx.observe_counts(df, {reason: F.when(condition, 1)})
    if ctx.late_records is not None:
        origin = F.col(ORIGIN) if ORIGIN in df.columns else F.lit(None).cast("string")
        description = described_column(reason, F.col(ROWTIME), F.col(STREAM_TIME), origin)
        df = ctx.late_records.observe(df, F.when(condition, description))
    return df
