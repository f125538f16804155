"""The rows a lookup join read from a database, kept per key within a 'jdbc' table's 'lookup.partial-cache.*' limits
(Flink's ``DefaultLookupCache``): at most ``max_rows`` keys, least recently used first out; a key's rows expire
``expire_after_write`` after they were read and ``expire_after_access`` after they were last used; a key without
rows is kept too unless ``cache_missing_key`` is false.

Work per call follows the keys asked for, not what the cache holds, and is vectorised:
- ``index`` maps a key to its slot, a position in the numpy arrays that hold, per slot, when it was written and
  used, its use order (for LRU), and where its rows are: chunk, first row, row count. A key of one integer column
  is found by binary search in a sorted array of the cached keys (``_SortedIndex``); any other key by a dictionary
  of the tuples of its values (``_TupleIndex``, one C loop of ``dict.get``). Expiry is checked on the arrays.
- Rows are kept as the Arrow tables the database returned (``chunks``), sorted by key so that a key's rows are
  adjacent; a hit costs no Python per row: the rows of all hits in a chunk are taken at once.
- Evicting (over ``max_rows``) and expiring only mark slots dead and drop their keys from ``index``. When dead
  rows or chunks pile up (``_compact``), the live rows are copied into one chunk and the slot arrays rebuilt:
  at most once per as many evictions as there are live keys, so its cost is spread over the calls that caused it.
"""
from __future__ import annotations

from itertools import repeat
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAX_CHUNKS = 16  # more chunks than this and the live rows are copied into one (``_compact``)


class LookupCache:
    def __init__(self, schema: pa.Schema, key_count: int, max_rows: Optional[int], expire_after_write_ms: Optional[float],
                 expire_after_access_ms: Optional[float], cache_missing_key: bool):
        """``schema``: the rows kept, whose last ``key_count`` columns are the key."""
        self.schema, self.key_columns = schema, schema.names[-key_count:]
        self.max_rows, self.missing = max_rows, cache_missing_key
        self.write_ttl, self.access_ttl = expire_after_write_ms, expire_after_access_ms
        one_integer = key_count == 1 and pa.types.is_integer(schema.field(schema.names[-1]).type)
        self.index = _SortedIndex() if one_integer else _TupleIndex()
        self.size = 0  # slots in use, live or dead; per slot (the arrays' first ``size`` entries):
        self.written = np.empty(0, np.float64)
        self.used = np.empty(0, np.float64)
        self.order = np.empty(0, np.int64)  # when it was last used, in uses of any key (LRU order)
        self.chunk = np.empty(0, np.int32)  # its rows' chunk; -1: it has none; -2: dead
        self.first = np.empty(0, np.int64)
        self.count = np.empty(0, np.int64)
        self.chunks: list[pa.Table] = []
        self.uses = 0
        self.dead = 0  # dead slots not yet compacted away

    def __len__(self) -> int:
        return len(self.index)

    def __contains__(self, key: tuple) -> bool:
        values = pa.table({c: [v] for c, v in zip(self.key_columns, key)},
                          schema=pa.schema([self.schema.field(c) for c in self.key_columns]))
        return bool(self.index.find(values)[0] >= 0)

    def get(self, keys: pa.Table, now: float) -> tuple[pa.Table, np.ndarray]:
        """The cached rows of ``keys`` (distinct; the key columns, named and typed as ``schema``'s last ones) that
        are still fresh, marked used at ``now``, and a mask of the keys the cache could not answer (absent or
        expired)."""
        slots = self.index.find(keys)
        known = slots >= 0
        fresh = known.copy()
        if self.write_ttl is not None:
            fresh[known] &= now - self.written[slots[known]] < self.write_ttl
        if self.access_ttl is not None:
            fresh[known] &= now - self.used[slots[known]] < self.access_ttl
        self._kill(slots[known & ~fresh])
        hit = slots[fresh]
        self.used[hit] = now
        self._use(hit)
        return self._rows_of(hit), ~fresh

    def put(self, keys: pa.Table, rows: pa.Table, now: float) -> None:
        """Keep ``rows``, the database's answer for ``keys`` (distinct, none of them cached), per key, as used
        last, in the order of ``keys``."""
        if rows.num_rows:
            rows = rows.take(pc.sort_indices(rows, [(c, "ascending") for c in self.key_columns]))
            starts = _group_starts(rows, self.key_columns)
            self._add(rows.select(self.key_columns).take(pa.array(starts)), len(self.chunks), starts,
                      np.diff(np.append(starts, rows.num_rows)), now)
            self.chunks.append(rows)
        if self.missing:
            absent = keys.filter(pa.array(self.index.find(keys) < 0))
            self._add(absent, -1, np.zeros(absent.num_rows, np.int64), np.zeros(absent.num_rows, np.int64), now)
        slots = self.index.find(keys)
        self._use(slots[slots >= 0])
        if self.max_rows is not None and len(self.index) > self.max_rows:
            live, over = self._live(), len(self.index) - self.max_rows
            self._kill(live[np.argpartition(self.order[live], over - 1)[:over]])
        if self.dead > len(self.index) or len(self.chunks) > MAX_CHUNKS:
            self._compact()

    # ------------------------------------------------------------------ slots

    def _use(self, slots: np.ndarray) -> None:
        self.order[slots] = self.uses + np.arange(len(slots))
        self.uses += len(slots)

    def _live(self) -> np.ndarray:
        return np.flatnonzero(self.chunk[:self.size] >= -1)

    def _add(self, keys: pa.Table, chunk: int, first: np.ndarray, count: np.ndarray, now: float) -> None:
        base, n = self.size, keys.num_rows
        if base + n > len(self.chunk):
            capacity = max(2 * len(self.chunk), base + n, 1024)
            for name in ("written", "used", "order", "chunk", "first", "count"):
                old = getattr(self, name)
                grown = np.empty(capacity, old.dtype)
                grown[:base] = old[:base]
                setattr(self, name, grown)
        self.index.add(keys, base)
        new = slice(base, base + n)
        self.written[new] = self.used[new] = now
        self.chunk[new] = chunk
        self.first[new], self.count[new] = first, count
        self.size += n

    def _kill(self, slots: np.ndarray) -> None:
        if len(slots):
            self.index.remove(slots, self.size)
            self.chunk[slots] = -2  # dead
            self.dead += len(slots)

    def _rows_of(self, slots: np.ndarray) -> pa.Table:
        slots = slots[self.count[slots] > 0]
        if not len(slots):
            return self.schema.empty_table()
        parts = []
        for chunk in np.unique(self.chunk[slots]).tolist():
            mine = slots[self.chunk[slots] == chunk]
            parts.append(self.chunks[chunk].take(pa.array(_ranges(self.first[mine], self.count[mine]))))
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _compact(self) -> None:
        """Copy the live rows into one chunk and renumber the live slots from 0 (their order kept)."""
        live = self._live()
        with_rows = live[self.count[live] > 0]
        rows = self._rows_of(with_rows)  # chunk by chunk, in slot order within each
        by_chunk = with_rows[np.argsort(self.chunk[with_rows], kind="stable")]
        first = np.zeros(self.size, np.int64)
        first[by_chunk] = np.cumsum(self.count[by_chunk]) - self.count[by_chunk]
        self.first = first[live]
        self.chunk = np.where(self.count[live] > 0, 0, -1).astype(np.int32)
        self.chunks = [rows.combine_chunks()] if len(with_rows) else []
        self.index.renumber(live, self.size)
        self.written, self.used = self.written[live], self.used[live]
        self.order, self.count = self.order[live], self.count[live]
        self.size, self.dead = len(live), 0


class _TupleIndex:
    """Keys of any types and any number of columns: a dictionary from the tuple of a key's values to its slot."""

    def __init__(self):
        self.slots: dict[tuple, int] = {}
        self.keys: list = []  # slot -> its key (None once removed)

    def __len__(self) -> int:
        return len(self.slots)

    def find(self, keys: pa.Table) -> np.ndarray:
        """The slot of each key, -1 where there is none."""
        return np.fromiter(map(self.slots.get, _tuples(keys), repeat(-1)), np.int64, keys.num_rows)

    def add(self, keys: pa.Table, first_slot: int) -> None:
        """``keys`` (none of them here) in slots ``first_slot``, ``first_slot`` + 1, ..."""
        tuples = _tuples(keys)
        self.keys.extend(tuples)
        self.slots.update(zip(tuples, range(first_slot, first_slot + len(tuples))))

    def remove(self, slots: np.ndarray, size: int) -> None:
        for slot in slots.tolist():
            del self.slots[self.keys[slot]]
            self.keys[slot] = None

    def renumber(self, live: np.ndarray, size: int) -> None:
        """Slot ``live[i]`` becomes slot ``i``; the others are gone."""
        self.keys = [self.keys[s] for s in live.tolist()]
        self.slots = dict(zip(self.keys, range(len(self.keys))))


class _SortedIndex:
    """Keys of one integer column: the keys held, sorted, beside their slots; found by binary search."""

    def __init__(self):
        self.keys = np.empty(0, np.int64)
        self.slots = np.empty(0, np.int64)

    def __len__(self) -> int:
        return len(self.keys)

    def find(self, keys: pa.Table) -> np.ndarray:
        values = _integers(keys)
        if not len(self.keys):
            return np.full(len(values), -1, np.int64)
        at = np.minimum(np.searchsorted(self.keys, values), len(self.keys) - 1)
        return np.where(self.keys[at] == values, self.slots[at], -1)

    def add(self, keys: pa.Table, first_slot: int) -> None:
        values = _integers(keys)
        order = np.argsort(values, kind="stable")
        at = np.searchsorted(self.keys, values[order])
        self.keys = np.insert(self.keys, at, values[order])
        self.slots = np.insert(self.slots, at, first_slot + order)

    def remove(self, slots: np.ndarray, size: int) -> None:
        gone = np.zeros(size, bool)
        gone[slots] = True
        kept = ~gone[self.slots]
        self.keys, self.slots = self.keys[kept], self.slots[kept]

    def renumber(self, live: np.ndarray, size: int) -> None:
        renumbered = np.full(size, -1, np.int64)
        renumbered[live] = np.arange(len(live))
        self.slots = renumbered[self.slots]


def _tuples(keys: pa.Table) -> list[tuple]:
    return list(zip(*(column.to_pylist() for column in keys.columns)))


def _integers(keys: pa.Table) -> np.ndarray:
    return keys.column(0).to_numpy().astype(np.int64, copy=False)


def _group_starts(rows: pa.Table, columns: list[str]) -> np.ndarray:
    """The first row of each run of equal keys in ``rows`` (sorted by them)."""
    change = np.zeros(rows.num_rows, bool)
    change[0] = True
    for c in columns:
        values = rows.column(c)
        change[1:] |= pc.not_equal(values.slice(1), values.slice(0, rows.num_rows - 1)).to_numpy(zero_copy_only=False)
    return np.flatnonzero(change)


def _ranges(first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The row positions ``first[i] .. first[i] + count[i] - 1`` of every i, concatenated."""
    ends = np.cumsum(count)
    return np.repeat(first - ends + count, count) + np.arange(ends[-1] if len(ends) else 0)
