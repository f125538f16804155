"""JSON values decoded in the source reader with pyarrow, so that Spark need not parse them.

Spark's ``from_json`` is the reference decoder (``lower.decode``), and it is slow: on the stream-table
benchmark it is more than a third of the query's CPU, all of it on the task's JVM thread. A source reader
runs in its own Python process and hands Spark Arrow batches, so it can decode there with pyarrow's
C++ parser instead, and Spark takes the columns as they come.

The reader is asked, per topic, for the value columns of one JSON source (the ``decode`` option: JSON,
``[[topic, [[name, type], ...]], ...]``). It adds one struct column per such topic (``decoded_column``): the
value's columns, or null where it did not decode the record. There Spark's ``from_json`` decodes it, so
the reader only ever takes work away; what it decodes must be exactly what Spark would decode:
- only sources whose value columns all have a type in ``PYARROW_TYPES``, which pyarrow reads with
  Spark's rules (an INT field holding ``5.0``, ``"5"`` or ``2147483648`` is an error to both, a DOUBLE
  takes an integer, a field of another name is ignored);
- only values that are one object on one line: the text starts with ``{``, ends with ``}``, has no line
  break, and does not name Spark's corrupt-record column;
- records go to pyarrow in chunks of ``CHUNK`` values, one per line (and on to Spark a chunk at a time,
  so Spark works on one chunk while the reader decodes the next); a chunk pyarrow rejects (any error:
  bad syntax, a type it would not convert, a name twice, bytes that are not UTF-8) or that yields another
  number of rows (``{..}{..}`` on one line) is left to Spark whole.
"""
from __future__ import annotations

import json
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

PYARROW_TYPES = {"int": pa.int32(), "integer": pa.int32(), "bigint": pa.int64(), "double": pa.float64(),
                 "string": pa.string(), "boolean": pa.bool_()}
CHUNK = 8192
CORRUPT = "__corrupt"  # Spark's corrupt-record column (lower.decode): a value naming it is left to Spark


def decodable(columns: list[tuple[str, str]]) -> bool:
    """Whether the reader can decode values with these ``(name, Spark type)`` columns."""
    return bool(columns) and all(t.lower() in PYARROW_TYPES for _, t in columns)


def decoded_column(topic: str) -> str:
    return f"decoded:{topic}"


def decode_plan(option: Optional[str]) -> list[tuple[str, pa.StructType]]:
    """``(topic, struct type)`` per decoded topic, in column order, from the ``decode`` option."""
    if not option:
        return []
    return [(topic, pa.struct([(name, PYARROW_TYPES[t.lower()]) for name, t in columns]))
            for topic, columns in json.loads(option)]


def decode_option(topics: list[tuple[str, list[tuple[str, str]]]]) -> str:
    return json.dumps([[topic, [list(c) for c in columns]] for topic, columns in topics])


def decoded_fields(plan: list[tuple[str, pa.StructType]]) -> list[pa.Field]:
    return [pa.field(decoded_column(topic), struct) for topic, struct in plan]


def with_decoded(rows: pa.Table, plan: list[tuple[str, pa.StructType]]) -> Iterator[pa.RecordBatch]:
    """``rows`` (source rows: ``topic``, ``value``, ...) as record batches of at most ``CHUNK`` rows, each with
    the decoded columns of ``plan`` appended: Spark takes each batch as soon as it is decoded."""
    if not plan:
        yield from rows.to_batches()
        return
    names = rows.schema.names + [f.name for f in decoded_fields(plan)]
    for batch in rows.to_batches(max_chunksize=CHUNK):
        columns = decode_columns(batch.column("topic"), batch.column("value"), plan)
        yield pa.RecordBatch.from_arrays(batch.columns + columns, names=names)


def decode_columns(topic: pa.Array, value: pa.Array, plan: list[tuple[str, pa.StructType]]) -> list[pa.Array]:
    """One struct array per decoded topic: the decoded value of that topic's records, null elsewhere."""
    shaped = _one_object(value)
    return [_decode(value, pc.and_(pc.fill_null(pc.equal(topic, name), False), shaped), struct) for name, struct in plan]


def _one_object(value: pa.Array) -> pa.Array:
    """True where the value is one JSON object on one line that does not name the corrupt-record column."""
    shaped = pc.and_(pc.starts_with(value, "{"), pc.ends_with(value, "}"))
    for needle in ("\n", "\r", CORRUPT):
        shaped = pc.and_not(shaped, pc.match_substring(value, needle))
    return pc.fill_null(shaped, False)


def _decode(value: pa.Array, eligible: pa.Array, struct: pa.StructType) -> pa.Array:
    rows = len(value)
    positions = pc.indices_nonzero(eligible).to_numpy()
    if not len(positions):
        return pa.nulls(rows, struct)
    taken = value.take(positions)
    schema = pa.schema(list(struct))
    pieces, decoded = [], []
    for start in range(0, len(taken), CHUNK):
        chunk = taken.slice(start, CHUNK)
        table = _parse(chunk, schema)
        if table is not None:
            pieces.append(positions[start:start + len(chunk)])
            decoded.append(pa.StructArray.from_arrays([table.column(f.name).combine_chunks() for f in struct],
                                                      fields=list(struct)))
    if not decoded:
        return pa.nulls(rows, struct)
    at = np.full(rows, -1, dtype=np.int64)
    done = np.concatenate(pieces)
    at[done] = np.arange(len(done))
    return pa.concat_arrays(decoded).take(pa.array(at, mask=at < 0))


def _parse(chunk: pa.Array, schema: pa.Schema) -> Optional[pa.Table]:
    """The chunk's values as rows of ``schema``, or None if pyarrow cannot read them one row per value."""
    try:
        chunk.cast(pa.string())  # pyarrow's parser takes bytes that are not UTF-8 into its strings as they are
        lines = pa.ListArray.from_arrays(pa.array([0, len(chunk)], pa.int32()), chunk)
        text = pc.binary_join(lines, b"\n")[0].as_buffer()
        table = pj.read_json(pa.BufferReader(text), read_options=pj.ReadOptions(use_threads=False, block_size=max(text.size, 1 << 20)),
                             parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError, ValueError):
        return None
    return table if table.num_rows == len(chunk) else None
