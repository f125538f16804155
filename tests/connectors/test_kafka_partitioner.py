"""Kafka's murmur2 and the partition a Java producer picks, on plain data (Kafka's own UtilsTest vectors)."""
from __future__ import annotations

import random

import pyarrow as pa
import pytest

from streamjoin.connectors.kafka_partitioner import murmur2, murmur2_array, partitions_of

# key -> Utils.murmur2 (signed, as Java returns it)
KAFKA_VECTORS = {
    "21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829, "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107, "1": -1993445489, "12": 126087238, "123": -267702483, "1234": -1614185708,
    "12345": -1188365604,
}


def _signed(h: int) -> int:
    return h - (1 << 32) if h >= 1 << 31 else h


@pytest.mark.parametrize("key,expected", KAFKA_VECTORS.items())
def test_murmur2_is_kafkas(key, expected):
    assert _signed(murmur2(key.encode())) == expected


def test_the_column_at_once_hashes_as_one_at_a_time_whatever_the_lengths_and_slicing():
    rng = random.Random(7)
    keys = [bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 2, 3, 4, 5, 8, 13, 63, 64, 65, 300])))
            for _ in range(2000)]
    column = pa.array(keys)
    assert list(murmur2_array(column)) == [murmur2(k) for k in keys]
    assert list(murmur2_array(column.slice(11, 500))) == [murmur2(k) for k in keys[11:511]]
    assert list(murmur2_array(pa.array([k.encode() for k in KAFKA_VECTORS], pa.large_binary()))) == \
        [v % (1 << 32) for v in KAFKA_VECTORS.values()]


@pytest.mark.parametrize("keys,seq,partitions,expected", [
    ([b"21", b"foobar"], None, 1, [0, 0]),
    # toPositive(h) % n: -973932308 & 0x7fffffff = 1173551340
    ([b"21"], None, 7, [1173551340 % 7]),
    ([None, b"abc", None], [5, 6, 9], 4, [5 % 4, 479470107 % 4, 9 % 4]),
    ([None], None, 3, [0]),
])
def test_partitions(keys, seq, partitions, expected):
    got = partitions_of(pa.array(keys, pa.binary()), pa.array(seq, pa.int64()) if seq else None, partitions)
    assert list(got) == expected
