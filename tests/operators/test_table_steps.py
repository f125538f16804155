"""The table operators' per-bucket steps, driven directly with pandas frames (no Spark): random changelogs
cut into micro-batches at random places give the output of one batch, and deleted keys leave no state."""
from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from streamjoin.operators import state, stream_table, table_table
from streamjoin.operators.keyed_inputs import BUCKET, DELETE, NULL_KEY, OK, SIDE
from streamjoin.plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB
from tests.operators.segmented import as_step, one_at_a_time


def changelog(seed: int, n: int = 60, keys: int = 4, stream_side=None):
    """Random changes on side 0/1 over a few keys; a third of the table changes are tombstones."""
    rng = random.Random(seed)
    rows = []
    for seq in range(1, n + 1):
        side = rng.randint(0, 1)
        key = rng.randint(0, keys - 1)
        delete = side != stream_side and rng.random() < 0.33
        rows.append({SIDE: side, "__k0": key, "lv": None if side or delete else f"l{seq}", "rv": None if not side or delete else f"r{seq}",
                     OK: True, DELETE: delete, NULL_KEY: False, ROWTIME: rng.randint(0, 100), SEQ: seq, SUB: 0,
                     STREAM_TIME: 100, BUCKET: 0})
    return pd.DataFrame(rows)


def run(step, frame: pd.DataFrame, cuts: list[int]):
    state, out = None, []
    for lo, hi in zip([0] + cuts, cuts + [len(frame)]):
        result, state = step(state, frame.iloc[lo:hi].reset_index(drop=True))
        out.append(result)
    out = pd.concat(out, ignore_index=True).sort_values([SEQ, SUB], kind="stable")
    return [tuple(None if pd.isna(v) else v for v in row) for row in out.itertuples(index=False, name=None)], state


def table_table_step(outer, cold=False):
    return as_step(table_table._bucket_step(["__k0"], ["__k0"], ["lv"], ["rv"], ["jk"], outer), cold)


@pytest.mark.parametrize("cold", [False, True], ids=["cached table", "table replayed from its log"])
@pytest.mark.parametrize("join_type", ["INNER", "LEFT", "RIGHT", "FULL"])
@pytest.mark.parametrize("seed", range(5))
def test_table_table_output_does_not_depend_on_batch_cuts(join_type, seed, cold):
    outer = (join_type in ("LEFT", "FULL"), join_type in ("RIGHT", "FULL"))
    step = table_table_step(outer, cold)
    frame = changelog(seed)
    whole, state = run(step, frame, [])
    rng = random.Random(seed)
    for _ in range(5):
        cuts = sorted(rng.sample(range(1, len(frame)), rng.randint(1, 10)))
        assert run(step, frame, cuts)[0] == whole
    for cuts in one_at_a_time(seed, len(frame)):
        assert run(step, frame, cuts)[0] == whole


def test_table_table_tombstone_only_for_an_existing_result_and_state_emptied():
    step = table_table_step((False, False))
    frame = pd.DataFrame([
        {SIDE: 0, "__k0": 1, "lv": None, "rv": None, DELETE: True, ROWTIME: 1, SEQ: 1},  # a key never seen
        {SIDE: 0, "__k0": 1, "lv": "a", "rv": None, DELETE: False, ROWTIME: 2, SEQ: 2},
        {SIDE: 1, "__k0": 1, "lv": None, "rv": "b", DELETE: False, ROWTIME: 3, SEQ: 3},
        {SIDE: 1, "__k0": 1, "lv": None, "rv": None, DELETE: True, ROWTIME: 4, SEQ: 4},
        {SIDE: 0, "__k0": 1, "lv": None, "rv": None, DELETE: True, ROWTIME: 5, SEQ: 5},
    ]).assign(**{OK: True, NULL_KEY: False, SUB: 0, STREAM_TIME: 5, BUCKET: 0})
    out, (meta, _) = run(step, frame, [2])
    assert [(r[0], r[1], r[-1]) for r in out] == [("a", "b", False), (None, None, True)]
    assert meta["rows"] == 0


def stream_table_step(stream_cols, table_cols, outer, cold=False, rematch_ms=None):
    return as_step(stream_table._bucket_step(["__k0"], ["__k0"], stream_cols, table_cols, ["jk"], outer, rematch_ms), cold)


@pytest.mark.parametrize("cold", [False, True], ids=["cached table", "table replayed from its log"])
@pytest.mark.parametrize("outer,rematch", [(False, None), (True, None), (True, 10 ** 9)],
                         ids=["inner", "left", "left, Lenses re-match"])
@pytest.mark.parametrize("seed", range(5))
def test_stream_table_output_does_not_depend_on_batch_cuts(outer, rematch, seed, cold):
    step = stream_table_step(["lv"], ["rv"], outer, cold, rematch)
    frame = changelog(seed, stream_side=stream_table.STREAM)
    whole, _ = run(step, frame, [])
    assert whole, "the random changelog produced no output: nothing is being tested"
    rng = random.Random(seed)
    for cuts in [[len(frame) // 2], sorted(rng.sample(range(1, len(frame)), 9))] + one_at_a_time(seed, len(frame)):
        out, (meta, segments) = run(step, frame, cuts)
        assert out == whole
        assert len(meta["table"]["chunks"]) <= state.MAX_CHUNKS  # one chunk a batch, compacted past the limit
        assert set(segments.frames) - {stream_table.WAITING} == set(meta["table"]["chunks"])


def test_lenses_rematch_emits_a_padded_record_once_more_when_its_table_row_arrives():
    """Only a live row later in ingestion order re-matches; a tombstone does not; a record older than the
    retention behind stream time stops waiting."""
    step = stream_table_step(["sv"], ["tv"], True, rematch_ms=100)
    S, T = stream_table.STREAM, stream_table.TABLE
    frame = pd.DataFrame([
        {SIDE: S, "__k0": 1, "sv": "s1", ROWTIME: 10, SEQ: 1, DELETE: False, STREAM_TIME: 10},
        {SIDE: T, "__k0": 1, "tv": "a", ROWTIME: 20, SEQ: 2, DELETE: False, STREAM_TIME: 20},
        {SIDE: S, "__k0": 2, "sv": "s2", ROWTIME: 30, SEQ: 3, DELETE: False, STREAM_TIME: 30},
        {SIDE: T, "__k0": 2, "tv": None, ROWTIME: 35, SEQ: 4, DELETE: True, STREAM_TIME: 35},
        {SIDE: S, "__k0": 3, "sv": "s3", ROWTIME: 40, SEQ: 5, DELETE: False, STREAM_TIME: 40},
        {SIDE: S, "__k0": 9, "sv": "s4", ROWTIME: 200, SEQ: 6, DELETE: False, STREAM_TIME: 200},
        {SIDE: T, "__k0": 3, "tv": "c", ROWTIME: 210, SEQ: 7, DELETE: False, STREAM_TIME: 210},
        {SIDE: T, "__k0": 2, "tv": "b", ROWTIME: 220, SEQ: 8, DELETE: False, STREAM_TIME: 220},
        {SIDE: T, "__k0": 1, "tv": "a2", ROWTIME: 230, SEQ: 9, DELETE: False, STREAM_TIME: 230},
    ]).assign(**{OK: True, NULL_KEY: False, SUB: 0, BUCKET: 0})
    expected = [("s1", None, 10), ("s1", "a", 20), ("s2", None, 30), ("s3", None, 40), ("s4", None, 200)]
    for cuts in ([], [6], list(range(1, len(frame)))):
        out, (meta, _) = run(step, frame, cuts)
        # s3 (t = 40) stopped waiting once stream time passed 140, before c arrived; s2 stopped when b came
        # only because it is older than 220 - 100 too; s1 was re-matched once, not again by a2
        assert [(r[0], r[1], r[3]) for r in out] == expected
        assert meta["waiting"] == 1  # s4


def test_stream_table_lookup_is_as_of_ingestion_order_not_time():
    step = stream_table_step(["sv"], ["tv"], True)
    frame = pd.DataFrame([
        {SIDE: stream_table.TABLE, "__k0": 1, "tv": "old", ROWTIME: 50, SEQ: 1, DELETE: False},
        {SIDE: stream_table.STREAM, "__k0": 1, "sv": "s1", ROWTIME: 10, SEQ: 2, DELETE: False},
        {SIDE: stream_table.TABLE, "__k0": 1, "tv": "new", ROWTIME: 5, SEQ: 3, DELETE: False},
        {SIDE: stream_table.STREAM, "__k0": 1, "sv": "s2", ROWTIME: 60, SEQ: 4, DELETE: False},
        {SIDE: stream_table.TABLE, "__k0": 1, "tv": None, ROWTIME: 70, SEQ: 5, DELETE: True},
        {SIDE: stream_table.STREAM, "__k0": 1, "sv": "s3", ROWTIME: 80, SEQ: 6, DELETE: False},
    ]).assign(**{OK: True, NULL_KEY: False, SUB: 0, STREAM_TIME: 80, BUCKET: 0})
    out, (meta, _) = run(step, frame, [])
    assert [(r[0], r[1], r[3]) for r in out] == [("s1", "old", 10), ("s2", "new", 60), ("s3", None, 80)]
    assert meta["rows"] == 0
    assert np.array_equal(run(step, frame, [1, 2, 3, 4, 5])[0], out)
