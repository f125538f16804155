"""The stream-stream join's per-bucket step, driven directly with pandas frames and in-memory segments (no
Spark): interleaved records and stream-time ticks in, exact rows out whatever the segment width, expired
state gone afterwards, and a batch reads only the segments near its records however long the history."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamjoin.operators.state import InMemorySegments
from streamjoin.operators.stream_stream import (
    BUCKET, LEFT_CLOCK, NULL_KEY, OK, RIGHT_CLOCK, SIDE, TICK, Window, _bucket_processor,
)
from streamjoin.plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB

OUT = ["lv", "rv", "jk", ROWTIME, SEQ, SUB, STREAM_TIME]


WIDTHS = [None, 3]  # the default segment width (every case in one segment), and 3 ms (cases span many)


def step_fn(width=None, **window):
    w = Window(**{"before": 10, "after": 10, "grace": 0, "eager": False, "outer_left": True, "outer_right": False, **window})
    return _bucket_processor(w, ["__k0"], ["lv"], ["rv"], ["jk"], OUT, width)


NO_CLOCK = -(2 ** 62)


def rows(*records, clock=None, history=()):
    """records: (side 'L'/'R', key, value, time, seq); stream time is the running max of times, and each
    side's clock the running max of its own records' times, after the records of ``history`` (or all three
    starting at ``clock``); a tick closes the batch at the last clocks."""
    start = clock if clock is not None else NO_CLOCK
    st = max([start] + [r[3] for r in history])
    lc = max([start] + [r[3] for r in history if r[0] == "L"])
    rc = max([start] + [r[3] for r in history if r[0] == "R"])
    data = []
    for side, key, value, t, seq in records:
        st = max(st, t)
        lc, rc = (max(lc, t), rc) if side == "L" else (lc, max(rc, t))
        data.append({SIDE: 0 if side == "L" else 1, "__k0": key, "lv": value if side == "L" else None,
                     "rv": value if side == "R" else None, ROWTIME: t, SEQ: seq, SUB: 0, STREAM_TIME: st,
                     LEFT_CLOCK: lc, RIGHT_CLOCK: rc, OK: key is not None, NULL_KEY: key is None, BUCKET: 0})
    data.append({SIDE: TICK, SEQ: records[-1][4] if records else 0, STREAM_TIME: st, ROWTIME: 0, BUCKET: 0,
                 LEFT_CLOCK: lc, RIGHT_CLOCK: rc})
    return pd.DataFrame(data)


def emitted(out: pd.DataFrame):
    out = out.sort_values([SEQ, SUB], kind="stable")
    return [(None if pd.isna(l) else l, None if pd.isna(r) else r, int(t)) for l, r, t in zip(out["lv"], out["rv"], out[ROWTIME])]


def run(step, *batches, state=None):
    """Feed ``batches``; returns the rows emitted and the state: (meta, segments)."""
    meta, segments = state or (None, InMemorySegments())
    outputs = []
    for batch in batches:
        out, meta = step(meta, batch, segments)
        outputs += emitted(out)
    return outputs, (meta, segments)


def stored(state) -> pd.DataFrame:
    meta, segments = state
    frames = list(segments.frames.values())
    store = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[ROWTIME])
    assert meta["rows"] == len(store) == sum(entry[0] for entry in meta["segments"].values())
    return store


CASES = [
    ("inner match in either arrival order",
     dict(outer_left=False), [[("L", 1, "A", 100, 1), ("R", 1, "a", 105, 2), ("R", 1, "b", 95, 3)]],
     [("A", "a", 105), ("A", "b", 100)]),
    ("window bounds are inclusive",
     dict(outer_left=False), [[("L", 1, "A", 100, 1), ("R", 1, "lo", 90, 2), ("R", 1, "hi", 110, 3), ("R", 1, "out", 111, 4)]],
     [("A", "lo", 100), ("A", "hi", 110)]),
    ("grace: unmatched left leaves once stream time passes t + after + grace",
     dict(grace=5), [[("L", 1, "A", 100, 1)], [("R", 2, "x", 115, 2)], [("R", 2, "y", 116, 3)]],
     [("A", None, 100)]),
    ("eager: unmatched left leaves at once, a later match follows",
     dict(eager=True, grace=10_000), [[("L", 1, "A", 100, 1)], [("R", 1, "a", 101, 2)]],
     [("A", None, 100), ("A", "a", 101)]),
    ("late left record joins nothing and leaves padded",
     dict(grace=5), [[("R", 1, "a", 100, 1), ("R", 2, "z", 200, 2), ("L", 1, "late", 100, 3)]],
     [("late", None, 100)]),
    ("grace: a record whose window ended before it arrived leaves padded at once, and still joins later",
     dict(grace=10), [[("R", 2, "x", 115, 1), ("L", 1, "A", 100, 2)], [("R", 1, "a", 105, 3)]],
     [("A", None, 100), ("A", "a", 105)]),
    # ksqlDB's "right join with out of order and custom grace period": WITHIN 1 MINUTE GRACE PERIOD 1 MINUTE.
    # c finds no C (the left clock, 330000, put C out of the left store's reach); D finds d (the right
    # clock is only 90000)
    ("late records probe the other side's store, which keeps records by its own side's clock",
     dict(before=60_000, after=60_000, grace=60_000, outer_left=False, outer_right=True),
     [[("L", 0, "A", 0, 1), ("R", 0, "a", 60_000, 2), ("L", 1, "B", 330_000, 3), ("L", 2, "C", 90_000, 4),
       ("R", 2, "c", 90_000, 5), ("R", 3, "d", 60_000, 6), ("L", 3, "D", 90_000, 7)]],
     [("A", "a", 60_000), (None, "c", 90_000), (None, "d", 60_000), ("D", "d", 90_000)]),
]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name,window,batches,expected", CASES, ids=[c[0] for c in CASES])
def test_step(name, window, batches, expected, width):
    step = step_fn(width, **window)
    got, _ = run(step, *[rows(*b) for b in batches])
    assert got == expected


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name,window,batches,expected", CASES, ids=[c[0] for c in CASES])
def test_step_is_batch_invariant(name, window, batches, expected, width):
    every = [r for b in batches for r in b]
    one_by_one, _ = run(step_fn(width, **window), *[rows(r, history=every[:i]) for i, r in enumerate(every)])
    all_at_once, _ = run(step_fn(width, **window), rows(*every))
    assert sorted(one_by_one, key=repr) == sorted(all_at_once, key=repr) == sorted(expected, key=repr)


@pytest.mark.parametrize("width", WIDTHS)
def test_expired_records_are_purged_from_state_by_their_own_sides_clock(width):
    """A side's store keeps its records for retention behind the largest time seen on that side: a far
    right record leaves the left records in place; a far left one purges them."""
    step = step_fn(width, grace=5)
    lefts = [("L", k, f"v{k}", 100 + k, k) for k in range(1, 6)]
    _, state = run(step, rows(*lefts))
    assert len(stored(state)) == 5
    far_right = ("R", 99, "far", 10_000, 6)
    _, state = run(step, rows(far_right, history=lefts), state=state)
    assert sorted(stored(state)[ROWTIME].tolist()) == [101, 102, 103, 104, 105, 10_000]
    _, state = run(step, rows(("L", 98, "far", 10_000, 7), history=lefts + [far_right]), state=state)
    assert stored(state)[ROWTIME].tolist() == [10_000, 10_000]


def test_null_keys_and_records_their_store_would_not_keep_are_counted():
    """A left record 100 ms behind the left side's clock (retention 25 ms) is not kept, so it is counted as
    late; it still finds the right record its side's store holds, and joins it."""
    step = step_fn(outer_left=False, grace=5)
    got, (meta, _) = run(step, rows(("L", None, "n", 1, 1), ("R", 1, "a", 100, 2), ("L", 3, "x", 200, 3),
                                    ("L", 1, "late", 100, 4)))
    assert got == [("late", "a", 100)]
    assert meta["dropped"] == {"null_key": 1, "late": 1}


def test_a_batch_reads_and_writes_the_segments_near_its_records_however_long_the_history():
    """24 h of retention (no GRACE), one record a side every 10 ms, batches of 1 s of event time: the store
    grows every batch, the segments a batch reads and writes do not; eager padding still emits every
    unmatched left record once."""
    step = step_fn(width=20, before=10, after=10, grace=24 * 3600 * 1000, eager=True)
    meta, segments = None, InMemorySegments()
    calls, padded, seq = [], 0, 0
    for second in range(30):
        batch = []
        for t in range(second * 1000, second * 1000 + 1000, 10):
            batch += [("L", t % 7, f"l{t}", t, seq + 1), ("R", t % 5, f"r{t}", t + 3, seq + 2)]
            seq += 2
        before = segments.reads + segments.writes
        out, meta = step(meta, rows(*batch), segments)
        calls.append(segments.reads + segments.writes - before)
        padded += int(out["rv"].isna().sum())
    assert meta["rows"] == 30 * 200  # nothing expires within 24 h
    assert max(calls[1:]) <= calls[1] + 2  # ~1 s of segments read and written, not everything retained
    # a left record at t arrives after the right one at t - 7 (the only earlier one in its window)
    assert padded == sum(1 for t in range(0, 30_000, 10) if t == 0 or t % 7 != (t - 10) % 5)


def test_a_tick_with_nothing_due_is_idle_and_the_step_would_change_nothing():
    """``run_segmented`` skips the step for a batch its ``idle`` hook calls idle: only when the step would
    emit nothing and leave state as it was (a pending close or an expiry at the tick's clock is not idle)."""
    import copy

    import pyarrow as pa

    from streamjoin.operators.stream_stream import _idle

    w = Window(before=10, after=10, grace=5, eager=False, outer_left=True, outer_right=False)
    step = _bucket_processor(w, ["__k0"], ["lv"], ["rv"], ["jk"], OUT)
    meta, segments = None, InMemorySegments()
    first = rows(("L", 1, "A", 100, 1))
    _, meta = step(meta, first, segments)
    seen = []
    for clock in (105, 114, 116, 120, 131, 200):
        tick = rows(clock=clock).reindex(columns=first.columns)  # as Spark's union gives it: every column
        idle = _idle(w)(meta, pa.Table.from_pandas(tick, preserve_index=False))
        before, calls = copy.deepcopy(meta), segments.reads + segments.writes
        out, meta = step(meta, tick, segments)
        if idle:
            assert not len(out) and segments.reads + segments.writes == calls
            assert {k: v for k, v in meta.items() if k != "dropped"} == {k: v for k, v in before.items() if k != "dropped"}
        seen.append((clock, idle, len(out)))
    # 116 passes the close 115 (padded row out); 131 passes the retention 100 + 25 (the segment goes)
    assert seen == [(105, True, 0), (114, True, 0), (116, False, 1), (120, True, 0), (131, False, 0), (200, True, 0)]
    assert not _idle(w)(meta, pa.Table.from_pandas(rows(("R", 1, "a", 300, 2)), preserve_index=False))


PROBES = [  # (window bounds, segment width, records (side, time), the segments a batch must read)
    ({"before": 10, "after": 10}, 20, [("L", 5), ("R", 45)], {-1, 0, 1, 2}),
    ({"before": 10, "after": 10}, 20, [("L", 100), ("R", 500), ("L", 101)], {4, 5, 24, 25}),  # no gap filled
    # Flink bounds that exclude the record's own time (r.t - l.t in [30, 50]): its own segment is read too
    ({"before": -30, "after": 50}, 20, [("L", 0), ("R", 200)], {0, 1, 2, 7, 8, 9, 10}),
    ({"before": 10, "after": 10}, 20, [], set()),  # only the tick
]


@pytest.mark.parametrize("window, width, records, expected", PROBES)
def test_a_batch_probes_every_segment_its_records_can_match_and_no_other(window, width, records, expected):
    from streamjoin.operators.stream_stream import LEFT, RIGHT, _probed

    w = Window(grace=0, eager=False, outer_left=False, outer_right=False, **window)
    batch = pd.DataFrame({SIDE: [LEFT if s == "L" else RIGHT for s, _ in records] + [TICK],
                          ROWTIME: [t for _, t in records] + [0]})
    assert _probed(w, width, batch) == expected


KEY_PAIRS = [  # (left key columns, right key columns, the (left, right) positions that match)
    ([[1, 2, 1]], [[1, 3, 2]], {(0, 0), (2, 0), (1, 2)}),
    ([[None, 1]], [[None, None, 1]], {(0, 0), (0, 1), (1, 2)}),  # NULL matches NULL (IS NOT DISTINCT FROM)
    ([[1, 1], ["a", "b"]], [[1, 1], ["b", "a"]], {(0, 1), (1, 0)}),  # every column must agree
    ([np.array([7, 8], dtype=np.int64)], [np.array([8, 7.0, "7"], dtype=object)], {(0, 1), (1, 0)}),  # stored vs new dtypes
    ([], [], {(i, j) for i in range(2) for j in range(3)}),  # no equality: every pair
]


@pytest.mark.parametrize("left, right, expected", KEY_PAIRS)
def test_pairs_are_found_by_key_equality(left, right, expected):
    from streamjoin.operators.stream_stream import _equal_pairs

    n, m = (len(left[0]), len(right[0])) if left else (2, 3)
    li, ri = _equal_pairs([np.asarray(c, dtype=object) if isinstance(c, list) else c for c in left],
                          [np.asarray(c, dtype=object) if isinstance(c, list) else c for c in right], n, m)
    assert set(zip(li.tolist(), ri.tolist())) == expected and len(li) == len(expected)


@pytest.mark.parametrize("values, expected", [([5, 5, 3, 5, 3], [0, 1, 0, 2, 1]), ([], []), ([1, 2], [0, 0])])
def test_a_rows_sub_number_counts_the_equal_values_before_it(values, expected):
    from streamjoin.operators.stream_stream import _rank_among_equal

    assert _rank_among_equal(np.asarray(values, dtype=np.int64)).tolist() == expected
