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
  Spark's rules (a DOUBLE takes an integer, a field of another name is ignored); a chunk holding a value
  pyarrow will not convert (an INT field holding ``5.0``, ``"5"`` or ``2147483648``) is left to Spark, which
  refuses it or, for a ksqlDB source, coerces it as ksqlDB does (``lower.decode``); a TIMESTAMP is read as
  text and converted by Arrow only when every text of the chunk has a plain shape (``TIMESTAMP_TEXT``);
- only values that are one object on one line: the text starts with ``{``, ends with ``}``, has no line
  break, and does not name Spark's corrupt-record column;
- records go to pyarrow in chunks of ``CHUNK`` values, one per line (and on to Spark a chunk at a time,
  so Spark works on one chunk while the reader decodes the next); a chunk pyarrow rejects (any error:
  bad syntax, a type it would not convert, a name twice, bytes that are not UTF-8) or that yields another
  number of rows (``{..}{..}`` on one line) is left to Spark whole.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from .formats import REGISTRY_FRAME

PYARROW_TYPES = {"int": pa.int32(), "integer": pa.int32(), "bigint": pa.int64(), "double": pa.float64(),
                 "string": pa.string(), "boolean": pa.bool_(), "timestamp": pa.timestamp("us", tz="UTC")}
# the texts of a TIMESTAMP the reader converts (Arrow's ISO-8601 cast, in UTC): a subset of what Spark's
# ``timestampFormat`` (``json_format.JSON_READ_OPTIONS``) reads, which it reads to the same instant; any other
# (a number, a zone offset, another count of fraction digits, a date alone) leaves its chunk to Spark
TIMESTAMP_TEXT = r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d{3})?)?$"
CHUNK = 8192
CORRUPT = "__corrupt"  # Spark's corrupt-record column (lower.decode): a value naming it is left to Spark


def decodable(columns: list[tuple[str, str]]) -> bool:
    """Whether the reader can decode values with these ``(name, Spark type)`` columns."""
    return bool(columns) and all(t.lower() in PYARROW_TYPES for _, t in columns)


def decoded_column(topic: str) -> str:
    return f"decoded:{topic}"


@dataclass(frozen=True)
class DecodePlan:
    """What the reader does to JSON values: ``structs``, ``(topic, struct type)`` per topic it decodes, in
    column order; ``names``, topic -> the value columns of every JSON topic (column -> its STRUCT's field tree),
    whose field names it matches case-insensitively (``canonical_names``)."""

    structs: tuple = ()
    names: dict = field(default_factory=dict)
    key_names: dict = field(default_factory=dict)  # topic -> the field tree of its JSON keys' objects, likewise

    def __bool__(self) -> bool:
        return bool(self.structs or self.names or self.key_names)


def decode_plan(option: Optional[str]) -> DecodePlan:
    """The reader's ``DecodePlan``, from the ``decode`` option."""
    if not option:
        return DecodePlan()
    given = json.loads(option)
    structs = tuple((topic, pa.struct([(name, PYARROW_TYPES[t.lower()]) for name, t in columns]))
                    for topic, columns in given.get("decode", []))
    return DecodePlan(structs, given.get("names", {}), given.get("key_names", {}))


def decode_option(topics: list[tuple[str, list[tuple[str, str]]]], names: dict, key_names: Optional[dict] = None) -> str:
    return json.dumps({"decode": [[topic, [list(c) for c in columns]] for topic, columns in topics], "names": names,
                       "key_names": key_names or {}})


def decoded_fields(plan: DecodePlan) -> list[pa.Field]:
    return [pa.field(decoded_column(topic), struct) for topic, struct in plan.structs]


def with_decoded(rows: pa.Table, plan: DecodePlan) -> Iterator[pa.RecordBatch]:
    """``rows`` (source rows: ``topic``, ``value``, ...) as record batches of at most ``CHUNK`` rows, their JSON
    field names made the columns' (``canonical_names``), each with the decoded columns of ``plan`` appended:
    Spark takes each batch as soon as it is decoded."""
    if not plan:
        yield from rows.to_batches()
        return
    names = rows.schema.names + [f.name for f in decoded_fields(plan)]
    at, key_at = rows.schema.get_field_index("value"), rows.schema.get_field_index("key")
    for batch in rows.to_batches(max_chunksize=CHUNK):
        value = canonical_names(batch.column("topic"), batch.column("value"), plan.names)
        arrays = batch.columns[:at] + [value] + batch.columns[at + 1:]
        if plan.key_names and key_at >= 0:
            arrays[key_at] = canonical_names(batch.column("topic"), batch.column("key"), plan.key_names)
        columns = decode_columns(batch.column("topic"), value, plan.structs) if plan.structs else []
        yield pa.RecordBatch.from_arrays(arrays + columns, names=names)


def canonical_names(topic: pa.Array, value: pa.Array, names: dict) -> pa.Array:
    """JSON values whose fields name a column in another case (``{"b": 1}`` for column ``B``, and inside a
    STRUCT column its fields: ``names`` maps topic -> column -> field tree, ``lower.decode.json_columns``)
    written again with the column's own names, as ksqlDB reads JSON (case-insensitively); everything else as it
    is. A value that names each column exactly (the usual case) costs a substring test per name; only one that
    misses a name's exact spelling and has it in another case is parsed, in Python."""
    if not names or not len(value):
        return value
    odd = np.zeros(len(value), dtype=bool)
    for t, columns in names.items():
        of_topic = pc.fill_null(pc.equal(topic, t), False)
        if not pc.any(of_topic).as_py():
            continue
        for column in _every_name(columns):
            quoted = json.dumps(column)
            other_case = pc.and_not(pc.match_substring(value, quoted, ignore_case=True), pc.match_substring(value, quoted))
            odd |= pc.fill_null(pc.and_(of_topic, other_case), False).to_numpy(zero_copy_only=False)
    if not odd.any():
        return value
    texts = value.to_pylist()
    topics = topic.to_pylist()
    for i in np.flatnonzero(odd):
        texts[i] = _renamed(texts[i], names[topics[i]])
    return pa.array(texts, value.type)


def _every_name(tree: dict) -> set:
    """Every column and nested field name of a field tree."""
    return set(tree) | {n for sub in tree.values() if sub for n in _every_name(sub)}


def _renamed(text: bytes, columns: dict) -> bytes:
    """A JSON object with each field that names a column (or, inside a STRUCT column, a field of it) in another
    case renamed to it (a field of the exact name wins); a value that is no JSON object is left to the decoders'
    errors. JSON behind a Schema Registry serializer's framing (JSON_SR: a zero byte and a 4-byte schema id) keeps
    its framing."""
    frame = text[:REGISTRY_FRAME] if text[:1] == b"\x00" else b""
    try:
        obj = json.loads(text[len(frame):])
    except ValueError:
        return text
    if not isinstance(obj, dict):
        return text
    return frame + json.dumps(_canonical(obj, columns)).encode()


def _canonical(obj: dict, tree: dict) -> dict:
    canonical = {c.casefold(): c for c in tree}
    out: dict = {}
    for key, v in obj.items():
        name = canonical.get(key.casefold(), key)
        if name not in out or key == name:
            nested = tree.get(name)
            out[name] = _canonical(v, nested) if nested and isinstance(v, dict) else v
    return out


def decode_columns(topic: pa.Array, value: pa.Array, plan) -> list[pa.Array]:
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
    """The chunk's values as rows of ``schema``, or None if pyarrow cannot read them one row per value. A
    TIMESTAMP field is read as text, and converted only if every text is of ``TIMESTAMP_TEXT``'s shape."""
    times = [i for i, f in enumerate(schema) if pa.types.is_timestamp(f.type)]
    as_read = schema
    for i in times:
        as_read = as_read.set(i, schema.field(i).with_type(pa.string()))
    try:
        chunk.cast(pa.string())  # pyarrow's parser takes bytes that are not UTF-8 into its strings as they are
        lines = pa.ListArray.from_arrays(pa.array([0, len(chunk)], pa.int32()), chunk)
        text = pc.binary_join(lines, b"\n")[0].as_buffer()
        table = pj.read_json(pa.BufferReader(text), read_options=pj.ReadOptions(use_threads=False, block_size=max(text.size, 1 << 20)),
                             parse_options=pj.ParseOptions(explicit_schema=as_read, unexpected_field_behavior="ignore"))
        for i in times:
            texts = table.column(i)
            if pc.any(pc.invert(pc.match_substring_regex(texts, TIMESTAMP_TEXT))).as_py():
                return None
            millis = pc.cast(texts, pa.timestamp("ms"))
            table = table.set_column(i, schema.field(i), millis.cast(schema.field(i).type))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError, ValueError):
        return None
    return table if table.num_rows == len(chunk) else None
