"""The benchmarks build streamjoin's queries through a lowering context of their own (``benchmarks/common.py``):
no other test runs that code, and a change to the context's signature broke every benchmark once (b0401c2, mended in d354b7e).
Building one benchmark query here (planned and lowered, not started) keeps them in step with the engine."""
from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_a_benchmark_query_lowers_as_the_engine_lowers_it(spark, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    try:
        import common
        import stream_stream

        sql = stream_stream.DDL + stream_stream.JOIN.format(kind="LEFT")
        df = common.streamjoin_query(spark, sql, str(tmp_path), per_batch=1)
    finally:  # the benchmarks' module names are generic: leave none of them behind for other tests
        for module in ("common", "stream_stream"):
            sys.modules.pop(module, None)
    assert df.isStreaming
    assert {"key", "value"} <= set(df.columns)
