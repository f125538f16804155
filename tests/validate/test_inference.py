"""A Lenses query over a topic no statement declares: the schema its first records imply (``plan.inference``),
and how a query and DESCRIBE use it. No Spark needed: the planner reads the records through its hook."""
from __future__ import annotations

import json

import pytest

from streamjoin.errors import StatementError
from streamjoin.plan.catalog import Catalog
from streamjoin.plan.inference import infer_source
from streamjoin.plan.statements import StatementPlanner
from streamjoin.sql import parse_script


def _records(*pairs):
    return [(None if k is None else (k if isinstance(k, bytes) else json.dumps(k).encode() if not isinstance(k, str)
                                     else k.encode()),
             None if v is None else (v if isinstance(v, bytes) else json.dumps(v).encode())) for k, v in pairs]


# (name, records as (key, value), columns as (name, Spark type, origin), value format, key format)
INFERRED = [
    ("JSON objects: fields in first-seen order, numbers widened, a field seen only as null is text",
     _records(("a", {"id": 1, "price": 2, "note": None}), ("b", {"id": 2, "price": 2.5, "ok": True})),
     [("_key", "string", "key"), ("id", "bigint", "value"), ("price", "double", "value"), ("note", "string", "value"),
      ("ok", "boolean", "value")], "JSON", "KAFKA"),
    ("nested objects and lists: STRUCT fields merged by name, ARRAY elements by type",
     _records((None, {"where": {"city": "Oslo"}, "tags": []}), (None, {"where": {"zip": 1}, "tags": [1, 2.0]})),
     [("_key", "string", "key"), ("where", "struct<`city`:string,`zip`:bigint>", "value"),
      ("tags", "array<double>", "value")], "JSON", "KAFKA"),
    ("a field seen as text and as a number is text", _records(("k", {"v": 1}), ("k", {"v": "x"})),
     [("_key", "string", "key"), ("v", "string", "value")], "JSON", "KAFKA"),
    ("JSON object keys: one key column per field", _records(({"plate": "AB", "n": 1}, {"speed": 3})),
     [("plate", "string", "key"), ("n", "bigint", "key"), ("speed", "bigint", "value")], "JSON", "JSON"),
    ("bare JSON values: one primitive _value", _records(("t1", 21.5), ("t2", 30)),
     [("_key", "string", "key"), ("_value", "double", "value")], "JSON", "KAFKA"),
    ("text that is not JSON: a STRING _value", _records(("t1", b"hello world"), ("t2", b"{broken")),
     [("_key", "string", "key"), ("_value", "string", "value")], "KAFKA", "KAFKA"),
    ("tombstones are skipped", _records(("a", None), ("a", {"x": 1})),
     [("_key", "string", "key"), ("x", "bigint", "value")], "JSON", "KAFKA"),
]


@pytest.mark.parametrize("name,records,columns,value_format,key_format", INFERRED, ids=[c[0] for c in INFERRED])
def test_schema_from_first_records(name, records, columns, value_format, key_format):
    source = infer_source("t", "t", records)
    assert [(c.name, c.type, c.origin) for c in source.columns] == columns
    assert (source.value_format, source.key_format, source.kind) == (value_format, key_format, "STREAM")


TOPICS = {"payments": _records(("u1", {"user": "u1", "amount": 5}), ("u2", {"user": "u2", "amount": 2.5})),
          "temps": _records(("t1", 21.5))}


def _plan(script: str):
    planner = StatementPlanner(Catalog(), sample_topic=lambda topic: TOPICS.get(topic, []))
    return planner, [planner.plan(item) for item in parse_script(script)]


def test_a_query_over_an_undeclared_topic_reads_it_by_its_inferred_schema():
    planner, (planned,) = _plan("INSERT INTO big SELECT STREAM user, amount FROM payments WHERE amount > 1;")
    assert planned.query is not None
    info = planner.catalog.source(parse_script("DESCRIBE payments;")[0].statement.name)
    assert [c.name for c in info.columns] == ["_key", "user", "amount"]


def test_describe_shows_an_inferred_schema():
    _, (described,) = _plan("DESCRIBE temps;")
    assert "Columns (inferred from the topic's records):" in described.output
    assert "_value DOUBLE" in described.output


@pytest.mark.parametrize("script", ["INSERT INTO o SELECT STREAM x FROM nothing_here;",
                                    "CREATE STREAM o AS SELECT user FROM payments;"])
def test_no_inference_without_records_or_outside_lenses_selects(script):
    with pytest.raises(StatementError) as caught:
        _plan(script)
    assert caught.value.rule == "unknown-source"
