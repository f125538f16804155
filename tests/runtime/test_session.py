"""The session streamjoin builds: its data sources are registered with an environment map that is safe to
write while Spark serialises tasks that carry it."""
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
