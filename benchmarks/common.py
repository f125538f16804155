"""Shared benchmark plumbing: a SparkSession, timing a streaming query, reading its progress."""
from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import tempfile
import time

from pyspark.sql import DataFrame


def session():
    from streamjoin.runtime.session import build_session

    conf = {"spark.sql.shuffle.partitions": "2"}
    if os.environ.get("STREAMJOIN_PROFILE"):  # ``run.py --phases``: Spark's status API too, for each batch's stages
        conf.update({"spark.ui.enabled": "true", "spark.ui.port": "0"})
    return build_session("local[2]", app_name="streamjoin-bench", conf=conf)


def time_query(df: DataFrame, checkpoint: str, input_rows: int, state_rows=None, sink=None) -> dict:
    """Run ``df`` into Spark's no-op sink (or the ``foreachBatch`` function ``sink``) until it has consumed
    all input; report throughput and latency."""
    phases_before = python_phases()
    started, cpu_before = time.monotonic(), process_tree_cpu_seconds()
    writer = df.writeStream.foreachBatch(sink) if sink is not None else df.writeStream.format("noop")
    query = writer.option("checkpointLocation", checkpoint).start()
    query.processAllAvailable()
    elapsed, cpu = time.monotonic() - started, process_tree_cpu_seconds() - cpu_before
    progress = [p for p in query.recentProgress if p.get("numInputRows", 0) > 0]
    query.stop()
    durations = [p["durationMs"]["triggerExecution"] for p in progress] or [0]
    breakdown = {k: sum(p["durationMs"].get(k, 0) for p in progress) for k in ("latestOffset", "addBatch", "queryPlanning", "walCommit", "commitOffsets")}
    native_state = max((sum(op.get("numRowsTotal", 0) for op in p.get("stateOperators", [])) for p in progress), default=0)
    return {
        "rows_per_s": round(input_rows / elapsed, 1),
        "seconds": round(elapsed, 2),
        "batches": len(progress),
        "batch_ms_median": statistics.median(durations),
        "batch_ms_max": max(durations),
        "batch_ms": durations,
        "latency_growth": latency_growth(durations),
        "state_rows_max": state_rows(checkpoint, len(progress)) if state_rows else native_state,
        "ms_by_phase": breakdown,
        "cpu_us_per_row": round(cpu / input_rows * 1e6, 2),
        "observed_per_batch": _observed(progress),
        **_phase_split(phases_before, python_phases(), input_rows),
    }


def _observed(progress: list) -> dict:
    """Each batch's observed metrics (streamjoin's counts of stateless steps), by what they count."""
    found: dict = {}
    for p in progress:
        for name, row in (p.get("observedMetrics") or {}).items():
            what = name.split(":")[1] if name.startswith("counted:") else name
            found.setdefault(what, []).append(sum(v for v in row if isinstance(v, (int, float))))
    return found


def stage_split(spark, query) -> dict:
    """Where ``query``'s micro-batches with input spent their time in Spark's tasks (``run.py --phases``; needs
    ``session``'s status API): per batch, its jobs and tasks, and the wall milliseconds of each stage in the order
    the stages started (stage 1 reads the source; for a streamjoin join: 1 the read, 2 the decoding up to the
    operator's shuffle, 3 the operator and the sink's collect); medians over the batches."""
    import json
    import urllib.request
    from datetime import datetime

    url = spark.sparkContext.uiWebUrl
    if not url:
        return {}

    def get(path):
        with urllib.request.urlopen(f"{url}/api/v1/applications/{spark.sparkContext.applicationId}/{path}") as answer:
            return json.load(answer)

    def at(text):
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fGMT").timestamp() * 1000

    batches = {p["batchId"] for p in query.recentProgress if p.get("numInputRows", 0) > 0}
    stages = {s["stageId"]: s for s in get("stages?status=complete")}
    per_batch: dict = {}
    for job in get("jobs"):
        batch = job.get("description", "").rpartition("batch = ")[2]
        if job.get("jobGroup") == str(query.runId) and batch.isdigit() and int(batch) in batches:
            per_batch.setdefault(int(batch), []).append(job)
    if not per_batch:
        return {}
    split: dict = {"jobs": [], "tasks": [], "stages": []}
    for jobs in per_batch.values():
        ran = sorted((s for job in jobs for sid in job["stageIds"] if (s := stages.get(sid)) and "completionTime" in s),
                     key=lambda s: at(s["submissionTime"]))
        split["jobs"].append(len(jobs))
        split["tasks"].append(sum(s["numTasks"] for s in ran))
        split["stages"].append([at(s["completionTime"]) - at(s["submissionTime"]) for s in ran])
    widest = max(len(row) for row in split["stages"])
    medians = {f"stage {i + 1}": statistics.median(row[i] for row in split["stages"] if len(row) > i) for i in range(widest)}
    return {"jobs": statistics.median(split["jobs"]), "tasks": statistics.median(split["tasks"]), **medians}


def python_phases() -> dict:
    """Seconds streamjoin's Python workers have spent so far in each phase (``operators.state``'s profile,
    on with ``run.py --phases``): {worker pid: {phase: seconds}}."""
    import json

    folder = os.environ.get("STREAMJOIN_PROFILE")
    if not folder or not os.path.isdir(folder):
        return {}
    found = {}
    for name in os.listdir(folder):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                found[name] = json.load(f)
    return found


def _phase_split(before: dict, after: dict, input_rows: int) -> dict:
    """CPU-side microseconds per input row in each Python phase over one query (workers run in parallel:
    these add up to Python's share of ``cpu_us_per_row``, the rest is the JVM: source, decoding, shuffle,
    moving rows to and from Python)."""
    if not after:
        return {}
    totals: dict[str, float] = {}
    for worker, phases in after.items():
        for phase, seconds in phases.items():
            totals[phase] = totals.get(phase, 0.0) + seconds - before.get(worker, {}).get(phase, 0.0)
    return {"python_us_per_row": {phase: round(s / input_rows * 1e6, 2) for phase, s in sorted(totals.items())}}


def latency_growth(durations: list) -> float | None:
    """Median of the last 10 batches over the median of batches 2-11 (the first pays for starting up):
    1.0 when a batch costs the same late in the run as early, above when it grows with the history."""
    if len(durations) < 12:
        return None
    return round(statistics.median(durations[-10:]) / statistics.median(durations[1:11]), 2)


def process_tree_cpu_seconds() -> float:
    """CPU seconds (user + system) used so far by this process and all its descendants (the JVM, Spark's
    Python workers, a test broker), including descendants that have exited, read from ``/proc``."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, list[str]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:  # gone meanwhile
                continue
            stats[int(entry)] = (int(fields[1]), fields)  # (parent pid, fields after the command name)
    ours, changed = {os.getpid()}, True
    while changed:
        grown = ours | {pid for pid, (parent, _) in stats.items() if parent in ours}
        changed, ours = grown != ours, grown
    # fields[11:15]: utime, stime, and the same for waited-for children that have exited
    return sum(int(v) for pid in ours if pid in stats for v in stats[pid][1][11:15]) / tick


def warmed_up(run_variants, warm_up: list[str], *, rows: int, batches: int, only: list[str]) -> dict:
    """Warm up (Python workers, JIT) with the ``warm_up`` variants on a small data set, then time every
    variant ``only`` selects on the real one."""
    run_variants(rows=min(rows, 20_000), batches=2, only=warm_up)
    return run_variants(rows=rows, batches=batches, only=only)


def raw_topics(spark, root: str, topics: str, per_batch: int) -> DataFrame:
    """The embedded topics as a Spark-native baseline reads them: streamjoin's own source, no clock."""
    return (spark.readStream.format("streamjoin_topics").option("root", root).option("topics", topics)
            .option("maxRecordsPerBatch", str(per_batch)).load())


def native_window_join(raw: DataFrame) -> DataFrame:
    """Spark's native inner stream-stream join of the ``left`` (K, V) and ``right`` (K, W) JSON topics in
    ``raw``: equal keys, times within 5 minutes of each other, 10 s watermarks on both sides."""
    from pyspark.sql import functions as F

    def side(topic, field, prefix):
        return (raw.where(F.col("topic") == topic)
                .select(F.col("key").cast("string").cast("int").alias(f"{prefix}k"),
                        F.get_json_object(F.col("value").cast("string"), f"$.{field}").cast("bigint").alias(field),
                        F.timestamp_millis("timestamp").alias(f"{prefix}ts"))
                .withWatermark(f"{prefix}ts", "10 seconds"))

    left, right = side("left", "V", "l"), side("right", "W", "r")
    return left.join(right, F.expr("lk = rk AND rts BETWEEN lts - INTERVAL 5 MINUTES AND lts + INTERVAL 5 MINUTES"))


def streamjoin_query(spark, sql: str, root: str, per_batch: int, bootstrap=None) -> DataFrame:
    """The streaming DataFrame streamjoin runs for the last query of ``sql`` (sink encoding included),
    reading the embedded topics under ``root`` (or Kafka topics on ``bootstrap``) ``per_batch`` records
    at a time; undecodable records are collected for the dead letters, and stateless drops observed, as the
    engine does (a no-op sink writes neither)."""
    from streamjoin.connectors.dead_letters import DEFAULT_TOPIC, DeadLetters
    from streamjoin.lower.lowering import SourceOptions, lower, read_inputs, side_topics
    from streamjoin.lower import operator_table
    from streamjoin.lower.sink import encode
    from streamjoin.operators.base import LoweringContext
    from streamjoin.plan.catalog import Catalog
    from streamjoin.plan.statements import StatementPlanner
    from streamjoin.runtime.observed_counts import ObservedCounts
    from streamjoin.sql import parse_script

    planner = StatementPlanner(Catalog(), operators=operator_table)
    planned = [planner.plan(item) for item in parse_script(sql)][-1].query
    options = SourceOptions(root, per_batch, bootstrap=bootstrap)
    ctx = LoweringContext(checkpoint_dir="", properties={}, time_buckets=options.time_buckets,
                          dead_letters=lambda source, explain: DeadLetters(planned.query_id, source, DEFAULT_TOPIC, root=root,
                                                                           bootstrap=bootstrap, explain=explain),
                          observe_counts=ObservedCounts("").observe_counts,
                          side_topics=tuple(side_topics(planned.plan)), plan=planned.plan)
    records = read_inputs(spark, planned.plan, options)
    return encode(planned.plan, lower(planned.plan.input, records, ctx))


def pickled_state_rows(checkpoint: str, batches: int) -> int:
    """Peak number of rows held in streamjoin operator state (the operators' ``rows`` counters)."""
    from pyspark.sql import SparkSession

    from streamjoin.operators.state import stored_metas

    spark = SparkSession.getActiveSession()
    peak = 0
    for batch_id in range(batches):
        try:
            metas = stored_metas(spark, checkpoint, batchId=batch_id)
        except Exception:  # noqa: BLE001 - a batch without state
            continue
        peak = max(peak, sum(meta.get("rows", 0) for meta in metas))
    return peak


def time_streamjoin(spark, variants: dict, root: str, work: str, input_rows: int, only: list[str]) -> dict:
    """Time each streamjoin variant (name -> (SQL script, records per batch)) that ``only`` selects."""
    results = {}
    for name, (sql, per_batch) in variants.items():
        if not only or name in only:
            df = streamjoin_query(spark, sql, root, per_batch)
            results[name] = time_query(df, os.path.join(work, f"ck-{name}"), input_rows, pickled_state_rows)
    return results


@contextlib.contextmanager
def topics_workspace(generate, rows: int):
    """A temporary directory holding ``generate(root, rows)``'s embedded topics under ``root``; yields
    (SparkSession, work directory, topics root) and removes the directory afterwards."""
    work = tempfile.mkdtemp(prefix="sjbench-")
    root = os.path.join(work, "topics")
    generate(root, rows)
    try:
        yield session(), work, root
    finally:
        shutil.rmtree(work, ignore_errors=True)
