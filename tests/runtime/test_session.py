"""The session streamjoin builds: its data sources are registered with an environment map that is safe to
write while Spark serialises tasks that carry it; its checkpoint files on a local disk have no checksum files."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("source", ["streamjoin_topics", "streamjoin_kafka"])
def test_a_source_shares_a_concurrent_environment_map(spark, source):
    # Spark hands this one map to every read task of the source and writes into it each time a query that
    # reads the source starts, on that query's thread; a plain HashMap can be caught mid-write and then
    # fails to deserialise in the task (OptionalDataException).
    manager = spark._jsparkSession.sessionState().dataSourceManager()
    env = manager.lookupDataSource(source).dataSourceCls().envVars()
    assert env.getClass().getName() == "java.util.concurrent.ConcurrentHashMap"


def test_local_checkpoint_files_are_written_without_checksum_files(spark, tmp_path):
    # as Spark's default checkpoint manager writes them: a checksum file costs a second `chmod` process per file
    from streamjoin.runtime.storage import Versions, filesystem, read_json

    versions = Versions(spark, str(tmp_path), "counts")
    for number in range(3):
        versions.write(number, {"batch": number})
    assert sorted(p.name for p in (tmp_path / "counts").iterdir()) == ["2.json"]
    assert read_json(spark, str(tmp_path), "counts", "2.json") == {"batch": 2}

    # a file from a checkpoint written with checksums, written anew: its stale checksum goes with the old text
    (tmp_path / "old.json").write_text('{"v": 1}')
    (tmp_path / ".old.json.crc").write_bytes(b"stale")
    fs, path = filesystem(spark, str(tmp_path), "old.json")
    out = fs.create(path, True)
    out.write(b'{"v": 2}')
    out.close()
    assert not (tmp_path / ".old.json.crc").exists()
    assert read_json(spark, str(tmp_path), "old.json") == {"v": 2}
