"""A checkpoint written by an earlier state layout resumes exactly: ``fixtures/state_layout_1.tgz`` is the home
of a run by streamjoin cec1d08 (state layout 1: each bucket's meta value in a value state of its own), whose
stream-stream join stored four left records and one right one, joined key 0 and dropped a record with a NULL
key. Resumed by this streamjoin, the join matches new records against the stored ones, its counters carry on,
and the checkpoint stays of layout 1; a new checkpoint is written in the current layout."""
from __future__ import annotations

import json
import tarfile
from pathlib import Path

from streamjoin import Engine
from streamjoin.conformance.runner import produce_inputs
from streamjoin.runtime.checkpoint_layout import STATE_LAYOUT

FIXTURE = Path(__file__).with_name("fixtures") / "state_layout_1.tgz"
SCRIPT = """
CREATE STREAM L (ID INT KEY, V STRING) WITH (kafka_topic='left', value_format='JSON');
CREATE STREAM R (ID INT KEY, W STRING) WITH (kafka_topic='right', value_format='JSON');
CREATE STREAM J AS SELECT L.ID AS ID, V, W FROM L JOIN R WITHIN 1 SECOND ON L.ID = R.ID;
"""
LATER = [{"topic": "right", "key": 1, "value": {"W": "w1"}, "timestamp": 15},  # meets left 1, stored in layout 1
         {"topic": "left", "key": 5, "value": {"V": "v5"}, "timestamp": 50},
         {"topic": "right", "key": 5, "value": {"W": "w5"}, "timestamp": 55}]


def _resume(spark, home: Path, inputs) -> tuple[list, dict]:
    engine = Engine(spark, home=str(home))
    try:
        [query] = engine.execute(SCRIPT)
        produce_inputs(engine.store, inputs, engine.catalog)
        engine.process_all_available()
        joined = [(json.loads(r.key), json.loads(r.value)) for r in engine.store.records(query.topic)]
        return joined, query.metrics()
    finally:
        engine.stop()


def _layout(home: Path) -> dict:
    return json.loads((home / "checkpoints" / "CSAS_J" / "layout.json").read_text())


def _unpacked(home: Path) -> None:
    """The fixture's home, moved to ``home``: Spark's operator metadata names each state schema file by its absolute
    path (``file:/tmp/p51/l1/checkpoints/...``, where the fixture was made), so those paths are rewritten (and their
    checksum files dropped, which Hadoop's local file system then does without)."""
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(home, filter="data")
    for metadata in home.glob("checkpoints/*/state/*/_metadata/v2/*"):
        if metadata.name.endswith(".crc"):
            continue
        text = metadata.read_text()
        recorded = text[text.index('"file:') + 1:text.index("/checkpoints/")]
        metadata.write_text(text.replace(recorded, f"file:{home}"))
        metadata.with_name(f".{metadata.name}.crc").unlink(missing_ok=True)


def test_a_checkpoint_of_state_layout_1_resumes_with_its_stored_rows_and_counters(spark, tmp_path):
    _unpacked(tmp_path)
    joined, metrics = _resume(spark, tmp_path, LATER[:1])
    assert joined == [(0, {"V": "v0", "W": "w0"}), (1, {"V": "v1", "W": "w1"})]
    assert (metrics["state_rows"], metrics["null_key"]) == (6, 1)
    joined, metrics = _resume(spark, tmp_path, LATER[1:])  # and again, from what this streamjoin wrote in layout 1
    assert joined[2:] == [(5, {"V": "v5", "W": "w5"})] and (metrics["state_rows"], metrics["null_key"]) == (8, 1)
    assert "state_layout" not in _layout(tmp_path)


def test_a_new_checkpoint_is_written_in_the_current_state_layout(spark, tmp_path):
    joined, metrics = _resume(spark, tmp_path, LATER)
    assert joined == [(5, {"V": "v5", "W": "w5"})]
    assert metrics["state_rows"] == 3 and _layout(tmp_path)["state_layout"] == STATE_LAYOUT == 2
