"""The SQLstream OVER-window join's per-bucket step driven with pandas frames (no Spark): random inputs with
late rows give the same rows whatever the micro-batch cuts, and for RANGE and tumbling frames exactly the
rows of the rule applied instant by instant (every millisecond): the pairs new in the join of the two
windows, and preserved rows unmatched at their own instant."""
from __future__ import annotations

import random

import pandas as pd
import pytest

from streamjoin.operators.instant_window import instant_step
from streamjoin.operators.keyed_inputs import BUCKET, DELETE, NULL_KEY, OK, SIDE, TICK
from streamjoin.plan.frames import Frame
from streamjoin.plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB

from .segmented import as_step, run_cut

OUT = ["lv", "rv", "jk", ROWTIME, SEQ, SUB, STREAM_TIME]

FRAMES = {  # name: (left frame, right frame)
    "range-range": (Frame("range", preceding=5), Frame("range", preceding=3)),
    "range-current": (Frame("range", preceding=8, upto=3), Frame("range")),
    "tumble-tumble": (Frame("tumble", unit=10), Frame("tumble", unit=10)),
    "tumble-range": (Frame("tumble", unit=10), Frame("range", preceding=4)),
    "rows-range": (Frame("rows", preceding=3), Frame("range", preceding=4)),
    "rows-rows": (Frame("rows", preceding=2), Frame("rows", preceding=5)),
}


def random_inputs(seed: int, n: int = 60):
    """(side, key, value, time) records, times mostly increasing, a few older than the clock."""
    rnd = random.Random(seed)
    records, t = [], 0
    for i in range(n):
        t += rnd.choice([0, 0, 1, 1, 2, 3])
        late = rnd.random() < 0.08
        records.append((rnd.randrange(2), rnd.choice("abc"), f"{'LR'[i % 2]}{i}", t - 4 if late else t))
    return records


def frame(records, first_seq, clock):
    data = []
    for i, (side, key, value, t) in enumerate(records):
        clock = max(clock, t)
        data.append({SIDE: side, "__k0": key, "lv": value if side == 0 else None, "rv": value if side == 1 else None,
                     ROWTIME: t, SEQ: first_seq + i, SUB: 0, STREAM_TIME: clock, OK: True, NULL_KEY: False,
                     DELETE: False, BUCKET: 0})
    data.append({SIDE: TICK, SEQ: first_seq + len(records) - 1, STREAM_TIME: clock, ROWTIME: 0, BUCKET: 0})
    return pd.DataFrame(data), clock


def run(step, records, cuts):
    outs, state = run_cut(step, records, cuts, frame)
    return sorted(((None if pd.isna(l) else l, None if pd.isna(r) else r, int(t))
                   for out in outs for l, r, t in zip(out["lv"], out["rv"], out[ROWTIME])), key=repr), state


def make_step(frames, join_type, cold=False):
    """The step over segments 4 ms wide (so rows spread over many), reading them cold or through the cache."""
    outer = (join_type in ("LEFT", "FULL"), join_type in ("RIGHT", "FULL"))
    return as_step(instant_step(frames, outer, ["__k0"], ["lv"], ["rv"], ["jk"], OUT, width=4), cold=cold)


def by_the_rule(frames, join_type, records):
    """The join's definition applied at every millisecond, on the rows that are not late."""
    clock, kept = -1, []
    for side, key, value, t in records:
        if t >= clock:
            kept.append((side, key, value, t))
        clock = max(clock, t)

    def in_window(f: Frame, t, now):
        if f.kind == "tumble":
            return t // f.unit == now // f.unit and t <= now
        return now - f.preceding <= t <= now - f.upto

    seen, rows = set(), []
    joined_at: dict = {}
    for now in range(0, clock + 1):
        wins = [[r for r in kept if r[0] == s and in_window(frames[s], r[3], now)] for s in (0, 1)]
        pairs = {(l, r) for l in wins[0] for r in wins[1] if l[1] == r[1]}
        rows += [(l[2], r[2], now) for l, r in pairs - seen]
        seen |= pairs
        joined_at[now] = {x for p in pairs for x in p}
    preserved = {0: join_type in ("LEFT", "FULL"), 1: join_type in ("RIGHT", "FULL")}
    for row in kept:
        side, _, value, t = row
        own = t + (frames[side].upto if frames[side].kind == "range" else 0)
        if preserved[side] and own < clock and row not in joined_at.get(own, set()):
            rows.append((value, None, own) if side == 0 else (None, value, own))
    return sorted(rows, key=repr)


CASES = [(name, join_type) for name in FRAMES for join_type in ("INNER", "LEFT", "RIGHT", "FULL")]


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("name,join_type", CASES, ids=[f"{n}-{t}" for n, t in CASES])
def test_output_does_not_depend_on_batch_cuts(name, join_type, seed):
    records = random_inputs(seed)
    step = lambda: make_step(FRAMES[name], join_type, cold=seed == 1)  # noqa: E731
    whole, _ = run(step(), records, [])
    assert whole, "the case joins something"
    cuts = list(range(1, len(records))) if seed == 0 else random.Random(seed).sample(range(1, len(records)), 12)
    assert run(step(), records, cuts)[0] == whole
    if "rows" not in name:
        assert whole == by_the_rule(FRAMES[name], join_type, records)


@pytest.mark.parametrize("name", list(FRAMES))
def test_state_holds_only_rows_that_can_still_join(name):
    records = random_inputs(0, n=300)
    _, (meta, segments) = run(make_step(FRAMES[name], "INNER"), records, list(range(0, 300, 37)))
    assert meta["rows"] == sum(len(f) for f in segments.frames.values()) <= 40, f"{meta['rows']} rows kept"
    assert len(segments.frames) <= 12 and segments.frames.keys() == meta["segments"].keys()
    assert meta["dropped"]["late"] > 0
