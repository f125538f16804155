"""The SQLstream stream-table join over tumbling frames (``operators.framed_table``), its per-bucket step driven
with pandas frames (no Spark): random streams and table changes give, whatever the micro-batch cuts and
whether a batch finds the worker's cached state or reads it cold, exactly the rows of the rule applied
record by record: a stream record joins its key's live table row; when stream time enters a later frame,
every live table row that no stream record matched in the frame leaves padded at the frame's end, and every
live row for each empty frame skipped."""
from __future__ import annotations

import random

import pandas as pd
import pytest

from streamjoin.operators.framed_table import STREAM, TABLE, framed_step
from streamjoin.operators.keyed_inputs import BUCKET, DELETE, NULL_KEY, OK, SIDE, TICK
from streamjoin.plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB

from .segmented import as_step, one_at_a_time, run_cut

UNIT = 10
OUT = ["sv", "tv", "jk", ROWTIME, SEQ, SUB, STREAM_TIME]


def random_inputs(seed: int, n: int = 60):
    """(side, key, value, time, deletes) records in ingestion order; times rise with gaps over several frames."""
    rnd = random.Random(seed)
    records, t = [], 0
    for i in range(n):
        t += rnd.choice([0, 1, 2, 3, 5, 12, 31]) if rnd.random() < 0.3 else 0
        side = rnd.choice([STREAM, STREAM, TABLE])
        key = rnd.choice(["a", "b", "c", "d", None] if side == STREAM else "abcd")
        records.append((side, key, f"{'st'[side]}{i}", t, side == TABLE and rnd.random() < 0.15))
    return records


def frame(records, first_seq, clock):
    data = []
    for i, (side, key, value, t, deletes) in enumerate(records):
        clock = max(clock, t)
        data.append({SIDE: side, "__k0": key, "sv": value if side == STREAM else None, "tv": value if side == TABLE else None,
                     ROWTIME: t, SEQ: first_seq + i, SUB: 0, STREAM_TIME: clock, OK: key is not None,
                     NULL_KEY: key is None, DELETE: deletes, BUCKET: 0})
    data.append({SIDE: TICK, SEQ: first_seq + len(records) - 1, STREAM_TIME: clock, ROWTIME: records[0][3], BUCKET: 0})
    return pd.DataFrame(data), clock


def run(step, records, cuts):
    outs, _ = run_cut(step, records, cuts, frame)
    return sorted((tuple(None if pd.isna(v) else v for v in values) + (int(t),)
                   for out in outs for *values, t in zip(out["sv"], out["tv"], out["jk"], out[ROWTIME])), key=repr)


def by_the_rule(records, stream_padded: bool):
    table, matched, frame_no, clock, out = {}, set(), None, -1, []
    for side, key, value, t, deletes in records:
        clock = max(clock, t)
        frame_no = clock // UNIT if frame_no is None else frame_no
        while frame_no < clock // UNIT:
            out += [(None, v, k, (frame_no + 1) * UNIT) for k, v in table.items() if k not in matched]
            matched, frame_no = set(), frame_no + 1
        if side == TABLE:
            table.pop(key, None) if deletes else table.__setitem__(key, value)
        elif key in table:
            matched.add(key)
            out.append((value, table[key], key, t))
        elif stream_padded:
            out.append((value, None, key, t))
    return sorted(out, key=repr)


@pytest.mark.parametrize("stream_padded", [False, True], ids=["table-preserved", "full"])
@pytest.mark.parametrize("cold", [False, True], ids=["cached", "cold"])
@pytest.mark.parametrize("seed", range(3))
def test_rows_follow_the_rule_whatever_the_cuts(seed, cold, stream_padded):
    records = random_inputs(seed)
    expected = by_the_rule(records, stream_padded)
    rnd = random.Random(seed)
    for cuts in [[], rnd.sample(range(1, len(records)), 7)] + one_at_a_time(seed, len(records)):
        step = as_step(framed_step(UNIT, ["__k0"], [], ["sv"], ["tv"], ["jk"], OUT, stream_padded), cold=cold)
        assert run(step, records, cuts) == expected, cuts


def test_a_file_table_seeds_each_bucket_and_a_batch_writes_only_its_changes():
    step = framed_step(UNIT, ["__k0"], [], ["sv"], ["tv"], ["jk"], OUT, stream_padded=False,
                       static={0: {("a",): {"tv": "A"}, ("b",): {"tv": "B"}}})
    step = as_step(step)
    run_step = lambda state, batch: step(state, batch.drop(columns="tv"))  # noqa: E731 - no table rows stream in
    batch, clock = frame([(STREAM, "a", "s1", 3, False)], 0, -1)
    out, state = run_step(None, batch)
    assert list(out["tv"]) == ["A"]
    writes = state[1].writes
    batch, clock = frame([(STREAM, "b", "s2", 4, False)], 1, clock)
    out, state = run_step(state, batch)  # a match in the same frame: the matched keys grow, the table is unchanged
    assert list(out["tv"]) == ["B"] and state[1].writes == writes + 1
    batch, clock = frame([(STREAM, "c", "s3", 12, False)], 2, clock)
    out, state = run_step(state, batch)  # frame 0 closes: both keys matched in it, nothing padded
    assert not len(out) and state[0]["rows"] == 2
    batch, clock = frame([(STREAM, "c", "s4", 25, False)], 3, clock)
    out, state = run_step(state, batch)  # frame 1 closes: no key matched, both padded at its end
    assert sorted(zip(out["jk"], out[ROWTIME])) == [("a", 20), ("b", 20)]
