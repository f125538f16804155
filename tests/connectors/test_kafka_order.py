"""The Kafka source's ingestion order (no broker, no Spark): the vectorised merge equals a head-by-head merge
of the partitions, and merging prefix by prefix — as micro-batches do — gives the same order."""
from __future__ import annotations

import random

import pyarrow as pa
import pytest

from streamjoin.connectors.kafka_client import FETCHED_SCHEMA
from streamjoin.connectors.kafka_source import LAST, NO_KEY, merge
from streamjoin.connectors.topic_store import HEADERS_TYPE

TOPICS = {"a": 0, "b": 1}


def _partitions(seed: int, with_headers: bool) -> dict:
    rng = random.Random(seed)
    out = {}
    for tp in [("a", 0), ("a", 1), ("b", 0)]:
        n = rng.randint(0, 12)
        stamps = [rng.randint(0, 20) for _ in range(n)]  # out of order within a partition, with ties
        orders = [rng.choice([None, rng.randint(0, 30)]) if with_headers else None for _ in range(n)]
        out[tp] = pa.table([pa.array([tp[1]] * n, pa.int32()), pa.array(range(n), pa.int64()), pa.array(stamps, pa.int64()),
                            pa.array([None] * n, pa.binary()), pa.array([b"v"] * n, pa.binary()), pa.array(orders, pa.int64()),
                            pa.nulls(n, HEADERS_TYPE)],
                           schema=FETCHED_SCHEMA)
    return out


def _head_merge(fetched: dict, by_header: bool) -> list:
    """The definition: repeatedly take the head with the smallest order value (ties: topic, partition)."""
    queues = {tp: t.to_pylist() for tp, t in fetched.items()}
    out = []
    while any(queues.values()):
        def value(tp):
            row = queues[tp][0]
            return (LAST if row["order"] is None else row["order"]) if by_header else row["timestamp"]

        heads = [tp for tp in queues if queues[tp]]
        best = min(heads, key=lambda tp: (value(tp), TOPICS[tp[0]], tp[1]))
        out.append((best[0], queues[best].pop(0)["offset"]))
    return out


def _order(batch: pa.Table) -> list:
    return list(zip(batch.column("topic").to_pylist(), batch.column("offset").to_pylist()))


@pytest.mark.parametrize("by_header", [False, True])
@pytest.mark.parametrize("seed", range(25))
def test_merge_is_the_head_merge_and_does_not_depend_on_cuts(seed, by_header):
    fetched = _partitions(seed, by_header)
    whole, _ = merge(fetched, {}, TOPICS, by_header=by_header)
    assert _order(whole) == _head_merge(fetched, by_header)

    # prefix by prefix: each batch takes the first `cut` records of the merge of what is left
    cut, keys, taken, left = random.Random(seed).randint(1, 4), {}, [], dict(fetched)
    while any(t.num_rows for t in left.values()):
        batch, _ = merge(left, keys, TOPICS, by_header=by_header)
        batch = batch.slice(0, cut)
        for topic, partition, offset, key in zip(*(batch.column(c).to_pylist() for c in ("topic", "partition", "offset", "order_key"))):
            keys[(topic, partition)] = key
            left[(topic, partition)] = left[(topic, partition)].slice(1)
            taken.append((topic, offset))
    assert taken == _order(whole)
    assert all(k != NO_KEY for k in keys.values())
