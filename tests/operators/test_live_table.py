"""A keyed table as operators keep it (``state.LiveTable``, found and changed in place) and as its state keeps it
(``state.log_changes``: a log of change chunks compacted size-tiered), checked against a plain dict of rows:
random upserts and removals, batch after batch, warm (the worker's table) and cold (replayed from the log)."""
from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from streamjoin.operators import state
from streamjoin.operators.state import GONE, InMemorySegments, LiveTable

KEYS, COLUMNS = ["k"], ["v", "n"]


def batches(seed: int, count: int, keys: int, size: int):
    """Random batches of changes (the last per key), a quarter of them removals; values of changing types (a
    column that holds ints, then a null, then text) as Spark's batches may give them."""
    rng = random.Random(seed)
    for b in range(count):
        chosen = rng.sample(range(keys), min(size, keys))
        rows = [(k, f"v{b}.{k}" if rng.random() < 0.8 else None, rng.choice([b, None]) if b % 3 else b, rng.random() < 0.25)
                for k in chosen]
        yield pd.DataFrame(rows, columns=KEYS + COLUMNS + [GONE])


def applied(model: dict, changes: pd.DataFrame) -> None:
    for k, v, n, gone in changes.itertuples(index=False, name=None):
        model.pop(k, None)  # a changed key moves to the end: the order of last changes
        if not gone:
            model[k] = (v, n)


def rows_of(frame: pd.DataFrame) -> list:
    return [tuple(None if pd.isna(x) else x for x in row) for row in frame.itertuples(index=False, name=None)]


def expected_rows(model: dict) -> list:
    return [(k, *(None if pd.isna(x) else x for x in values)) for k, values in model.items()]


@pytest.mark.parametrize("keys,size", [(50, 7), (3000, 400), (20000, 3)], ids=["few keys", "big batches", "big table"])
@pytest.mark.parametrize("seed", range(3))
def test_live_table_and_its_log_hold_what_the_changes_say(seed, keys, size):
    log, segments = state.new_table_log(), InMemorySegments()
    table = state.read_table(log, segments, KEYS, COLUMNS)
    model: dict = {}
    probe = pd.DataFrame({"k": list(range(-2, keys + 2))})
    for i, changes in enumerate(batches(seed, 60, keys, size)):
        state.apply_changes(log, segments, table, changes, KEYS)
        applied(model, changes)
        assert len(table) == len(model)
        found = table.find(probe)
        assert [k for k, at in zip(probe["k"], found) if at >= 0] == sorted(model)
        hits = found[found >= 0]
        assert list(table.column("v")[hits]) == [model[k][0] for k in sorted(model)]
        assert len(log["chunks"]) <= state.MAX_CHUNKS and set(segments.frames) == set(log["chunks"])
        if i % 7 == 0 or i == 59:
            assert rows_of(table.frame()) == expected_rows(model)
            cold = InMemorySegments()
            cold.frames = dict(segments.frames)  # another worker: the chunks replayed
            assert rows_of(state.read_frame(log, cold, KEYS, COLUMNS)) == expected_rows(model)
            assert rows_of(state.read_table(log, cold, KEYS, COLUMNS).frame()) == expected_rows(model)
    wanted = pd.DataFrame({"k": [3, 3, keys + 5, 1]})
    assert rows_of(table.rows_for(wanted)) == [r for r in expected_rows(model) if r[0] in (1, 3)]


def test_a_batch_writes_its_changes_amortised_not_the_table():
    """100k live keys, then 200 batches of 50 changes: the log writes O(changes * log n) rows in all, where
    rewriting the table every 16 batches wrote 12 tables' worth; and a cold read replays at most MAX_CHUNKS."""
    log, segments = state.new_table_log(), InMemorySegments()
    table = state.read_table(log, segments, KEYS, COLUMNS)
    first = pd.DataFrame({"k": np.arange(100_000), "v": "x", "n": 0, GONE: False})
    state.apply_changes(log, segments, table, first, KEYS)
    written = [0]
    put = segments.put

    def counting_put(segment, frame):
        written[0] += len(frame)
        put(segment, frame)

    segments.put = counting_put
    rng = np.random.default_rng(5)
    for b in range(200):
        keys = rng.choice(200_000, 50, replace=False)
        state.apply_changes(log, segments, table, pd.DataFrame({"k": keys, "v": f"b{b}", "n": b, GONE: keys % 5 == 0}), KEYS)
    assert written[0] < 200 * 50 * 20  # each change merged at most ~log2(n) times, the table never rewritten
    assert len(log["chunks"]) <= state.MAX_CHUNKS
    assert log["logged"] <= 2 * len(table) + 200 * 50


def test_a_live_table_changed_by_a_failed_batch_is_not_handed_out_again():
    """The worker cache hands a group's table to its next batch only if it is the state the store holds: a batch
    that changed the table in place and then failed leaves it valid for no token."""
    entry, token = ("processor", (0,)), "t1"
    table = LiveTable(KEYS, COLUMNS, pd.DataFrame({"k": [1], "v": ["a"], "n": [1]}))
    state._keep(entry, token, {}, {"table": table})
    assert state._cached(entry, token)[1]["table"] is table
    table.apply(pd.DataFrame({"k": [2], "v": ["b"], "n": [2], GONE: [False]}))  # the batch fails after this
    assert state._cached(entry, token)[1] == {}
    state._CACHE.pop(entry)


def test_column_types_widen_as_pandas_concat_would():
    table = LiveTable(KEYS, COLUMNS, pd.DataFrame({"k": [1, 2], "v": ["a", "b"], "n": [1, 2]}))
    table.apply(pd.DataFrame({"k": [2, 3], "v": ["c", None], "n": [np.nan, 7.5], GONE: [False, False]}))
    assert table.column("n").dtype == np.float64 and list(table.column("n")[table.find(pd.DataFrame({"k": [3]}))]) == [7.5]
    table.apply(pd.DataFrame({"k": [1], "v": ["d"], "n": ["text"], GONE: [False]}))
    assert rows_of(table.frame()) == [(2, "c", None), (3, None, 7.5), (1, "d", "text")]


def test_rows_under_the_first_key_columns():
    """A table keyed by (parent, child) read by parent (the foreign-key join's children), as changes come."""
    rng = random.Random(3)
    table = LiveTable(["p", "c"], ["v"], pd.DataFrame({"p": [0], "c": [0], "v": ["first"]}))
    model = {(0, 0): "first"}
    for b in range(30):
        if b == 10:
            table.rows_for(pd.DataFrame({"p": [0]}), ["p"])  # from here on the groups are kept up to date
        changes = {(rng.randrange(5), rng.randrange(40)): (f"v{b}", rng.random() < 0.3) for _ in range(20)}
        table.apply(pd.DataFrame([(p, c, v, gone) for (p, c), (v, gone) in changes.items()], columns=["p", "c", "v", GONE]))
        for key, (v, gone) in changes.items():
            model.pop(key, None)
            if not gone:
                model[key] = v
        wanted = pd.DataFrame({"p": [1, 3, 3, 9]})
        assert rows_of(table.rows_for(wanted, ["p"])) == [(p, c, v) for (p, c), v in model.items() if p in (1, 3)]


def test_rows_by_other_columns_whose_values_change():
    """A table keyed by row id read by (side, join key), as the Flink regular join reads it: a row that moves to
    another join key leaves its old group; a removed row that comes back under another key moves too."""
    rng = random.Random(4)
    table = LiveTable(["id"], ["side", "k", "v"], pd.DataFrame({"id": ["r0"], "side": [0], "k": ["a"], "v": [0]}))
    model = {"r0": (0, "a", 0)}
    for b in range(40):
        if b == 3:
            table.rows_for(pd.DataFrame({"side": [0], "k": ["a"]}), ["side", "k"])  # the groups are kept from here on
        changes = {f"r{rng.randrange(12)}": (rng.randrange(2), rng.choice("abc"), b, rng.random() < 0.3) for _ in range(5)}
        table.apply(pd.DataFrame([(i, s, k, v, gone) for i, (s, k, v, gone) in changes.items()],
                                 columns=["id", "side", "k", "v", GONE]))
        for i, (s, k, v, gone) in changes.items():
            model.pop(i, None)
            if not gone:
                model[i] = (s, k, v)
        wanted = pd.DataFrame({"side": [1, 0], "k": ["b", "c"]})
        assert rows_of(table.rows_for(wanted, ["side", "k"])) == [(i, *row) for i, row in model.items()
                                                                 if (row[0], row[1]) in ((1, "b"), (0, "c"))]
