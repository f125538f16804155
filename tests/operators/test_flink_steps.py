"""The Flink joins' per-bucket steps driven with pandas frames (no Spark): random out-of-order inputs under a
watermark, cut into micro-batches at random places, give the same rows as one batch, and state is purged
once the watermark has passed everything; a regular join's changelog, applied to an upsert sink, holds
exactly the join of the final tables."""
from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from streamjoin.operators import regular, stream_stream, temporal
from streamjoin.operators import state as state_module
from streamjoin.operators.pair_condition import compile_condition
from streamjoin.operators.keyed_inputs import BUCKET, DELETE, NULL_KEY, OK, SIDE, TICK
from streamjoin.operators.stream_stream import Window, _bucket_processor
from tests.operators.segmented import as_step, one_at_a_time
from streamjoin.plan.nodes import ROWTIME, SEQ, STREAM_TIME, SUB, Ref
from streamjoin.sql import ast

NO_TIME = -(2 ** 63)
INTERVAL_OUT = ["lv", "rv", "jk", ROWTIME, SEQ, SUB, STREAM_TIME]


def random_inputs(seed: int, n: int = 120, delay: int = 5):
    """(side, key, value, time, delete) records and the watermark after each: per side the largest time
    read minus ``delay``, the minimum over both sides."""
    rnd = random.Random(seed)
    records, clocks, high = [], [], {0: None, 1: None}
    for i in range(n):
        side = rnd.randrange(2)
        t = max(0, i + rnd.randint(-12, 3))  # mostly increasing, some rows late
        records.append((side, rnd.choice("abcd"), f"{'LR'[side]}{i}", t, side == 1 and rnd.random() < 0.1))
        high[side] = t if high[side] is None else max(high[side], t)
        clocks.append(NO_TIME if None in high.values() else min(high.values()) - delay)
    return records, clocks


def frame(records, clocks, first_seq):
    data = [{SIDE: side, "__k0": key, "lv": value if side == 0 else None, "rv": value if side == 1 else None,
             ROWTIME: t, SEQ: first_seq + i, SUB: 0, STREAM_TIME: None if c == NO_TIME else c, OK: True,
             NULL_KEY: False, DELETE: delete, BUCKET: 0}
            for i, ((side, key, value, t, delete), c) in enumerate(zip(records, clocks))]
    last = clocks[-1]
    data.append({SIDE: TICK, SEQ: first_seq + len(records) - 1, STREAM_TIME: None if last == NO_TIME else last,
                 ROWTIME: 0, BUCKET: 0})
    data = pd.DataFrame(data)
    # as lowering gives an interval join's rows: each side's clock is the query's (the watermark)
    return data.assign(**{stream_stream.LEFT_CLOCK: data[STREAM_TIME], stream_stream.RIGHT_CLOCK: data[STREAM_TIME]})


def run(step, records, clocks, cuts):
    state, rows = None, []
    bounds = [0] + sorted(cuts) + [len(records)]
    for a, b in zip(bounds, bounds[1:]):
        if a == b:
            continue
        batch = frame(records[a:b], clocks[a:b], a)
        out, state = step(state, batch)
        # then a batch that brings this bucket only the clock, as when the batch's records are all elsewhere
        out = pd.concat([out, step(state, batch[batch[SIDE] == TICK])[0]])
        if len(out):
            rows += [(None if pd.isna(l) else l, None if pd.isna(r) else r)
                     for l, r in zip(out["lv"], out["rv"])]
    return sorted(rows, key=repr), state


# a further ON condition over both inputs (Flink): string comparisons that some pairs fail
CONDITION = ast.BinaryOp("OR", ast.BinaryOp(">", Ref("lv", "string"), ast.Literal("L5", "string")),
                         ast.BinaryOp("<", Ref("rv", "string"), ast.Literal("R3", "string")))


def interval_step(join_type, width=None, condition=None):
    """The interval join's segmented step as a step over (meta, segments); ``width``: segment width in ms."""
    w = Window(before=3, after=4, grace=0, eager=False, outer_left=join_type in ("LEFT", "FULL"),
               outer_right=join_type in ("RIGHT", "FULL"), watermark=True,
               condition=compile_condition(condition) if condition is not None else None)
    return as_step(_bucket_processor(w, ["__k0"], ["lv"], ["rv"], ["jk"], INTERVAL_OUT, width), idle=stream_stream._idle(w))


def narrow_interval_step(join_type):
    return interval_step(join_type, width=2)  # records spread over many segments


def conditional_interval_step(join_type):
    return interval_step(join_type, width=2, condition=CONDITION)


def temporal_step(join_type, cold=False):
    return as_step(temporal._bucket_step(["__k0"], [], ["lv"], ["rv"], ["jk"], join_type == "LEFT"), cold, temporal._idle)


def cold_temporal_step(join_type):
    return temporal_step(join_type, cold=True)  # every batch replays the base from its log


STEPS = [(name, make, t) for name, make in (("interval", interval_step), ("interval-narrow", narrow_interval_step),
                                            ("interval-condition", conditional_interval_step))
         for t in ("INNER", "LEFT", "RIGHT", "FULL")] + [
    (name, make, t) for name, make in (("temporal", temporal_step), ("temporal-cold", cold_temporal_step))
    for t in ("INNER", "LEFT")]


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("name,make,join_type", STEPS, ids=[f"{s[0]}-{s[2]}" for s in STEPS])
def test_output_does_not_depend_on_batch_cuts(name, make, join_type, seed):
    records, clocks = random_inputs(seed)
    whole, _ = run(make(join_type), records, clocks, [])
    for cuts in one_at_a_time(seed, len(records)):
        assert run(make(join_type), records, clocks, cuts)[0] == whole
    rnd = random.Random(seed)
    step = make(join_type)
    random_cuts, _ = run(step, records, clocks, rnd.sample(range(1, len(records)), 9))
    assert whole == random_cuts
    assert step.skipped  # some clock-only batches were idle
    assert whole  # the inputs do produce rows


@pytest.mark.parametrize("join_type", ["INNER", "LEFT", "RIGHT", "FULL"])
def test_interval_output_does_not_depend_on_the_segment_width(join_type):
    records, clocks = random_inputs(3)
    cuts = random.Random(3).sample(range(1, len(records)), 15)
    assert run(interval_step(join_type), records, clocks, cuts)[0] == run(narrow_interval_step(join_type), records, clocks, cuts)[0]


@pytest.mark.parametrize("name,make,join_type", STEPS, ids=[f"{s[0]}-{s[2]}" for s in STEPS])
def test_state_is_purged_by_the_watermark(name, make, join_type):
    records, clocks = random_inputs(7)
    # both sides jump far ahead: every earlier record is closed (interval) or emitted (temporal)
    end = records[-1][3] + 1000
    tail = [(0, "z", "Lend", end, False), (1, "z", "Rend", end, False)]
    records, clocks = records + tail, clocks + [clocks[-1], end - 5]
    _, state = run(make(join_type), records, clocks, [40, 80])
    if name.startswith("interval"):
        meta, segments = state
        stored = pd.concat(segments.frames.values())
        assert set(np.asarray(stored["__k0"])) <= {"z"} and meta["rows"] == len(stored)
    else:  # per key only the version valid at the watermark (the base), and the versions after it
        meta, segments = state
        pending = segments.frames.get(temporal.PENDING, pd.DataFrame(columns=["__k0"]))
        waiting = segments.frames.get(temporal.WAITING, pd.DataFrame(columns=["__k0"]))
        assert set(np.asarray(pending.iloc[:, 0])) <= {"z"}  # the tail's version, after the watermark
        assert len(waiting) <= 1  # only the last stream record, at the watermark itself
        base = state_module.read_frame(meta["table"], segments, ["__k0"], ["rv"])
        assert base["__k0"].is_unique and meta["rows"] == len(base) + len(pending) + len(waiting)


# ------------------------------------------------------------------ regular join of two upsert tables

def table_changes(seed: int, n: int = 80):
    """Random upserts and deletes of rows (side, pk) whose join key ('a'..'c') may change."""
    rnd = random.Random(seed)
    return [(rnd.randrange(2), f"p{rnd.randrange(6)}", rnd.choice("abc"), rnd.random() < 0.2, f"v{i}") for i in range(n)]


# a pair passes when its left value sorts before its right one ("v12" < "v40"), as ON ... AND l.lv < r.rv
VALUES_IN_ORDER = ast.BinaryOp("<", Ref("lv", "string"), Ref("rv", "string"))


def regular_run(changes, cuts, join_type, cold=False, condition=None, kinds="TT"):
    """``changes`` through both stages of a regular join, cut at ``cuts``, into an upsert sink keyed by both rows'
    identities. ``kinds``: each side a table ("T": a change upserts or deletes its primary key's row) or a stream
    ("S": every change but a delete appends a row of its own)."""
    cols = {0: ["lpk", "lv"], 1: ["rpk", "rv"]}
    versions = {side: as_step(regular._versions_step(cols[side], ["__k0"], None, cols[side] + [
        "__k0", SIDE, OK, regular.RETRACT, regular.ROW_ID, ROWTIME, SEQ, SUB, STREAM_TIME]), cold) for side in (0, 1)}
    identities = [("pk", [cols[s][0]]) if kinds[s] == "T" else ("row", f"__row{s}") for s in (0, 1)]
    out_names = ["lpk", "lv", "rpk", "rv", "jk", "__row0", "__row1", ROWTIME, SEQ, SUB, STREAM_TIME, "_tombstone"]
    join = as_step(regular._join_step(["__k0"], cols[0], cols[1], ["jk"], identities, join_type,
                                      None, out_names, condition and compile_condition(condition)), cold)
    states, join_state, written = {0: None, 1: None}, None, {}
    bounds = [0] + sorted(cuts) + [len(changes)]
    for a, b in zip(bounds, bounds[1:]):
        messages = []
        for side in (0, 1):
            rows = [{cols[side][0]: pk, cols[side][1]: None if delete else value, "__k0": None if delete else key,
                     SIDE: side, OK: True, DELETE: delete, regular.ROW_ID: f'["{pk}"]', ROWTIME: i, SEQ: i, SUB: 0,
                     STREAM_TIME: i}
                    for i, (s, pk, key, delete, value) in enumerate(changes[a:b], start=a) if s == side]
            if kinds[side] == "S":  # as ``regular._changes`` makes a stream's records: inserts with their own identity
                rows = [dict(r, **{regular.RETRACT: False, regular.ROW_ID: f"{r[SEQ]}:0", SUB: 1})
                        for r in rows if not r.pop(DELETE)]
                if rows:
                    messages.append(pd.DataFrame(rows))
            elif rows:
                out, states[side] = versions[side](states[side], pd.DataFrame(rows))
                messages.append(out)
        if not messages:
            continue
        out, join_state = join(join_state, pd.concat(messages, ignore_index=True))
        for rec in out.sort_values([SEQ, SUB]).to_dict("records"):  # an upsert sink keyed by both rows' identities
            key = tuple(_text(rec[f"__row{s}"] if kinds[s] == "S" else rec[cols[s][0]]) for s in (0, 1))
            if rec["_tombstone"] is True or rec["_tombstone"] == 1:  # (absent from a stream's rows: NaN)
                assert key in written, f"tombstone for a result never written: {key}"
                del written[key]
            else:
                written[key] = (_text(rec["lv"]), _text(rec["rv"]))
    return written


def _text(value):
    return value if isinstance(value, str) else None


def final_join(changes, join_type, condition=False, kinds="TT"):
    """The join of the final tables: pairs with equal keys (and, with ``condition``, values in order); on a
    preserved side, each row that pairs with nothing. A stream side's table holds every record appended."""
    tables = {0: {}, 1: {}}
    for i, (side, pk, key, delete, value) in enumerate(changes):
        if kinds[side] == "S":
            if not delete:
                tables[side][f"{i}:0"] = (key, value)
        else:
            tables[side].pop(pk, None) if delete else tables[side].__setitem__(pk, (key, value))

    def pair(left, right):
        return left[0] == right[0] and (not condition or left[1] < right[1])

    if join_type in ("SEMI", "ANTI"):  # the left rows with (without) a pair
        return {(lpk, None): (l[1], None) for lpk, l in tables[0].items()
                if any(pair(l, r) for r in tables[1].values()) == (join_type == "SEMI")}
    result = {(lpk, rpk): (l[1], r[1]) for lpk, l in tables[0].items() for rpk, r in tables[1].items() if pair(l, r)}
    if join_type in ("LEFT", "FULL"):
        result.update({(lpk, None): (l[1], None) for lpk, l in tables[0].items() if not any(pair(l, r) for r in tables[1].values())})
    if join_type in ("RIGHT", "FULL"):
        result.update({(None, rpk): (None, r[1]) for rpk, r in tables[1].items() if not any(pair(l, r) for l in tables[0].values())})
    return result


@pytest.mark.parametrize("cold", [False, True], ids=["cached state", "state replayed from its log"])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("join_type", ["INNER", "LEFT", "RIGHT", "FULL", "SEMI", "ANTI"])
def test_regular_join_changelog_materialises_the_join_of_the_final_tables(join_type, seed, cold):
    changes = table_changes(seed)
    expected = final_join(changes, join_type)
    assert regular_run(changes, random.Random(seed).sample(range(1, len(changes)), 7), join_type, cold) == expected
    if not cold:  # (replaying the log every batch is slow to drive one record at a time)
        assert regular_run(changes, [], join_type) == expected
        for cuts in one_at_a_time(seed, len(changes)):
            assert regular_run(changes, cuts, join_type) == expected


@pytest.mark.parametrize("kinds", ["ST", "TS", "SS"], ids=["stream-table", "table-stream", "stream-stream"])
@pytest.mark.parametrize("join_type", ["INNER", "LEFT", "RIGHT", "FULL", "SEMI", "ANTI"])
def test_a_regular_join_with_stream_inputs_materialises_the_join_of_every_record(join_type, kinds):
    """A stream side is a table that only grows, each record a row of its own identity: whatever the cuts, the
    changelog (a stream side's rows keyed by their record) holds the join of every record with the final table,
    with and without ON's further condition."""
    changes = table_changes(4)
    for condition in (None, VALUES_IN_ORDER):
        expected = final_join(changes, join_type, condition is not None, kinds)
        for cuts in ([], random.Random(4).sample(range(1, len(changes)), 9)):
            assert regular_run(changes, cuts, join_type, condition=condition, kinds=kinds) == expected


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("join_type", ["INNER", "LEFT", "RIGHT", "FULL", "SEMI", "ANTI"])
def test_a_regular_join_condition_decides_pairs_padding_and_retractions(join_type, seed):
    """ON's further condition, evaluated pair by pair: the changelog still materialises the final tables' join,
    a row whose every pair fails it padded (outer joins), whatever the batch cuts."""
    changes = table_changes(seed)
    expected = final_join(changes, join_type, condition=True)
    if join_type not in ("SEMI", "ANTI"):  # (for one seed the condition changes no left row's having a pair)
        assert expected != final_join(changes, join_type)
    for cuts in [[], random.Random(seed).sample(range(1, len(changes)), 7)] + one_at_a_time(seed, len(changes)):
        assert regular_run(changes, cuts, join_type, condition=VALUES_IN_ORDER) == expected


@pytest.mark.parametrize("join_type", ["INNER", "LEFT", "RIGHT", "FULL"])
def test_an_interval_condition_drops_failing_pairs_and_pads_their_records(join_type):
    records, clocks = random_inputs(5)
    plain, _ = run(interval_step(join_type), records, clocks, [30, 60])
    conditional, _ = run(conditional_interval_step(join_type), records, clocks, [30, 60])
    passes = lambda l, r: l > "L5" or r < "R3"  # noqa: E731 - CONDITION, in Python
    pairs = lambda rows: {(l, r) for l, r in rows if l is not None and r is not None}  # noqa: E731
    assert pairs(conditional) == {(l, r) for l, r in pairs(plain) if passes(l, r)}
    assert pairs(conditional) != pairs(plain)  # the inputs have failing pairs
    if join_type != "INNER":  # a preserved record is padded exactly when none of its pairs passes
        side = 0 if join_type in ("LEFT", "FULL") else 1
        matched = {p[side] for p in pairs(conditional)}
        padded = {row[side] for row in conditional if None in row and row[side] is not None}
        span = 4 if side == 0 else 3  # a record's close: its time + after (left) or + before (right)
        closed = {rec[2] for rec in records if rec[0] == side and rec[3] + span < clocks[-1]}
        assert padded & matched == set() and padded <= {rec[2] for rec in records if rec[0] == side}
        assert closed - matched <= padded
