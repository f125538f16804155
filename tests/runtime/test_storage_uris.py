"""A home named by URI: checkpoints and their side files (layout, drop counts) go through Hadoop's FileSystem, so
a ``file://`` home — which Python's ``open`` cannot read — runs and restarts exactly, and a home on a store the
embedded topics cannot live on is refused with a clear error."""
from __future__ import annotations

import json

import pytest

from streamjoin import Engine
from streamjoin.conformance.runner import produce_inputs
from streamjoin.runtime.storage import StorageError, home_location, local_path, under

SCRIPT = """
CREATE STREAM L (ID INT KEY, V STRING) WITH (kafka_topic='left', value_format='JSON');
CREATE STREAM R (ID INT KEY, W STRING) WITH (kafka_topic='right', value_format='JSON');
CREATE STREAM J AS SELECT L.ID AS ID, V, W FROM L JOIN R WITHIN 1 SECOND ON L.ID = R.ID;
"""


def _inputs(ids):
    return ([{"topic": "left", "key": i, "value": {"V": f"v{i}"}, "timestamp": 10 * i} for i in ids]
            + [{"topic": "right", "key": i, "value": {"W": f"w{i}"}, "timestamp": 10 * i + 5} for i in ids])


def _run(spark, home, ids) -> list:
    engine = Engine(spark, home=home)
    try:
        (query,) = engine.execute(SCRIPT)
        produce_inputs(engine.store, _inputs(ids), engine.catalog)
        engine.process_all_available()
        return [json.loads(r.value)["V"] for r in engine.store.records(query.topic)]
    finally:
        engine.stop()


def test_a_file_uri_home_runs_and_resumes_from_its_checkpoint(spark, tmp_path):
    home = f"file://{tmp_path}/home"
    assert _run(spark, home, range(3)) == ["v0", "v1", "v2"]
    checkpoint = tmp_path / "home" / "checkpoints" / "CSAS_J"
    assert (checkpoint / "layout.json").is_file() and (checkpoint / "offsets").is_dir()
    # started again on the same home: it resumes, so only the new records' results are added
    assert _run(spark, home, range(3, 5)) == ["v0", "v1", "v2", "v3", "v4"]


@pytest.mark.parametrize("home, checkpoints, local", [
    ("file:///data/sj/", "file:///data/sj/checkpoints", "/data/sj"),
    ("s3a://bucket/sj", "s3a://bucket/sj/checkpoints", None),
    ("hdfs://nn:8020/sj", "hdfs://nn:8020/sj/checkpoints", None),
])
def test_homes_are_named_by_uri_as_given(home, checkpoints, local):
    assert under(home_location(home), "checkpoints") == checkpoints
    assert local_path(home_location(home)) == local


def test_a_home_the_embedded_topics_cannot_live_on_is_refused(spark):
    with pytest.raises(StorageError, match="the embedded topics need a local or file:// home.*s3a://bucket/sj"):
        Engine(spark, home="s3a://bucket/sj", bootstrap_servers=None)
