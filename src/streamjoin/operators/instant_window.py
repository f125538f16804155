"""SQLstream stream-stream join of two OVER windows, evaluated instant by instant.

Semantics (DIALECT §3, SQLstream). Each input has a window frame (``plan.frames``): RANGE, ROWS or a
tumbling frame; an input without OVER is ``RANGE CURRENT ROW``. At every instant T the join of the two
windows is taken, and the pairs that are new at T are emitted with rowtime T. A pair (l, r) is in the join
from the first instant at which both rows are in their windows, ``T0 = max(l.t + l.enters, r.t + r.enters)``
(``enters`` is 0 unless a RANGE window ends before CURRENT ROW), and never again once either row has left,
so it is emitted once, at T0 — with CURRENT ROW frames, the later input rowtime. Rows sharing a rowtime
are joined together. On a preserved side (LEFT, RIGHT, FULL) a row that is in no pair at its own instant
(``t + enters``) is emitted null-padded with that rowtime, once that instant is complete: at the first
record whose stream time is past it. CROSS joins every pair of the two windows. A row whose rowtime is
older than the stream time when it is read is dropped and counted (``late``), as SQLstream drops a row
older than its stream's clock; so every pair involving a row is known when the later row arrives, and
output does not depend on batch cuts.

Algorithm: both inputs are unioned, tagged and grouped into state buckets by a hash of the join key
(``operators.keyed_inputs``); a micro-batch of a bucket is joined vectorised with pandas: new rows of
each side against the stored and new rows of the other, then window membership at T0, padding and purge
are evaluated on the whole batch. A ROWS window counts the rows of its whole input, whatever their key,
and a CROSS join has no key: both need one global order, so such a join runs in a single bucket — one
task and one state value hold every live row, which caps it at one core and at the rows that fit in
that task's memory (ROWS windows hold only the last n+1 rows of each side, so the state stays small; a
RANGE CROSS join holds every row of its windows). Tick rows bring the batch-end stream time to every
bucket, so a bucket without records still completes instants and purges.

State (per bucket, segmented: ``operators.state.run_segmented``): the live rows of both sides (key, rowtime,
arrival order, per-side ordinal, whether a null-padded row is still pending, payload) in segments of their
rowtime (``segment_width``), and in the meta value the per-side row counts (for ROWS windows), the count of
late rows and a summary of each segment. A batch reads the live rows (the worker's cached frames while they
match the store: every live row can share an instant with a new row), and writes back only the segments
that changed: the ones its rows went into, those whose rows were purged or stopped pending; a segment left
empty is removed. Purge: a row is dropped once no row read later can share a window instant with it —
RANGE: its time is older than stream time + the other side's ``enters`` - its range; tumbling: its frame
ended; ROWS: n+1 newer rows of its side arrived — and it is not awaiting its padded row.

Output rows leave when they are found; with a window that ends before CURRENT ROW, T0 can be later than
the stream time at that moment.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from ..plan.frames import Frame, frame_of
from ..plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, Join
from .base import DeclaredState, LoweringContext
from .keyed_inputs import BUCKET, OK, SIDE, TICK, bucketed, clock_values, drop_records, key_names, payload, tag_side, tick_rows
from .state import by_segment, run_segmented
from .stream_stream import LEFT, ORD, RIGHT, _append, _pair_rows, emitted_rows

SORD, OCOUNT, PENDING, CLOSE = "__sord", "__ocount", "__pending", "__close"


STATE = DeclaredState(
    "instant_window", 1,
    keeps="the live rows of both sides: key, rowtime, ingestion order, payload, whether they await padding",
    segments="slices of rowtime (the longer RANGE reach or tumbling unit, at least a minute)",
    purged="a row once no row read later can share a window instant with it (ROWS: past the last n + 1)")


class InstantWindowJoin:
    def state(self, join: Join) -> DeclaredState:
        return STATE

    def lower(self, join: Join, left: DataFrame, right: DataFrame, ctx: LoweringContext) -> DataFrame:
        frames = (frame_of(join.left_side.window), frame_of(join.right_side.window))
        keys = key_names(len(join.key))
        data = tag_side(left, LEFT, join.left_side, keys).unionByName(
            tag_side(right, RIGHT, join.right_side, keys), allowMissingColumns=True)
        ticks = tick_rows(ctx)
        if keys and all(f.kind != "rows" for f in frames):
            data = bucketed(data, keys, ctx.time_buckets)
        else:  # one global order: ROWS windows count the whole input, CROSS has no key
            data, ticks = data.withColumn(BUCKET, F.lit(0)), ticks.where(F.col(BUCKET) == 0)
        both = data.unionByName(ticks, allowMissingColumns=True)

        left_payload, right_payload = payload(left), payload(right)
        types = {f.name: f.dataType for f in both.schema.fields}
        schema = StructType(
            [StructField(c, types[c]) for c in left_payload + right_payload]
            + [StructField(jk, types[k]) for jk, k in zip(join.key, keys)]
            + [StructField(c, LongType()) for c in (ROWTIME, SEQ, SUB, STREAM_TIME)]
        )
        outer = (join.join_type in ("LEFT", "FULL"), join.join_type in ("RIGHT", "FULL"))
        step = instant_step(frames, outer, keys, left_payload, right_payload, list(join.key), schema.fieldNames())
        return run_segmented(both, BUCKET, step, schema, ctx)


MIN_SEGMENT_MS = 60_000


def segment_width(frames: tuple[Frame, Frame]) -> int:
    """Rowtime width of a state segment: the longer RANGE reach or tumbling unit, at least a minute. Rows
    purge from the oldest segments, so a batch rewrites few segments besides the ones it adds to."""
    reach = [f.preceding for f in frames if f.kind == "range"] + [f.unit for f in frames if f.kind == "tumble"]
    return max([MIN_SEGMENT_MS, *reach])


def instant_step(frames: tuple[Frame, Frame], outer: tuple[bool, bool], keys, left_payload, right_payload, key_ids,
                 out_names, width: int | None = None):
    """The per-bucket step: ``(meta, rows, segments) -> (output, meta)``; segments ``width`` ms wide."""
    stored = [SIDE, OK, ORD, SEQ, ROWTIME, STREAM_TIME, SORD, OCOUNT, PENDING, CLOSE] + keys + left_payload + right_payload
    width = width or segment_width(frames)

    def step(meta, rows: pd.DataFrame, segments):
        meta = meta or {"ord": 0, "count": [0, 0], "dropped": {}, "rows": 0, "segments": {}}
        rows = rows.sort_values([SEQ, SUB, SIDE], kind="stable").reset_index(drop=True)
        is_data = (rows[SIDE] != TICK).to_numpy()
        late = is_data & (rows[ROWTIME].to_numpy(dtype=float) < rows[STREAM_TIME].to_numpy(dtype=float))
        drop_records(meta, "late", rows, late)
        rows = rows[~late].reset_index(drop=True)
        rows[ORD] = meta["ord"] + 1 + np.arange(len(rows), dtype=np.int64)
        meta["ord"] += len(rows)
        fresh = _numbered(rows[rows[SIDE] != TICK].copy(), meta["count"], frames, outer)
        # by position: see stream_stream's reading of its segments
        loaded = [segments.get(i).set_axis(stored, axis=1) for i in sorted(meta["segments"])]
        store = (pd.concat(loaded, ignore_index=True).sort_values(ORD, kind="stable").reset_index(drop=True)
                 if loaded else pd.DataFrame(columns=stored))
        pairs = _pairs(frames, fresh, store, keys)
        candidates = _append(store, fresh)
        trigger = np.maximum(pairs["l_ord"].to_numpy(), pairs["r_ord"].to_numpy())
        out = [_pair_rows(pairs, trigger, candidates, keys, left_payload, right_payload, key_ids)]

        # a row in a pair that starts at its own instant is matched there and never padded
        t0 = np.maximum(pairs["l_t"].to_numpy(), pairs["r_t"].to_numpy())
        matched = np.concatenate([pairs["l_ord"].to_numpy()[pairs["l_t"].to_numpy() == t0],
                                  pairs["r_ord"].to_numpy()[pairs["r_t"].to_numpy() == t0]])
        candidates.loc[candidates[ORD].isin(matched), PENDING] = False
        padded, candidates = _complete_instants(candidates, rows)
        out.append(emitted_rows(padded, keys, left_payload, right_payload, key_ids))
        _save(meta, segments, _purge(candidates, frames, meta["count"], clock_values(rows[STREAM_TIME]).max(initial=-2**62)),
              width)
        produced = [o for o in out if len(o)]
        result = pd.concat(produced, ignore_index=True) if produced else pd.DataFrame(columns=out_names)
        return result.reindex(columns=out_names), meta

    return step


def _save(meta: dict, segments, store: pd.DataFrame, width: int) -> None:
    """Write back the segments whose rows changed (added, purged, or no longer pending); remove emptied ones."""
    index = meta["segments"]
    written = by_segment(store, store[ROWTIME].to_numpy(np.int64) // width) if len(store) else {}
    for i in index.keys() | written.keys():
        frame = written.get(i)
        if frame is None:
            segments.remove(i)
            del index[i]
            continue
        summary = (len(frame), int(frame[PENDING].to_numpy(dtype=bool).sum()), int(frame[ORD].to_numpy(np.int64).max()))
        if index.get(i) != summary:
            segments.put(i, frame)
            index[i] = summary
    meta["rows"] = len(store)


def _numbered(fresh: pd.DataFrame, count: list, frames, outer) -> pd.DataFrame:
    """Per-side ordinals (``SORD``), how many rows of the other side arrived before each row
    (``OCOUNT``), its own instant (``CLOSE``) and whether it may need a padded row (``PENDING``);
    ``count`` (rows so far per side) is advanced."""
    side = fresh[SIDE].to_numpy()
    is_left = side == LEFT
    left_before = count[LEFT] + np.cumsum(is_left) - is_left
    right_before = count[RIGHT] + np.cumsum(~is_left) - ~is_left
    fresh[SORD] = np.where(is_left, left_before, right_before).astype(np.int64)
    fresh[OCOUNT] = np.where(is_left, right_before, left_before).astype(np.int64)
    enters = np.where(is_left, frames[LEFT].enters, frames[RIGHT].enters)
    fresh[CLOSE] = fresh[ROWTIME].to_numpy(dtype=np.int64) + enters
    fresh[PENDING] = np.where(is_left, outer[LEFT], outer[RIGHT])
    count[LEFT] += int(is_left.sum())
    count[RIGHT] += int((~is_left).sum())
    return fresh


def _pairs(frames: tuple[Frame, Frame], fresh, store, keys) -> pd.DataFrame:
    """Every pair with at least one new row whose rows share a window instant: ORDs and each row's own
    instant (``l_t``, ``r_t``; the pair's instant T0 is the later of the two)."""
    cols = keys + [ORD, ROWTIME, SORD, OCOUNT]
    ok = lambda df, s: df[(df[SIDE] == s) & df[OK].astype(bool)][cols]  # noqa: E731
    new_left, new_right = ok(fresh, LEFT), ok(fresh, RIGHT)
    old_left, old_right = (ok(store, LEFT), ok(store, RIGHT)) if len(store) else (new_left.iloc[0:0], new_right.iloc[0:0])
    found = []
    for lefts, rights in ((new_left, pd.concat([old_right, new_right])), (old_left, new_right)):
        if not (len(lefts) and len(rights)):
            continue
        if keys:
            m = lefts.merge(rights, on=keys, suffixes=("_l", "_r"))
        else:
            m = lefts.merge(rights, how="cross", suffixes=("_l", "_r"))
        col = lambda name: m[name].to_numpy(dtype=np.int64)  # noqa: E731
        lt, rt = col(f"{ROWTIME}_l"), col(f"{ROWTIME}_r")
        l_own, r_own = lt + frames[LEFT].enters, rt + frames[RIGHT].enters
        t0 = np.maximum(l_own, r_own)
        left_later = col(f"{ORD}_l") > col(f"{ORD}_r")
        keep = (_member(frames[LEFT], lt, t0, col(f"{SORD}_l"), col(f"{OCOUNT}_r"), ~left_later)
                & _member(frames[RIGHT], rt, t0, col(f"{SORD}_r"), col(f"{OCOUNT}_l"), left_later))
        found.append(pd.DataFrame({"l_ord": col(f"{ORD}_l")[keep], "r_ord": col(f"{ORD}_r")[keep],
                                   "l_t": l_own[keep], "r_t": r_own[keep]}))
    if not found:
        return pd.DataFrame({"l_ord": [], "r_ord": [], "l_t": [], "r_t": []}, dtype=np.int64)
    return pd.concat(found, ignore_index=True)


def _member(frame: Frame, t, t0, sord, later_ocount, is_earlier) -> np.ndarray:
    """Whether a row (time ``t``, ordinal ``sord`` in its side) is in its window at instant ``t0``; for ROWS,
    counted when the later row of the pair arrives (``later_ocount`` rows of this side had arrived)."""
    if frame.kind == "range":
        return t >= t0 - frame.preceding
    if frame.kind == "tumble":
        return t // frame.unit == t0 // frame.unit
    return ~is_earlier | (sord >= later_ocount - 1 - frame.preceding)


def _complete_instants(candidates: pd.DataFrame, rows: pd.DataFrame):
    """Rows still pending at their own instant are emitted null-padded at the first later record of the
    bucket whose stream time is past that instant; they stop pending."""
    pending = candidates[PENDING].to_numpy(dtype=bool)
    if not pending.any() or not len(rows):
        return candidates.iloc[0:0], candidates
    st = clock_values(rows[STREAM_TIME])
    row_ords, row_seqs = rows[ORD].to_numpy(np.int64), rows[SEQ].to_numpy(np.int64)
    pos = np.maximum(np.searchsorted(st, candidates[CLOSE].to_numpy(np.int64), side="right"),
                     np.searchsorted(row_ords, candidates[ORD].to_numpy(np.int64), side="right"))
    due = pending & (pos < len(rows))
    at = np.minimum(pos, len(rows) - 1)[due]
    emitted = candidates[due].copy()
    emitted[ROWTIME] = emitted[CLOSE]
    emitted["__emit_ord"], emitted["__emit_seq"], emitted["__emit_st"] = row_ords[at], row_seqs[at], st[at]
    candidates.loc[due, PENDING] = False
    return emitted, candidates


def _purge(candidates: pd.DataFrame, frames: tuple[Frame, Frame], count: list, now: int) -> pd.DataFrame:
    """Keep rows awaiting their padded row, and rows a later row (time >= ``now``) can still pair with."""
    if not len(candidates):
        return candidates
    side = candidates[SIDE].to_numpy()
    t = candidates[ROWTIME].to_numpy(dtype=np.int64)
    keep = candidates[PENDING].to_numpy(dtype=bool).copy()
    for s, other in ((LEFT, RIGHT), (RIGHT, LEFT)):
        frame, mine = frames[s], side == s
        earliest = now + frames[other].enters  # the earliest instant a later row of the other side can have
        if frame.kind == "range":
            alive = t >= earliest - frame.preceding
        elif frame.kind == "tumble":
            alive = t // frame.unit >= earliest // frame.unit
        else:
            alive = candidates[SORD].to_numpy(dtype=np.int64) >= count[s] - 1 - frame.preceding
        keep |= mine & alive
    return candidates[keep].reset_index(drop=True)


OPERATOR = InstantWindowJoin()
