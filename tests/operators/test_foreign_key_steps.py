"""The foreign-key join's three stages, driven directly with pandas frames (no Spark): random changes of
a child table (whose foreign key moves) and a parent table, cut into micro-batches anywhere, materialise
the join of the final tables, with state read from the cache or replayed from its logs."""
from __future__ import annotations

import random

import pandas as pd
import pytest

from streamjoin.operators import foreign_key as fk
from streamjoin.operators.keyed_inputs import DELETE, NULL_KEY, OK
from streamjoin.plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, TOMBSTONE
from tests.operators.segmented import as_step, one_at_a_time

CHILD, PARENT = ["cpk", "cfk", "cv"], ["ppk", "pv"]
OUT = CHILD + PARENT + ["jk", ROWTIME, SEQ, SUB, STREAM_TIME, TOMBSTONE]


def random_changes(seed: int, n: int = 70):
    """(table, primary key, foreign key or None, value, delete) — children point at parents p0..p3."""
    rng = random.Random(seed)
    return [("child" if rng.random() < 0.6 else "parent", rng.randrange(5), f"p{rng.randrange(4)}", f"v{i}",
             rng.random() < 0.2) for i in range(n)]


def run(changes, cuts, child_outer, parent_outer, cold):
    subscribe = as_step(fk._subscribe_step(["cpk"], ["__k0"], CHILD, []), cold)
    parent = as_step(fk._parent_step(["cpk"], ["__k0"], CHILD, PARENT, ["jk"], child_outer, parent_outer, []), cold)
    out_key = ["cpk", "jk"] if parent_outer else ["cpk"]
    resolve = as_step(fk._resolve_step(out_key), cold)
    states, sink, tombstones = [None, None, None], {}, []
    bounds = [0] + sorted(cuts) + [len(changes)]
    for a, b in zip(bounds, bounds[1:]):
        batch = list(enumerate(changes[a:b], start=a))
        meta = lambda i: {ROWTIME: i, SEQ: i, SUB: 0, STREAM_TIME: i}  # noqa: E731
        children = pd.DataFrame([{"cpk": pk, "cfk": None if gone else key, "cv": None if gone else value,
                                  "__k0": None if gone else key, DELETE: gone, OK: True, **meta(i)}
                                 for i, (table, pk, key, value, gone) in batch if table == "child"],
                                columns=CHILD + ["__k0", DELETE, OK, ROWTIME, SEQ, SUB, STREAM_TIME])
        events, states[0] = subscribe(states[0], children) if len(children) else (pd.DataFrame(), states[0])
        parents = pd.DataFrame([{"ppk": f"p{pk % 4}", "pv": None if gone else value, "__k0": f"p{pk % 4}",
                                 DELETE: gone, OK: True, NULL_KEY: False, fk.EVENT: fk.PARENT_CHANGE, **meta(i)}
                                for i, (table, pk, key, value, gone) in batch if table == "parent"])
        both = pd.concat([f for f in (events, parents) if len(f)], ignore_index=True) if len(events) or len(parents) else None
        if both is None:
            continue
        both = both.reindex(columns=CHILD + PARENT + ["__k0", DELETE, OK, NULL_KEY, fk.EVENT, ROWTIME, SEQ, SUB, STREAM_TIME])
        results, states[1] = parent(states[1], both)
        if not len(results):
            continue
        resolved, states[2] = resolve(states[2], results.assign(jk=results["jk"]))
        for rec in resolved.sort_values([SEQ, SUB]).to_dict("records"):
            key = tuple(None if pd.isna(rec[k]) else rec[k] for k in out_key)
            if rec[TOMBSTONE]:
                # Kafka Streams: deleting a child of an INNER join always propagates a tombstone
                assert key in sink or not (child_outer or parent_outer), f"a tombstone for a result never written: {key}"
                sink.pop(key, None)
                tombstones.append((key, rec[ROWTIME]))
            else:
                sink[key] = (None if pd.isna(rec["cv"]) else rec["cv"], None if pd.isna(rec["pv"]) else rec["pv"])
    run.tombstones = tombstones
    return sink


def final_join(changes, child_outer, parent_outer):
    children, parents = {}, {}
    for table, pk, key, value, gone in changes:
        if table == "child":
            children.pop(pk, None) if gone else children.__setitem__(pk, (key, value))
        else:
            parents.pop(f"p{pk % 4}", None) if gone else parents.__setitem__(f"p{pk % 4}", value)
    result = {}
    for pk, (key, value) in children.items():
        if key in parents or child_outer:
            result[(pk, key) if parent_outer else (pk,)] = (value, parents.get(key))
    if parent_outer:
        pointed = {key for key, _ in children.values()}
        result.update({(None, key): (None, value) for key, value in parents.items() if key not in pointed})
    return result


@pytest.mark.parametrize("cold", [False, True], ids=["cached state", "state replayed from its logs"])
@pytest.mark.parametrize("join_type", ["INNER", "LEFT", "RIGHT", "FULL"])
@pytest.mark.parametrize("seed", range(2))
def test_foreign_key_join_materialises_the_join_of_the_final_tables(seed, join_type, cold):
    child_outer, parent_outer = join_type in ("LEFT", "FULL"), join_type in ("RIGHT", "FULL")
    changes = random_changes(seed)
    expected = final_join(changes, child_outer, parent_outer)
    assert run(changes, random.Random(seed).sample(range(1, len(changes)), 9), child_outer, parent_outer, cold) == expected
    if not cold:
        assert run(changes, [], child_outer, parent_outer, cold) == expected
        for cuts in one_at_a_time(seed, len(changes)):
            assert run(changes, cuts, child_outer, parent_outer, cold) == expected


@pytest.mark.parametrize("cuts", [[], [1, 2, 3]], ids=["one batch", "a batch each"])
def test_deleting_an_inner_joins_child_always_emits_a_tombstone(cuts):
    """As Kafka Streams' foreign-key join (and ksqlDB's tests): the child's delete propagates a tombstone even
    when its parent was deleted first and its result row is already gone."""
    changes = [("parent", 0, None, "a", False), ("child", 1, "p0", "c", False),  # p0 <- child 1: a row
               ("parent", 0, None, None, True),  # p0 deleted: the row's tombstone
               ("child", 1, "p0", None, True)]  # child 1 deleted: a tombstone again
    assert run(changes, cuts, False, False, cold=bool(cuts)) == {}
    assert run.tombstones == [((1,), 2), ((1,), 3)]
    assert run(changes, cuts, True, False, cold=False) == {}  # LEFT: the padded row's one tombstone
    assert run.tombstones == [((1,), 3)]
