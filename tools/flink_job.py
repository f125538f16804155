"""Runs prepared Flink SQL cases on Apache Flink itself (PyFlink), for ``tools/flink_diff.py``.

Run with the Python of an environment that has ``apache-flink`` installed (not streamjoin's: PyFlink pins its
own pandas and pyarrow): ``python tools/flink_job.py JOBS.json RESULTS.json``. Only PyFlink and the standard
library are imported here.

Each job (written by ``flink_diff.prepare``) holds a case's settings, its DDL (every table already rewritten
to read a file of the case's inputs), its temporal table functions, and one query per sink. A query runs in a
fresh streaming TableEnvironment at parallelism 1 over *unbounded* file sources (``source.monitor-interval``),
so no end-of-input watermark closes windows or pads rows the inputs themselves have not closed: watermarks
come from records only, as in streamjoin (DIALECT §2). The changelog it produces is collected until it has
been quiet for ``QUIET_S`` seconds, then the job is cancelled.
"""
from __future__ import annotations

import base64
import datetime
import decimal
import json
import sys
import threading
import time

QUIET_S = 5.0  # a query is done when it has produced nothing for this long
FIRST_ROW_WAIT_S = 20.0  # ... or, when it never produced anything, after this long
KINDS = {"INSERT": "+I", "UPDATE_BEFORE": "-U", "UPDATE_AFTER": "+U", "DELETE": "-D"}


def plain(value):
    """A Flink result value as JSON: timestamps as SQL text, decimals as text, bytes as base64."""
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if hasattr(value, "as_dict"):  # a ROW value
            return {k: plain(v) for k, v in value.as_dict().items()}
        return [plain(v) for v in value]
    return value


def run_query(job: dict, query: dict) -> list:
    from pyflink.java_gateway import get_gateway
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("parallelism.default", "1")
    for key, value in job["settings"].items():
        config.set(key, value)
    for ddl in job["ddl"]:
        env.execute_sql(ddl)
    expressions = get_gateway().jvm.org.apache.flink.table.api.Expressions
    for f in job["functions"]:  # PyFlink has no wrapper for it: Java's Table.createTemporalTableFunction
        history = env.from_path(f["table"])._j_table
        function = history.createTemporalTableFunction(expressions.col(f["time"]), expressions.col(f["key"]))
        env._j_tenv.createTemporarySystemFunction(f["name"], function)
    result = env.execute_sql(query["sql"])
    names = query.get("columns") or result.get_table_schema().get_field_names()
    rows: list = []
    failure: list = []
    last = [time.monotonic()]

    def pull():
        try:
            with result.collect() as changes:
                for row in changes:
                    kind = KINDS.get(str(row.get_row_kind()).split(".")[-1], str(row.get_row_kind()))
                    rows.append([kind, {n: plain(v) for n, v in zip(names, list(row))}])
                    last[0] = time.monotonic()
        except Exception as err:  # the job was cancelled (normal), or failed
            failure.append(str(err).splitlines()[0][:500])

    reader = threading.Thread(target=pull, daemon=True)
    started = time.monotonic()
    reader.start()
    while reader.is_alive():
        time.sleep(0.5)
        now = time.monotonic()
        if (rows and now - last[0] > QUIET_S) or (not rows and now - started > FIRST_ROW_WAIT_S):
            break
    client = result.get_job_client()
    if client is not None and reader.is_alive():
        client.cancel().result()
    reader.join(timeout=10)
    if failure and not rows and "cancel" not in failure[0].lower():
        raise RuntimeError(failure[0])
    return rows


def main(argv: list[str]) -> int:
    jobs = json.loads(open(argv[1]).read())
    results = {}
    for job in jobs:
        outcome = {"outputs": {}, "error": None}
        try:
            for query in job["queries"]:
                outcome["outputs"].setdefault(query["topic"], []).extend(run_query(job, query))
        except Exception as err:  # Flink refused the SQL or the job failed: that is the case's result
            outcome["error"] = str(err).strip().splitlines()[0][:500] if str(err).strip() else type(err).__name__
        results[job["id"]] = outcome
        print(f"flink: {job['id']}: {outcome['error'] or sum(map(len, outcome['outputs'].values()))} ", flush=True)
    with open(argv[2], "w") as out:
        json.dump(results, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
