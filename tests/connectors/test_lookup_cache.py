"""The lookup join's cache (``connectors.lookup_cache``), without a database: what it answers after a sequence of
database answers, uses and clock readings, against a plain model of Flink's cache (``Model``) — a key's rows as the
database gave them, kept until more than max-rows keys are held (least recently used out) or its time is up."""
from __future__ import annotations

import random

import pyarrow as pa
import pytest

from streamjoin.connectors.lookup_cache import MAX_CHUNKS, LookupCache

KINDS = {  # the cached rows' schema (its last columns are the key), the key's columns, the keys there are
    "composite": (pa.schema([("name", pa.string()), ("k0", pa.int64()), ("k1", pa.string())]), 2,
                  [(i, s) for i in range(12) for s in ("a", "b")]),
    "integer": (pa.schema([("name", pa.string()), ("k0", pa.int32())]), 1, [(i,) for i in range(-5, 19)]),
    "text": (pa.schema([("name", pa.string()), ("k0", pa.string())]), 1, [(f"id-{i}",) for i in range(24)]),
}


def _table(schema: pa.Schema, rows) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)


def _answer(cache: LookupCache, keys: list[tuple], database: dict, now: float) -> list:
    """What a lookup of ``keys`` returns: the cache's rows, then the database's for the keys it could not answer."""
    key_schema = pa.schema([cache.schema.field(c) for c in cache.key_columns])
    found, unanswered = cache.get(_table(key_schema, keys), now)
    asked = [k for k, u in zip(keys, unanswered.tolist()) if u]
    fetched = _table(cache.schema, [row for k in asked for row in database.get(k, [])])
    cache.put(_table(key_schema, asked), fetched, now)
    return sorted(found.to_pylist() + fetched.to_pylist(), key=str)


class Model:
    def __init__(self, max_rows, write_ttl, access_ttl, missing):
        self.max_rows, self.write_ttl, self.access_ttl, self.missing = max_rows, write_ttl, access_ttl, missing
        self.held: dict = {}  # key -> (rows, written, used), least recently used first

    def answer(self, keys, database, now):
        out, asked = [], []
        for k in keys:
            entry = self.held.pop(k, None)
            if entry and (self.write_ttl is None or now - entry[1] < self.write_ttl) \
                    and (self.access_ttl is None or now - entry[2] < self.access_ttl):
                self.held[k] = (entry[0], entry[1], now)
                out += entry[0]
            else:
                asked.append(k)
        for k in asked:  # the database's answers are kept after the hits
            out += database.get(k, [])
            if database.get(k) or self.missing:
                self.held[k] = (database.get(k, []), now, now)
        while self.max_rows is not None and len(self.held) > self.max_rows:
            del self.held[next(iter(self.held))]
        return sorted((dict(zip(("name", "k0", "k1"), r)) for r in out), key=str)


CASES = [  # max rows, expire after write, after access, cache missing keys
    (None, 50, None, True),
    (None, None, 30, False),
    (8, None, None, True),
    (8, 40, 20, False),
    (1, None, None, True),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("limits", CASES)
def test_the_cache_answers_as_flinks_cache_over_a_long_random_run(limits, kind):
    """Keys of one row, several rows and none; the database changes as time goes on, so a stale answer shows."""
    schema, key_count, universe = KINDS[kind]
    rng = random.Random(hash((limits, kind)) & 0xFFFF)
    cache, model = LookupCache(schema, key_count, *limits), Model(*limits)
    now = 0.0
    for call in range(400):
        now += rng.choice([0, 1, 5, 15])
        database = {k: [(f"{k}@{int(now) // 25}-{j}", *k) for j in range(universe.index(k) % 3)] for k in universe}
        keys = rng.sample(universe, rng.randint(1, 10))
        assert _answer(cache, keys, database, now) == model.answer(keys, database, now), f"call {call}"
        # keys whose rows are cached never exceed max rows, even with slots waiting to be compacted
        assert len(cache) == len(model.held) and len(cache.chunks) <= MAX_CHUNKS


def test_a_hit_never_asks_again_and_a_full_cache_drops_the_least_recently_used():
    schema, _, _ = KINDS["integer"]
    cache = LookupCache(schema, 1, 2, None, None, True)
    database = {(1,): [("x", 1), ("y", 1)], (2,): [("z", 2)]}
    _answer(cache, [(1,), (2,)], database, 0)
    _answer(cache, [(1,)], database, 1)  # used: 2 is now the least recent
    _answer(cache, [(3,)], database, 2)
    assert (1,) in cache and (3,) in cache and (2,) not in cache
    found, unanswered = cache.get(_table(pa.schema([schema.field("k0")]), [(1,), (3,)]), 3)
    assert sorted(found.column("name").to_pylist()) == ["x", "y"] and not unanswered.any()
