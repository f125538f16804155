"""Driving a segmented step (``operators.state.run_segmented``) as a plain ``step(state, rows)``."""
from __future__ import annotations

import copy

import pyarrow as pa

from streamjoin.operators.state import InMemorySegments


def as_step(step, cold: bool = False, idle=None):
    """``step(meta, rows, segments)`` as ``step(state, rows) -> (output, state)``, the state being
    (meta, segments). ``cold``: the memo is forgotten before every batch, as when the batch runs on a worker
    that has not seen the group's state, so everything is read from the segments. ``idle``: the step's idle
    hook, applied as ``run_segmented`` applies it (the step is skipped), after checking the hook's promise:
    the step would have emitted nothing and changed nothing."""
    def run(state, rows):
        meta, segments = state or (None, InMemorySegments())
        if cold:
            segments.memo = {}
        if meta is not None and idle is not None and idle(meta, pa.Table.from_pandas(rows, preserve_index=False)):
            trial_meta, trial_segments = copy.deepcopy((meta, segments))
            out, trial_meta = step(trial_meta, rows, trial_segments)
            assert not len(out) and trial_segments.frames.keys() == segments.frames.keys()
            assert trial_segments.writes == segments.writes and _counted(trial_meta) == _counted(meta)
            run.skipped += 1
            return rows.iloc[:0], (meta, segments)
        out, meta = step(meta, rows, segments)
        return out, (meta, segments)

    run.skipped = 0
    return run


def _counted(meta: dict) -> dict:
    """A meta value without drop counts of zero (a step may add a reason with nothing dropped)."""
    dropped = {k: v for k, v in meta.get("dropped", {}).items() if v}
    return {**meta, "dropped": dropped}


def run_cut(step, records, cuts, frame):
    """Feed ``records`` to ``step`` in micro-batches cut before each position in ``cuts``; ``frame(records,
    first_seq, clock) -> (batch, clock)`` builds a batch. Returns every batch's output and the last state."""
    state, outs, clock = None, [], -1
    bounds = [0] + sorted(set(cuts)) + [len(records)]
    for a, b in zip(bounds, bounds[1:]):
        if a < b:
            batch, clock = frame(records[a:b], a, clock)
            out, state = step(state, batch)
            outs.append(out)
    return outs, state


def one_at_a_time(seed: int, records: int) -> list[list[int]]:
    """The cuts of a run one record per micro-batch, for the first seed of a test only (``[]`` for the others):
    every rule is driven one record at a time once, and further seeds add random inputs under random cuts.
    One-record runs were most of the operators' test time."""
    return [list(range(1, records))] if seed == 0 else []
