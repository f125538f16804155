"""The partition a Java Kafka producer (Kafka Streams, ksqlDB, Flink's Kafka sink) picks for a keyed record,
computed for a whole Arrow column at once.

Java's default partitioner takes ``toPositive(murmur2(key bytes)) % partitions`` (``Utils.murmur2``; librdkafka's
``murmur2_random`` is the same for a key). Kafka's murmur2 reads the key as little-endian 32-bit words: each word
is mixed (``k *= m; k ^= k >>> 24; k *= m``) into ``h`` (``h *= m; h ^= k``), starting from ``seed ^ length``;
the last 1-3 bytes are XORed in and multiplied once more; then ``h ^= h >>> 13; h *= m; h ^= h >>> 15``.

Vectorised: the keys are laid side by side as a zero-padded byte matrix (one row per key), so each of the
longest key's words is one numpy step over all keys, a key's own words chosen by its length. Keys longer than
``PADDED_LIMIT`` bytes (whose padding would cost more than it saves) are hashed one at a time.

A record without a key has no hash: Java spreads such records over partitions as it goes ("sticky"); streamjoin
places one by its ingestion order (``seq % partitions``), so a re-run micro-batch places it where it went before.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa

SEED = 0x9747B28C
M = 0x5BD1E995
MASK = 0xFFFFFFFF
PADDED_LIMIT = 64


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of one key, as an unsigned 32-bit number (``Utils.murmur2`` is the same bits, signed)."""
    length = len(data)
    h = (SEED ^ length) & MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = (int.from_bytes(data[i:i + 4], "little") * M) & MASK
        k ^= k >> 24
        k = (k * M) & MASK
        h = ((h * M) & MASK) ^ k
    if length % 4:
        h ^= int.from_bytes(data[whole:], "little")
        h = (h * M) & MASK
    h ^= h >> 13
    h = (h * M) & MASK
    return h ^ (h >> 15)


def murmur2_array(keys: pa.Array) -> np.ndarray:
    """``murmur2`` of every key of a binary column (uint32; a null key hashes as an empty one)."""
    keys = keys.cast(pa.large_binary())
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.uint32)
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int64)[keys.offset:keys.offset + n + 1]
    data = keys.buffers()[2]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    lengths = offsets[1:] - offsets[:-1]
    hashes = np.zeros(n, dtype=np.uint32)
    short = lengths <= PADDED_LIMIT
    if short.any():
        hashes[short] = _padded(data, offsets[:-1][short], lengths[short])
    for i in np.flatnonzero(~short):
        hashes[i] = murmur2(bytes(data[offsets[i]:offsets[i + 1]]))
    return hashes


def _padded(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    width = int(-(-int(lengths.max(initial=0)) // 4) * 4) or 4
    column = np.arange(width)
    inside = column[None, :] < lengths[:, None]
    matrix = np.zeros((len(starts), width), dtype=np.uint8)
    if len(data):
        matrix[inside] = data[(starts[:, None] + column[None, :])[inside]]
    words = matrix.view("<u4")  # rows are contiguous and a multiple of 4 bytes: one little-endian word per column
    m = np.uint32(M)
    h = np.uint32(SEED) ^ lengths.astype(np.uint32)
    whole = lengths // 4
    for j in range(words.shape[1]):
        k = words[:, j] * m
        k ^= k >> np.uint32(24)
        k *= m
        h = np.where(whole > j, (h * m) ^ k, h)
    rest = lengths % 4
    # the tail's bytes, read as a little-endian number: the padding beyond the key is zero
    tail_at = np.minimum(whole, words.shape[1] - 1)
    tail = np.where(rest > 0, words[np.arange(len(h)), tail_at], np.uint32(0))
    h = np.where(rest > 0, (h ^ tail) * m, h)
    h ^= h >> np.uint32(13)
    h *= m
    return h ^ (h >> np.uint32(15))


def partitions_of(keys: pa.Array, seq: Optional[pa.Array], partitions: int) -> np.ndarray:
    """The partition of each record (module docstring): by its key's hash, or by its ``seq`` without a key."""
    if partitions <= 1:
        return np.zeros(len(keys), dtype=np.int32)
    by_key = (murmur2_array(keys) & np.uint32(0x7FFFFFFF)) % np.uint32(partitions)
    keyless = keys.is_null().to_numpy(zero_copy_only=False)
    if keyless.any():
        order = seq.fill_null(0).to_numpy(zero_copy_only=False) if seq is not None else np.zeros(len(keys), np.int64)
        by_key = np.where(keyless, order % partitions, by_key)
    return by_key.astype(np.int32)
