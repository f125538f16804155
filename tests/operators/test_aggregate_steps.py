"""The aggregates' per-bucket steps, driven directly with pandas frames (no Spark): the whole-batch forms
agree with the record-at-a-time fold, and the output does not depend on how the input is cut into batches
nor on whether the stored accumulators come from the worker's cache or from the state's log."""
from __future__ import annotations

import random
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from streamjoin.operators import aggregate, table_aggregate
from streamjoin.operators.aggregate import AggSpec, _fold, _result, accumulate
from streamjoin.plan.nodes import ROWTIME, SEQ, SUB, TOMBSTONE
from tests.operators.segmented import as_step, one_at_a_time

FUNCTIONS = ["COUNT", "SUM", "AVG", "MIN", "MAX", "LATEST_BY_OFFSET", "EARLIEST_BY_OFFSET", "COLLECT_LIST", "COLLECT_SET",
             "HISTOGRAM", "ATTR", "STDDEV_SAMPLE", "KSQL_STDDEV_SAMP"]
NUMBERS_ONLY = ("SUM", "AVG", "STDDEV_SAMPLE", "KSQL_STDDEV_SAMP")
VALUES = {  # argument columns as a batch hands them over: integers (float when a null is among them), floats, ...
    "ints": lambda rng: rng.choice([None, *range(-3, 4)]),
    "floats": lambda rng: rng.choice([None, 0.1, 0.2, 1e16, -3.5, 7.25]),
    "strings": lambda rng: rng.choice([None, "a", "b", "c"]),
    "decimals": lambda rng: rng.choice([None, Decimal("1.10"), Decimal("-2.05")]),
}


def reference(spec, values, codes, prior):
    """The aggregate record by record, with ``_fold``."""
    accs, out = list(prior), []
    for g, v in zip(codes, values):
        accs[g] = _fold(spec, accs[g], None if v is None or v != v else v)
        out.append(_result(spec, accs[g]))
    return out, accs


@pytest.mark.parametrize("fn", FUNCTIONS + ["COUNT DISTINCT"])
@pytest.mark.parametrize("kind", sorted(VALUES))
@pytest.mark.parametrize("seed", range(4))
def test_whole_batch_accumulation_agrees_with_the_fold(fn, kind, seed):
    if kind == "strings" and fn in NUMBERS_ONLY or kind == "decimals" and fn in NUMBERS_ONLY[2:]:
        pytest.skip("not an aggregate of this type")
    rng = random.Random(seed)
    spec = AggSpec(fn.split()[0], "v", "out", distinct=fn.endswith("DISTINCT"))
    groups = 4
    first = [rng.choice([None, VALUES[kind](rng)]) for _ in range(groups)]
    prior = [None if rng.random() < 0.3 else a for a in reference(spec, first, list(range(groups)), [None] * groups)[1]]
    codes = np.array([rng.randrange(groups) for _ in range(40)])
    raw = [VALUES[kind](rng) for _ in codes]
    series = pd.Series(raw, dtype=float) if kind in ("ints", "floats") else pd.Series(raw, dtype=object)
    stored = np.empty(groups, dtype=object)
    stored[:] = [set(a) if isinstance(a, set) else a for a in prior]
    results, final = accumulate(spec, series, codes, stored, integral=kind == "ints")
    plain = [None if v != v else int(v) if kind == "ints" else v for v in series.tolist()]  # as the fold sees them
    expected, expected_final = reference(spec, plain, codes,
                                         [set(a) if isinstance(a, set) else a for a in prior])
    assert list(results) == expected
    seen = sorted(set(codes.tolist()))
    assert [final[g] for g in seen] == [expected_final[g] for g in seen]
    assert [type(v) for v in results if v is not None] == [type(v) for v in expected if v is not None]
    assert stored.tolist() == [set(a) if isinstance(a, set) else a for a in prior]  # stored state left as it was


@pytest.mark.parametrize("seed", range(6))
def test_running_totals_add_in_row_order_like_a_fold(seed):
    """Floats of far-apart magnitudes and decimals, in segments short and long (past ``SHORT_SEGMENT``): every
    running total is the one adding each row to its segment's total in turn gives, bit for bit."""
    rng = np.random.default_rng(seed)
    n, segments = int(rng.integers(1, 400)), int(rng.integers(1, 12))
    segment = np.where(rng.random(n) < 0.6, 0, rng.integers(0, segments, n))  # segment 0 long, the others short
    floats = rng.normal(size=n) * 10.0 ** rng.integers(-5, 12, n)
    decimals = np.array([Decimal(int(x * 100)) / 100 for x in rng.normal(size=n) * 1000], dtype=object)
    for start, steps in ((rng.normal(size=segments), floats), (np.array([Decimal("0.5")] * segments, dtype=object), decimals)):
        totals, expected = list(start), []
        for s, step in zip(segment, steps):
            totals[s] = totals[s] + step
            expected.append(totals[s])
        assert list(aggregate.running_totals(start, steps, segment)) == expected


def stream_input(seed: int, n: int = 80, null_groups: bool = True) -> pd.DataFrame:
    rng = random.Random(seed)
    regions = ["a", "b", "c"] + ([None] if null_groups else [])
    return pd.DataFrame({"g": [rng.choice(regions) for _ in range(n)],
                         "__arg0": pd.Series([rng.choice([None, 1, 2, 5]) for _ in range(n)], dtype=float),
                         "__arg1": [rng.choice([None, "x", "y"]) for _ in range(n)],
                         ROWTIME: range(n), SEQ: range(1, n + 1), SUB: 0})


def run(step, frame: pd.DataFrame, cuts: list[int]):
    """The output of ``frame`` cut into batches at ``cuts`` (each batch's rows shuffled), in ingestion order."""
    state, out = None, []
    for lo, hi in zip([0] + cuts, cuts + [len(frame)]):
        result, state = step(state, frame.iloc[lo:hi].sample(frac=1, random_state=lo).reset_index(drop=True))
        out += [tuple(None if not isinstance(v, list) and pd.isna(v) else v for v in row)
                for row in result.itertuples(index=False, name=None)]
    at = {name: i for i, name in enumerate(result.columns)}
    return sorted(out, key=lambda row: (row[at[SEQ]], row[at[SUB]])), state


SPECS = [AggSpec("COUNT", None, "n"), AggSpec("SUM", "__arg0", "total"), AggSpec("AVG", "__arg0", "mean"),
         AggSpec("MAX", "__arg1", "high"), AggSpec("COUNT", "__arg0", "distinct", distinct=True),
         AggSpec("COLLECT_LIST", "__arg1", "all")]
OUT = ["g", "n", "total", "mean", "high", "distinct", "all", ROWTIME, SEQ, SUB]


@pytest.mark.parametrize("cold", [False, True], ids=["cached accumulators", "accumulators replayed from their log"])
@pytest.mark.parametrize("seed", range(3))
def test_stream_aggregate_output_does_not_depend_on_batch_cuts(seed, cold):
    step = as_step(aggregate.bucket_step(["g"], ["g"], SPECS, ["__arg0"], OUT), cold)
    frame = stream_input(seed)
    whole, (meta, _) = run(step, frame, [])
    assert meta["rows"] == frame["g"].nunique(dropna=False)
    rng = random.Random(seed)
    for _ in range(2):
        cuts = sorted(rng.sample(range(1, len(frame)), rng.randint(1, 12)))
        assert run(step, frame, cuts)[0] == whole
    for cuts in one_at_a_time(seed, len(frame)):
        assert run(step, frame, cuts)[0] == whole
    counts = {}
    for row in whole:  # COUNT(*) counts every record of its group, one update per record
        counts[row[0]] = counts.get(row[0], 0) + 1
        assert row[1] == counts[row[0]]


def table_changes(seed: int, n: int = 70, keys: int = 5) -> pd.DataFrame:
    """Random upserts and tombstones of a table keyed by ``__rk0``, grouped by ``g``."""
    rng = random.Random(seed)
    rows = []
    for seq in range(1, n + 1):
        gone = rng.random() < 0.25
        rows.append({"__rk0": rng.randrange(keys), "g": None if gone else rng.choice(["a", "b"]),
                     "__arg0": None if gone else rng.choice([None, 1, 3, 4]), TOMBSTONE: gone,
                     ROWTIME: seq, SEQ: seq, SUB: 0})
    return pd.DataFrame(rows)


TABLE_SPECS = [AggSpec("COUNT", None, "n"), AggSpec("SUM", "__arg0", "total"), AggSpec("MIN", "__arg0", "low")]
TABLE_OUT = ["g", "n", "total", "low", ROWTIME, SEQ, SUB, TOMBSTONE]


def final_groups(frame: pd.DataFrame) -> dict:
    """The aggregate of the table the changelog ends with, computed directly."""
    last = frame.drop_duplicates("__rk0", keep="last")
    live = last[~last[TOMBSTONE]]
    return {g: (len(rows), rows["__arg0"].sum() if rows["__arg0"].notna().any() else None,
                rows["__arg0"].min() if rows["__arg0"].notna().any() else None) for g, rows in live.groupby("g")}


def table_aggregate_steps(cold: bool = False, keep_empty: bool = False):
    """The table aggregate's two stages as one step: rows → retract/add events → groups."""
    rows = as_step(table_aggregate.row_step(["__rk0"], ["g", "__arg0"], ["__rk0"]), cold)
    groups = as_step(table_aggregate.group_step(["g"], ["g"], TABLE_SPECS, [], TABLE_OUT, keep_empty=keep_empty), cold)

    def both(state, batch):
        events, row_state = rows(state and state[0], batch)
        out, group_state = groups(state and state[1], events)
        return out, (row_state, group_state)

    return both


@pytest.mark.parametrize("cold", [False, True], ids=["cached state", "state replayed from its log"])
@pytest.mark.parametrize("seed", range(3))
def test_table_aggregate_materialises_the_aggregate_of_the_final_table(seed, cold):
    both = table_aggregate_steps(cold)
    frame = table_changes(seed)
    whole, _ = run(both, frame, [])
    rng = random.Random(seed)
    for cuts in [sorted(rng.sample(range(1, len(frame)), 9))] + one_at_a_time(seed, len(frame)):
        assert run(both, frame, cuts)[0] == whole
    latest = {}
    for g, n, total, low, *_, tombstone in whole:
        latest[g] = None if tombstone else (n, total, low)
    assert {g: v for g, v in latest.items() if v is not None} == final_groups(frame)
    assert run(both, frame, [])[1][1][0]["rows"] == len(final_groups(frame))  # an emptied group leaves state


@pytest.mark.parametrize("seed", range(3))
def test_kafka_streams_keeps_a_group_its_rows_left_at_count_zero(seed):
    """ksqlDB's table aggregation: a group emptied by its rows leaving writes COUNT 0 and stays; the rest as above."""
    both = table_aggregate_steps(keep_empty=True)
    frame = table_changes(seed)
    whole, state = run(both, frame, [])
    for cuts in [sorted(random.Random(seed).sample(range(1, len(frame)), 9))] + one_at_a_time(seed, len(frame)):
        assert run(both, frame, cuts)[0] == whole
    assert not any(row[-1] for row in whole)  # no tombstone
    latest = {row[0]: row[1:4] for row in whole}
    live = final_groups(frame)
    assert {g: v for g, v in latest.items() if g in live} == live
    assert all(latest[g][0] == 0 for g in latest if g not in live)  # an emptied group: COUNT 0
    assert state[1][0]["rows"] == len(latest)  # every group that had a row stays


@pytest.mark.parametrize("seed", range(3))
def test_ksqldb_attr_over_a_table_is_the_one_value_its_group_rows_hold(seed):
    """ksqlDB's ATTR over a table: after each change, a group it touched holds the one value (NULL being one) that
    all its live rows hold, else NULL; whatever the cuts."""
    out_names = ["g", "one", ROWTIME, SEQ, SUB, TOMBSTONE]
    rows = as_step(table_aggregate.row_step(["__rk0"], ["g", "__arg0"], ["__rk0"]))
    groups = as_step(table_aggregate.group_step(["g"], ["g"], [AggSpec("ATTR", "__arg0", "one")], [], out_names,
                                                keep_empty=True))

    def both(state, batch):
        events, row_state = rows(state and state[0], batch)
        out, group_state = groups(state and state[1], events)
        return out, (row_state, group_state)

    frame = table_changes(seed, keys=3)
    whole, _ = run(both, frame, [])
    for cuts in [sorted(random.Random(seed).sample(range(1, len(frame)), 9))] + one_at_a_time(seed, len(frame)):
        assert run(both, frame, cuts)[0] == whole
    live, expected = {}, []
    for change in frame.to_dict("records"):
        before = live.pop(change["__rk0"], None)
        if not change[TOMBSTONE]:
            live[change["__rk0"]] = (change["g"], None if pd.isna(change["__arg0"]) else change["__arg0"])
        for g in dict.fromkeys(c[0] for c in (before, live.get(change["__rk0"])) if c is not None):
            held = {value for group, value in live.values() if group == g}
            expected.append((g, held.pop() if len(held) == 1 else None, change[SEQ]))
    assert [(g, one, seq) for g, one, _, seq, *_ in whole] == expected


def test_ksqldb_drops_a_record_whose_group_is_null_and_counts_it():
    step = as_step(aggregate.bucket_step(["g"], ["g"], SPECS, ["__arg0"], OUT, drop_null_groups=True))
    frame = stream_input(0)
    out, (meta, _) = run(step, frame, [10, 40])
    nulls = int(frame["g"].isna().sum())
    assert nulls and meta["dropped"]["null_key"] == nulls
    assert len(out) == len(frame) - nulls and all(row[0] is not None for row in out)


# ------------------------------------------------------------------ Flink group windows (TUMBLE, HOP)

WINDOWS = [  # (size, slide, delay) in ms: tumbling, hopping, and behind an interval join's held-back watermark
    (4000, 4000, 0), (4000, 2000, 0), (3000, 1000, 1500),
]


def window_records(seed: int, n: int = 60):
    """(key, value, time) in ingestion order: times rising with disorder, so some rows come late."""
    rng = random.Random(seed)
    return [(rng.choice("ab"), rng.randrange(10), max(0, i * 300 + rng.randrange(-2500, 800))) for i in range(n)]


def group_window(size, slide, delay=0, grace=0, kind="HOP", emit="FINAL"):
    from streamjoin.plan.nodes import Field, GroupWindow, Ref

    ksql = kind in ("TUMBLING", "HOPPING")
    columns = [Field("", name, name, "bigint" if ksql else "timestamp") for name in ("ws", "we", "wr")]
    time = None if ksql else Ref("t", "timestamp")
    return GroupWindow(kind, time, size, slide, delay, columns[0], columns[1], None if ksql else columns[2],
                       grace_ms=grace, emit=emit, retention_ms=size + grace if ksql else 0)


def window_run(records, cuts, window, cold=False):
    """The window aggregate step over ``records`` cut at ``cuts``: (key, window start, COUNT, SUM[, time]) rows in
    output order; a ksqlDB window's rows carry their time too."""
    from streamjoin.operators import window_aggregate as wa
    from streamjoin.operators.keyed_inputs import CLOCK_STEPS, SIDE, TICK
    from streamjoin.plan.nodes import STREAM_TIME, WINDOW_START

    specs = [AggSpec("COUNT", None, "n"), AggSpec("SUM", "v", "s")]
    names = ["k", *(c.id for c in window.columns), "n", "s", ROWTIME, SEQ, SUB, STREAM_TIME]
    names += [WINDOW_START] if window.ksql else []
    step = as_step(wa.window_step(window, ["k"], specs, ["v"], names), cold,
                   idle=wa._idle(window.delay_ms + window.grace_ms))
    size, slide = window.size_ms, window.slide_ms
    state, out, clock = None, [], np.iinfo(np.int64).min
    bounds = [0] + sorted(cuts) + [len(records)]
    for a, b in zip(bounds, bounds[1:]):
        rows = []
        for i in range(a, b):
            k, v, t = records[i]
            clock = max(clock, t)  # the watermark (no delay) or stream time, including the record
            last = t - t % slide
            starts = [s for s in range(last, t - size, -slide) if s >= 0 or not window.ksql][::-1]
            rows += [{"k": k, "v": v, "__t": t, wa.START: s, SEQ: i, SUB: pos, STREAM_TIME: clock, SIDE: wa.ROW}
                     for pos, s in enumerate(starts)]
        steps = tuple(sorted({r[STREAM_TIME] for r in rows}))  # the clock values the batch reached
        rows.append({"k": None, "v": None, "__t": None, wa.START: None, SEQ: b - 1, SUB: None, STREAM_TIME: clock,
                     SIDE: TICK, CLOCK_STEPS: steps})
        result, state = step(state, pd.DataFrame(rows))
        for r in result.sort_values([SEQ, SUB], kind="stable").to_dict("records"):
            start = r["ws"] if window.ksql else r["ws"].value // 10**6
            out.append((r["k"], start, r["n"], r["s"]) + ((r[ROWTIME],) if window.ksql else ()))
    return out


def window_reference(records, size, slide, delay):
    """The rule of ``operators.window_aggregate``: a row joins its windows the clock at it has not reached
    (``end > clock - delay``); a window leaves once the final clock reaches its end, in the order of its end."""
    windows, clock = {}, np.iinfo(np.int64).min
    for i, (k, v, t) in enumerate(records):
        clock = max(clock, t)
        for s in range(t - t % slide, t - size, -slide):
            if s + size > clock - delay:
                first, n, total = windows.get((k, s), (i, 0, 0))
                windows[(k, s)] = (first, n + 1, total + v)
    leaving = sorted((s + size, first, k, s, n, total) for (k, s), (first, n, total) in windows.items()
                     if s + size <= clock - delay)
    return [(k, s, n, total) for _, _, k, s, n, total in leaving]


@pytest.mark.parametrize("cold", [False, True], ids=["cached state", "state replayed from its log"])
@pytest.mark.parametrize("size,slide,delay", WINDOWS)
@pytest.mark.parametrize("seed", range(3))
def test_group_windows_leave_once_with_their_on_time_rows_whatever_the_cuts(seed, size, slide, delay, cold):
    records = window_records(seed)
    expected = window_reference(records, size, slide, delay)
    assert len(expected) > 5 and sum(n for *_, n, _ in expected) < len(records) * -(-size // slide)  # some late
    for cuts in [[], random.Random(seed).sample(range(1, len(records)), 9)] + one_at_a_time(seed, len(records)):
        if cold and len(cuts) > 9:
            continue  # (replaying the log every batch is slow to drive one record at a time)
        got = window_run(records, cuts, group_window(size, slide, delay), cold)
        assert sorted(got) == sorted(expected)
        # leaving windows in order of their end, whatever batch each left in
        assert [s + size for _, s, _, _ in got] == sorted(s + size for _, s, _, _ in got)


# ------------------------------------------------------------------ ksqlDB windows (TUMBLING, HOPPING; EMIT CHANGES, FINAL)

KSQL_WINDOWS = [  # (size, advance, grace) in ms
    (4000, 4000, 0), (4000, 4000, 1500), (4000, 2000, 1000), (3000, 1000, 500),
]


def ksql_reference(records, size, advance, grace, emit):
    """Kafka Streams' ``KStreamWindowAggregate`` with one stream time: a row updates each of its windows (starts
    from 0, earliest first) whose end is after stream time (including the row) minus the grace; EMIT CHANGES
    writes the window after each update, EMIT FINAL each window once the final stream time closed it, in the
    order of its end, unless the record that closed it also moved the store's latest window start past the
    window's start + retention; a row's time is its window's latest."""
    windows, clock, changes, expired = {}, np.iinfo(np.int64).min, [], set()
    for i, (k, v, t) in enumerate(records):
        if t > clock:  # the store drops windows starting before its latest start minus the retention (size + grace)
            expired |= {w for w in windows if w[1] + size + grace > clock and w[1] < t - t % advance - size - grace}
        clock = max(clock, t)
        for s in sorted(s for s in range(t - t % advance, t - size, -advance) if s >= 0):
            if s + size > clock - grace:
                first, n, total, latest = windows.get((k, s), (i, 0, 0, t))
                windows[(k, s)] = (first, n + 1, total + v, max(latest, t))
                changes.append((k, s) + windows[(k, s)][1:])
    if emit == "CHANGES":
        return changes
    closed = sorted((s + size, first, k, s, n, total, latest) for (k, s), (first, n, total, latest) in windows.items()
                    if s + size <= clock - grace and (k, s) not in expired)
    return [(k, s, n, total, latest) for _, _, k, s, n, total, latest in closed]


def gappy_records(seed: int, n: int = 60):
    """(key, value, time) with times that now and then jump ahead by several windows, and late rows."""
    rng, t, out = random.Random(seed), 0, []
    for _ in range(n):
        t += rng.choice([0, 200, 500, 900, 9000]) if rng.random() < 0.8 else 0
        out.append((rng.choice("ab"), rng.randrange(10), max(0, t - rng.choice([0, 0, 0, 1500, 4000]))))
    return out


@pytest.mark.parametrize("emit", ["CHANGES", "FINAL"])
@pytest.mark.parametrize("size,advance,grace", KSQL_WINDOWS)
@pytest.mark.parametrize("records", ["disordered", "gappy"])
@pytest.mark.parametrize("seed", range(3))
def test_ksqldb_windows_update_or_close_by_stream_time_and_grace_whatever_the_cuts(seed, records, size, advance, grace, emit):
    records = window_records(seed) if records == "disordered" else gappy_records(seed)
    expected = ksql_reference(records, size, advance, grace, emit)
    window = group_window(size, advance, grace=grace, kind="TUMBLING" if size == advance else "HOPPING", emit=emit)
    for cuts in [[], random.Random(seed).sample(range(1, len(records)), 9)] + one_at_a_time(seed, len(records)):
        got = window_run(records, cuts, window)
        if emit == "CHANGES":  # in ingestion order, each row's windows earliest first
            assert got == expected
        else:
            assert sorted(got) == sorted(expected)
            assert [s + size for _, s, *_ in got] == sorted(s + size for _, s, *_ in got)


def test_a_ksqldb_aggregate_update_takes_the_latest_time_of_its_group():
    specs = [AggSpec("COUNT", None, "n")]
    step = as_step(aggregate.bucket_step(["g"], ["g"], specs, [], ["g", "n", ROWTIME, SEQ, SUB], latest_time=True))
    frame = pd.DataFrame({"g": ["a", "a", "b", "a"], ROWTIME: [10, 5, 7, 12], SEQ: [1, 2, 3, 4], SUB: 0})
    for cuts in ([], [1], [1, 2, 3]):
        out, _ = run(step, frame, cuts)
        assert [(g, n, t) for g, n, t, *_ in out] == [("a", 1, 10), ("a", 2, 10), ("b", 1, 7), ("a", 3, 12)]


def test_ksqldb_emit_final_loses_a_window_its_store_expired_before_its_close_was_seen():
    """ksqlDB's suppress test "should support final results for tumbling windows": a jump from 2 to 5 closes
    [0, 2) and [2, 4) at once, but Kafka Streams' store (retention 3) already dropped [0, 2)."""
    records = [("k1", 1, t) for t in (0, 1, 2, 1, 0, 5)]
    window = group_window(2, 2, grace=1, kind="TUMBLING", emit="FINAL")
    assert ksql_reference(records, 2, 2, 1, "FINAL") == [("k1", 2, 1, 1, 2)]
    for cuts in ([], [3], [1, 2, 3, 4, 5]):
        assert window_run(records, cuts, window) == [("k1", 2, 1, 1, 2)]


# ------------------------------------------------------------------ ksqlDB session windows

def session_run(records, cuts, gap, grace, cold=False, emit="CHANGES"):
    """The session step over ``records`` cut at ``cuts``: (key, start, end, COUNT, SUM or None for a tombstone,
    time) rows in output order."""
    from streamjoin.operators import session_aggregate as sa
    from streamjoin.operators.keyed_inputs import SIDE, TICK
    from streamjoin.plan.nodes import STREAM_TIME, WINDOW_END, WINDOW_START

    window = group_window(gap, gap, grace=grace, kind="SESSION", emit=emit)
    specs = [AggSpec("COUNT", None, "n"), AggSpec("SUM", "v", "s")]
    names = ["k", "ws", "we", "n", "s", ROWTIME, SEQ, SUB, STREAM_TIME, WINDOW_START, WINDOW_END, TOMBSTONE]
    step = as_step(sa.session_step(window, ["k"], specs, ["v"], names), cold, idle=sa._idle(window))
    state, out, clock = None, [], np.iinfo(np.int64).min
    bounds = [0] + sorted(cuts) + [len(records)]
    for a, b in zip(bounds, bounds[1:]):
        rows = []
        for i in range(a, b):
            k, v, t = records[i]
            clock = max(clock, t)
            rows.append({"k": k, "v": v, "__t": t, SEQ: i, SUB: 0, STREAM_TIME: clock, SIDE: sa.ROW})
        rows.append({"k": None, "v": None, "__t": None, SEQ: b - 1, SUB: None, STREAM_TIME: clock, SIDE: TICK})
        result, state = step(state, pd.DataFrame(rows))
        for r in result.sort_values([SEQ, SUB], kind="stable").to_dict("records"):
            out.append((r["k"], r["ws"], r["we"], None if r[TOMBSTONE] else (r["n"], r["s"]), r[ROWTIME]))
    return out, state


def session_reference(records, gap, grace):
    """Kafka Streams' ``KStreamSessionWindowAggregate`` with one stream time, written plainly: a row merges the
    sessions within ``gap`` of it that the store still holds (ending within gap + grace of stream time), unless
    the merged session ends before stream time - grace - gap; merged sessions are deleted first."""
    sessions, clock, out = {}, np.iinfo(np.int64).min, []  # key -> [(start, end, n, total)]
    for k, v, t in records:
        clock = max(clock, t)
        live = [s for s in sessions.get(k, []) if s[1] > clock - gap - grace]
        near = [s for s in live if s[1] >= t - gap and s[0] <= t + gap]
        start, end = min([t] + [s[0] for s in near]), max([t] + [s[1] for s in near])
        if end < clock - grace - gap:
            sessions[k] = live
            continue
        if near and (start, end) != (t, t):
            out += [(k, s[0], s[1], None, s[1]) for s in sorted(near)]
        n, total = 1 + sum(s[2] for s in near), v + sum(s[3] for s in near)
        sessions[k] = [s for s in live if s not in near] + [(start, end, n, total)]
        out.append((k, start, end, (n, total), end))
    return out


@pytest.mark.parametrize("cold", [False, True], ids=["cached state", "state replayed from its log"])
@pytest.mark.parametrize("gap,grace", [(1000, 0), (2000, 1500), (500, 3000)])
@pytest.mark.parametrize("seed", range(3))
def test_ksqldb_sessions_merge_and_expire_as_kafka_streams_whatever_the_cuts(seed, gap, grace, cold):
    records = gappy_records(seed)
    expected = session_reference(records, gap, grace)
    assert any(r[3] is None for r in expected)  # some merges
    for cuts in [[], random.Random(seed).sample(range(1, len(records)), 9)] + one_at_a_time(seed, len(records)):
        if cold and len(cuts) > 9:
            continue
        got, (meta, _) = session_run(records, cuts, gap, grace, cold)
        assert got == expected
    assert meta["dropped"].get("late", 0) == len(records) - sum(1 for r in expected if r[3] is not None)


def closed_sessions(records, gap, grace):
    """Kafka Streams' session windows under ``suppress(untilWindowCloses)``, written plainly: per key, each session
    once, when stream time leaves it behind the store (its end + gap + grace), with its final COUNT and SUM."""
    sessions, clock, out = {}, np.iinfo(np.int64).min, {}  # key -> [(start, end, n, total)]
    for k, v, t in records:
        clock = max(clock, t)
        for key, kept in sessions.items():
            closed = sorted((s for s in kept if s[1] <= clock - gap - grace), key=lambda s: s[1])
            out.setdefault(key, []).extend((key, s[0], s[1], (s[2], s[3]), s[1]) for s in closed)
            sessions[key] = [s for s in kept if s not in closed]
        near = [s for s in sessions.get(k, []) if s[1] >= t - gap and s[0] <= t + gap]
        start, end = min([t] + [s[0] for s in near]), max([t] + [s[1] for s in near])
        if end < clock - grace - gap:
            continue
        n, total = 1 + sum(s[2] for s in near), v + sum(s[3] for s in near)
        sessions[k] = [s for s in sessions.get(k, []) if s not in near] + [(start, end, n, total)]
    return out


@pytest.mark.parametrize("gap,grace", [(1000, 0), (2000, 1500), (500, 3000)])
@pytest.mark.parametrize("seed", range(3))
def test_ksqldb_sessions_under_emit_final_are_written_once_when_closed_whatever_the_cuts(seed, gap, grace):
    records = gappy_records(seed)
    expected = closed_sessions(records, gap, grace)
    assert sum(map(len, expected.values())) > 1
    for cuts in [[], random.Random(seed).sample(range(1, len(records)), 9)] + one_at_a_time(seed, len(records)):
        got, _ = session_run(records, cuts, gap, grace, emit="FINAL")
        assert {k: [r for r in got if r[0] == k] for k in expected} == expected
        assert {r[0] for r in got} <= set(expected)


FOLDS = [  # (function, planned parameter, values in order, the result after each), as ksqlDB's UDAFs give them
    ("EARLIEST_BY_OFFSET", (2, True), [None, 1, 2, 3], [[], [1], [1, 2], [1, 2]]),
    ("EARLIEST_BY_OFFSET", (2, False), [None, 1, 2], [[None], [None, 1], [None, 1]]),
    ("EARLIEST_BY_OFFSET", (None, False), [None, 1], [None, None]),
    ("LATEST_BY_OFFSET", (2, True), [1, None, 2, 3], [[1], [1], [1, 2], [2, 3]]),
    ("LATEST_BY_OFFSET", (None, False), [1, None], [1, None]),
    ("COLLECT_LIST", 2, [None, 1, 2], [[None], [None, 1], [None, 1]]),
    ("COLLECT_SET", None, [None, 1, None, 1], [[None], [None, 1], [None, 1], [None, 1]]),
    ("ATTR", None, ["a", "a", None, "a"], ["a", "a", None, None]),  # a NULL is a second value
    ("ATTR", None, [None, None, "a"], [None, None, None]),
    ("ATTR", None, [{"F": 1}, {"F": 1}, {"F": 2}], [{"F": 1}, {"F": 1}, None]),  # STRUCTs by their fields
    ("ATTR", None, [float("nan"), float("nan")], [float("nan")] * 2),  # NaN equals NaN, as Java's Double.equals has it
]


@pytest.mark.parametrize("fn,param,values,results", FOLDS)
def test_parameters_and_nulls_of_ksqldb_collecting_aggregates(fn, param, values, results):
    spec, acc, got = AggSpec(fn, "v", "out", param=param), None, []
    for v in values:
        acc = _fold(spec, acc, v)
        got.append(_result(spec, acc))
    assert repr(got) == repr(results)  # a NaN result is the NaN expected


PARAMETERS = [("TOPK", 2), ("TOPKDISTINCT", 2), ("COLLECT_LIST", 3), ("COLLECT_SET", 2), ("EARLIEST_BY_OFFSET", (2, True)),
              ("EARLIEST_BY_OFFSET", (3, False)), ("EARLIEST_BY_OFFSET", (None, False)), ("LATEST_BY_OFFSET", (2, False)),
              ("LATEST_BY_OFFSET", (None, False))]  # (function, its planned parameter)


@pytest.mark.parametrize("fn,distinct,param", [(f, False, None) for f in FUNCTIONS] + [("COUNT", True, None)]
                         + [(f, False, p) for f, p in PARAMETERS])
def test_merging_two_sessions_accumulators_equals_folding_their_rows_in_order(fn, distinct, param):
    from streamjoin.operators.session_aggregate import _merged

    spec = AggSpec(fn, "v", "out", distinct, param=param)
    earlier, later = [1, 5, None, 5], [3, None, 2, 1]

    def folded(values, acc=None):
        for v in values:
            acc = _fold(spec, acc, v)
        return acc

    merged = _merged([(folded(earlier),), (folded(later),)], [spec])[0]
    exact = fn not in aggregate.VARIANCES  # merged by ksqlDB's pairwise formula: equal up to rounding
    expected = _result(spec, folded(earlier + later))
    assert _result(spec, merged) == (expected if exact else pytest.approx(expected, rel=1e-12))
