"""Driving a segmented step (``operators.state.run_segmented``) as a plain ``step(state, rows)``."""
from __future__ import annotations

from streamjoin.operators.state import InMemorySegments


def as_step(step, cold: bool = False):
    """``step(meta, rows, segments)`` as ``step(state, rows) -> (output, state)``, the state being
    (meta, segments). ``cold``: the memo is forgotten before every batch, as when the batch runs on a worker
    that has not seen the group's state, so everything is read from the segments."""
    def run(state, rows):
        meta, segments = state or (None, InMemorySegments())
        if cold:
            segments.memo = {}
        out, meta = step(meta, rows, segments)
        return out, (meta, segments)
    return run

