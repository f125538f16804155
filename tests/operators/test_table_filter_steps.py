"""The table filter's step (``operators.table_filter``): a row that passes is written, a failing row or a delete
writes a tombstone only when its key's previous row passed; the output does not depend on batch cuts."""
from __future__ import annotations

import random

import pandas as pd
import pytest

from streamjoin.operators import table_filter
from streamjoin.plan.nodes import ROWTIME, SEQ, SUB
from tests.operators.segmented import as_step, run_cut

K, V = "k", "v"
COLUMNS = [K, V, ROWTIME, SEQ, SUB]


def frame(records, first_seq, clock):
    """(key, value, passes) records as a batch; a value of None is a delete (it never passes)."""
    rows = pd.DataFrame({K: [r[0] for r in records], V: [r[1] for r in records],
                         ROWTIME: range(first_seq, first_seq + len(records)), SEQ: range(first_seq, first_seq + len(records)),
                         SUB: 0, table_filter.PASSES: [r[1] is not None and r[2] for r in records]})
    return rows, clock


def outputs(records, cuts, cold=False):
    step = as_step(table_filter._bucket_step([K], [K], COLUMNS + ["_tombstone"]), cold=cold)
    outs, state = run_cut(step, records, cuts, frame)
    out = pd.concat(outs, ignore_index=True)
    return [(k, None if dead else v) for k, v, dead in zip(out[K], out[V], out["_tombstone"])], state


CASES = [  # (what, records (key, value, passes), expected (key, value or None for a tombstone))
    ("rows failing before any passes write nothing", [("a", 1, False), ("a", 2, False), ("a", 3, True)], [("a", 3)]),
    ("a failing row after a passing one is a tombstone, once", [("a", 1, True), ("a", 2, False), ("a", 3, False)],
     [("a", 1), ("a", None)]),
    ("a delete of a key that never passed writes nothing", [("a", 1, False), ("a", None, False)], []),
    ("a delete of a passing key is a tombstone", [("a", 1, True), ("a", None, False), ("a", 2, True)],
     [("a", 1), ("a", None), ("a", 2)]),
    ("keys are apart", [("a", 1, True), ("b", 1, False), ("b", 2, True), ("a", 2, False)],
     [("a", 1), ("b", 2), ("a", None)]),
]


@pytest.mark.parametrize("what,records,expected", CASES, ids=[c[0] for c in CASES])
def test_tombstones_only_for_keys_whose_row_passed(what, records, expected):
    for cuts in ([], list(range(len(records)))):
        assert outputs(records, cuts)[0] == expected


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("cold", [False, True])
def test_output_does_not_depend_on_batch_cuts(seed, cold):
    rng = random.Random(seed)
    records = [(rng.choice("abcd"), rng.choice([None, 1, 2, 3]), rng.random() < 0.5) for _ in range(60)]
    whole, _ = outputs(records, [])
    cut, (meta, _) = outputs(records, sorted(rng.sample(range(1, 60), 12)), cold)
    assert cut == whole
    last = {}
    for k, v, passes in records:
        last[k] = v is not None and passes
    assert meta["rows"] == sum(last.values())  # the state holds exactly the keys whose last row passed
