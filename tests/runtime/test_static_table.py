"""A table read from a file (SQLstream's static table) is loaded once at query start and joined with
Spark's native stream-static join: the last line of a key wins; the stream side may use any expression."""
from __future__ import annotations

import json

import pytest

from streamjoin import Engine
from streamjoin.conformance.runner import produce_inputs

ANIMALS = [
    {"animal_id": 1, "name": "Bessie", "edible": True},
    {"animal_id": 2, "name": "Puff", "edible": False},
    {"animal_id": 3, "name": "Rex", "edible": False},
    {"animal_id": 2, "name": "Puffy", "edible": True},  # a later line for the same key replaces the first
]
EVENTS = [(1, 1), (2, 2), (3, 4), (4, 3), (5, None)]


def _run(spark, tmp_path, query: str, events, spacing_ms: int = 1):
    """Start ``query`` over the stream ``events`` and the table ``animals`` (a JSON file), feed ``events``
    (the i-th at time ``i * spacing_ms``)."""
    path = tmp_path / "animals.json"
    path.write_text("".join(json.dumps(a) + "\n" for a in ANIMALS))
    engine = Engine(spark, home=str(tmp_path / "home"))
    queries = engine.execute(
        "CREATE STREAM events (row_id INT, animal_id INT) WITH (kafka_topic='events', value_format='JSON');"
        f"CREATE TABLE animals (animal_id INT PRIMARY KEY, name STRING, edible BOOLEAN) WITH (path='{path}', value_format='JSON');"
        + query
    )
    try:
        produce_inputs(engine.store, [
            {"topic": "events", "timestamp": i * spacing_ms, "value": {"ROW_ID": row, "ANIMAL_ID": animal}}
            for i, (row, animal) in enumerate(events)
        ])
        engine.process_all_available()
    except BaseException:
        engine.stop()  # no query left running into the next test
        raise
    return engine, queries


@pytest.mark.parametrize("join, expected", [
    ("JOIN", [(1, "Bessie"), (2, "Puffy"), (4, "Rex")]),
    ("LEFT JOIN", [(1, "Bessie"), (2, "Puffy"), (3, None), (4, "Rex")]),
])
def test_stream_joined_to_a_table_in_a_file(spark, tmp_path, join, expected):
    engine, queries = _run(spark, tmp_path, "CREATE STREAM named AS SELECT STREAM e.row_id, a.name FROM events e "
                                            f"{join} animals a ON e.animal_id + 0 = a.animal_id;", EVENTS)
    rows = sorted((r["ROW_ID"], r["NAME"]) for r in engine.dataframe(queries[0]).collect())
    engine.stop()
    assert rows == expected


def test_every_static_row_every_hour(spark, tmp_path):
    """SQLstream's hourly report: a stream with a tumbling frame RIGHT-joined to a table in a file emits
    each table row without a match in an hour when that hour closes."""
    engine, queries = _run(spark, tmp_path, "CREATE STREAM hourly AS SELECT STREAM a.name, e.row_id FROM events OVER "
                                            "(ORDER BY FLOOR(ROWTIME TO HOUR) RANGE CURRENT ROW) AS e RIGHT JOIN animals a "
                                            "ON e.animal_id = a.animal_id;", [(1, 1), (2, 1), (3, 3)], spacing_ms=3_600_000)
    rows = sorted((r["NAME"], r["ROW_ID"] or 0) for r in engine.dataframe(queries[0]).collect())
    engine.stop()
    # hour 0: Bessie matched, Puffy and Rex not; hour 1: Bessie again; hour 2 (Rex) is still open
    assert rows == sorted([("Bessie", 1), ("Puffy", 0), ("Rex", 0), ("Bessie", 2), ("Puffy", 0), ("Rex", 0), ("Rex", 3)])


def test_the_static_join_keeps_no_streaming_state_reads_no_clock_and_counts_what_it_drops(spark, tmp_path):
    join = "CREATE STREAM named AS SELECT e.animal_id, e.row_id, a.name FROM events e JOIN animals a ON e.animal_id = a.animal_id;"
    engine, queries = _run(spark, tmp_path, join, [(1, 1), (2, None)])
    produce_inputs(engine.store, [{"topic": "events", "timestamp": 5, "value": None}])
    engine.process_all_available()
    progress, metrics = queries[0].spark_query.lastProgress, queries[0].metrics()
    engine.stop()
    assert progress["stateOperators"] == []
    assert "streamTime" not in json.loads(progress["sources"][0]["endOffset"])  # no stream time: nothing needs it
    assert (metrics["null_value"], metrics["null_key"]) == (1, 1)

    engine, queries = _run(spark, tmp_path, join, [(3, None)])  # the same script again resumes its checkpoint
    metrics = queries[0].metrics()
    engine.stop()
    assert metrics["null_key"] == 2
    # the table as loaded at the last start, in Spark's reliable checkpoint beside the query's (the first start's gone)
    (loaded,) = (tmp_path / "home" / "checkpoints").glob("*/loaded-tables/*")
    assert list(loaded.glob("rdd-*/part-*"))
