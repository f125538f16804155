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
from tests.operators.segmented import as_step

FUNCTIONS = ["COUNT", "SUM", "AVG", "MIN", "MAX", "LATEST_BY_OFFSET", "EARLIEST_BY_OFFSET", "COLLECT_LIST", "COLLECT_SET"]
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
        accs[g] = _fold(spec.fn, accs[g], None if v is None or v != v else v, spec.distinct)
        out.append(_result(spec.fn, accs[g], spec.distinct))
    return out, accs


@pytest.mark.parametrize("fn", FUNCTIONS + ["COUNT DISTINCT"])
@pytest.mark.parametrize("kind", sorted(VALUES))
@pytest.mark.parametrize("seed", range(4))
def test_whole_batch_accumulation_agrees_with_the_fold(fn, kind, seed):
    if kind in ("strings",) and fn in ("SUM", "AVG") or kind == "decimals" and fn == "AVG":
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
    assert run(step, frame, list(range(1, len(frame))))[0] == whole
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


@pytest.mark.parametrize("cold", [False, True], ids=["cached state", "state replayed from its log"])
@pytest.mark.parametrize("seed", range(3))
def test_table_aggregate_materialises_the_aggregate_of_the_final_table(seed, cold):
    rows = as_step(table_aggregate.row_step(["__rk0"], ["g", "__arg0"], ["__rk0"]), cold)
    groups = as_step(table_aggregate.group_step(["g"], ["g"], TABLE_SPECS, [], TABLE_OUT), cold)

    def both(state, batch):
        events, row_state = rows(state and state[0], batch)
        out, group_state = groups(state and state[1], events)
        return out, (row_state, group_state)

    frame = table_changes(seed)
    whole, _ = run(both, frame, [])
    rng = random.Random(seed)
    for cuts in (sorted(rng.sample(range(1, len(frame)), 9)), list(range(1, len(frame)))):
        assert run(both, frame, cuts)[0] == whole
    latest = {}
    for g, n, total, low, *_, tombstone in whole:
        latest[g] = None if tombstone else (n, total, low)
    assert {g: v for g, v in latest.items() if v is not None} == final_groups(frame)
    assert run(both, frame, [])[1][1][0]["rows"] == len(final_groups(frame))  # an emptied group leaves state


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


def window_run(records, cuts, size, slide, delay, cold=False):
    from streamjoin.operators import window_aggregate as wa
    from streamjoin.operators.keyed_inputs import SIDE, TICK
    from streamjoin.plan.nodes import STREAM_TIME

    specs = [AggSpec("COUNT", None, "n"), AggSpec("SUM", "v", "s")]
    names = ["k", "ws", "we", "wr", "n", "s", ROWTIME, SEQ, SUB, STREAM_TIME]
    step = as_step(wa.window_step(["k"], specs, ["v"], size, delay, ["ws", "we", "wr"], names), cold, idle=wa._idle(delay))
    state, out, clock = None, [], np.iinfo(np.int64).min
    bounds = [0] + sorted(cuts) + [len(records)]
    for a, b in zip(bounds, bounds[1:]):
        rows = []
        for i in range(a, b):
            k, v, t = records[i]
            clock = max(clock, t)  # the watermark (no delay) including the record
            last = t - t % slide
            rows += [{"k": k, "v": v, wa.START: s, SEQ: i, SUB: 0, STREAM_TIME: clock, SIDE: wa.ROW}
                     for s in range(last, t - size, -slide)]
        rows.append({"k": None, "v": None, wa.START: None, SEQ: b - 1, SUB: None, STREAM_TIME: clock, SIDE: TICK})
        result, state = step(state, pd.DataFrame(rows))
        out += [(r["k"], r["ws"].value // 10**6, r["n"], r["s"]) for r in result.sort_values([SEQ, SUB]).to_dict("records")]
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
    for cuts in ([], random.Random(seed).sample(range(1, len(records)), 9), list(range(1, len(records)))):
        if cold and len(cuts) > 9:
            continue  # (replaying the log every batch is slow to drive one record at a time)
        got = window_run(records, cuts, size, slide, delay, cold)
        assert sorted(got) == sorted(expected)
        # leaving windows in order of their end, whatever batch each left in
        assert [s + size for _, s, _, _ in got] == sorted(s + size for _, s, _, _ in got)
