"""A script edited between runs: its queries keep their ids and checkpoints whatever happens to the other
statements, so nothing is emitted twice; a query that itself changed is refused before anything starts,
until ``reset`` starts it over."""
from __future__ import annotations

import pytest

from streamjoin import Engine
from streamjoin.conformance.runner import produce_inputs
from streamjoin.runtime.checkpoint_layout import LayoutMismatch

DDL = """
CREATE STREAM L (ID INT KEY, V STRING) WITH (kafka_topic='left', value_format='JSON');
CREATE STREAM R (ID INT KEY, W STRING) WITH (kafka_topic='right', value_format='JSON');
"""
JOIN = "CREATE STREAM J AS SELECT L.ID AS ID, V, W FROM L JOIN R WITHIN 1 SECOND ON L.ID = R.ID;"
COPY = ("CREATE STREAM copied (ID INT KEY, V STRING) WITH (kafka_topic='copied', value_format='JSON');\n"
        "INSERT INTO copied SELECT * FROM L;")
INPUTS = [{"topic": "left", "key": i, "value": {"V": f"v{i}"}, "timestamp": 10 * i} for i in range(4)] + [
    {"topic": "right", "key": i, "value": {"W": f"w{i}"}, "timestamp": 10 * i + 5} for i in range(4)]


def _run(spark, home, script: str, inputs=()) -> dict:
    engine = Engine(spark, home=str(home))
    try:
        queries = engine.execute(script)
        produce_inputs(engine.store, list(inputs), engine.catalog)
        engine.process_all_available()
        return {q.query_id: len(engine.store.records(q.topic)) for q in queries}
    finally:
        engine.stop()


def test_edits_elsewhere_keep_each_querys_checkpoint_and_a_changed_query_is_refused_until_reset(spark, tmp_path):
    first = _run(spark, tmp_path, DDL + JOIN + COPY, INPUTS)
    assert first == {"CSAS_J": 4, "INSERTQUERY_COPIED": 4}

    # a statement added at the top, another one removed: the remaining queries resume, nothing is re-emitted
    edited = ("CREATE STREAM other (ID INT KEY, N INT) WITH (kafka_topic='other', value_format='JSON');\n"
              "CREATE STREAM added AS SELECT * FROM other;\n" + DDL + "\n\n" + JOIN.replace(" ON ", "\n  ON "))
    again = _run(spark, tmp_path, edited)
    assert again == {"CSAS_ADDED": 0, "CSAS_J": 4}

    changed = DDL + JOIN.replace("WITHIN 1 SECOND", "WITHIN 2 SECONDS")
    engine = Engine(spark, home=str(tmp_path))
    with pytest.raises(LayoutMismatch, match=r"CSAS_J changed.*WITHIN 2 SECONDS.*--reset CSAS_J"):
        engine.execute(changed)
    assert not engine.queries and not spark.streams.active

    assert engine.reset("CSAS_J")
    assert _run(spark, tmp_path, changed) == {"CSAS_J": 8}  # started over: its output written again


def test_a_checkpoint_whose_state_another_state_layout_wrote_is_refused_until_reset(spark, tmp_path):
    """An operator's stored values are read as its current version lays them out: a checkpoint written by a
    streamjoin whose operator stored them otherwise (here: a layout.json naming version 0, or one from before
    versions were recorded) is refused before anything starts."""
    import json

    assert _run(spark, tmp_path, DDL + JOIN, INPUTS) == {"CSAS_J": 4}
    [layout] = tmp_path.rglob("layout.json")
    saved = json.loads(layout.read_text())
    assert saved["query"]["state"] == ["stream_stream v1"]
    for written, named in ((["stream_stream v0"], "stream_stream v0"), (None, "a layout from before state versions were recorded")):
        if written is None:
            del saved["query"]["state"]
        else:
            saved["query"]["state"] = written
        layout.write_text(json.dumps(saved))
        layout.with_name(".layout.json.crc").unlink(missing_ok=True)  # Hadoop's checksum of the old text
        engine = Engine(spark, home=str(tmp_path))
        with pytest.raises(LayoutMismatch, match=rf"CSAS_J: .*\({named}; this version keeps stream_stream v1\).*--reset CSAS_J"):
            engine.execute(DDL + JOIN)
        assert not engine.queries and not spark.streams.active

    engine = Engine(spark, home=str(tmp_path))
    assert engine.reset("CSAS_J")
    assert _run(spark, tmp_path, DDL + JOIN) == {"CSAS_J": 8}  # started over: its output written again
