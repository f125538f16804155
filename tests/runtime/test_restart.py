"""Queries killed (SIGKILL, not a clean stop) again and again — mid-input, while starting up, after a batch's sink
write, after everything a batch writes but before Spark commits it — and restarted from their checkpoints each time
write exactly the output of an uninterrupted run: nothing lost, nothing twice."""
from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

from streamjoin.conformance.runner import produce_inputs
from streamjoin.connectors.topic_store import TopicStore
from streamjoin.runtime.crash_points import ENV as CRASH_AT

STREAMS_SCRIPT = """
CREATE STREAM batched (k STRING KEY, meter_id INT, readings ARRAY<INT>) WITH (kafka_topic='batched', value_format='JSON');
INSERT INTO readings SELECT STREAM meter_id, reading FROM batched LATERAL readings AS reading WHERE reading > 50;
CREATE STREAM rekeyed AS SELECT * FROM batched PARTITION BY meter_id;
CREATE STREAM other (k STRING KEY, meter_id INT, x INT) WITH (kafka_topic='other', value_format='JSON');
CREATE STREAM joined AS SELECT b.meter_id AS meter_id, b.readings, o.x FROM batched b
  FULL OUTER JOIN other o WITHIN 3 MILLISECONDS GRACE PERIOD 2 MILLISECONDS ON b.meter_id = o.meter_id;
CREATE TABLE per_meter AS SELECT meter_id, COUNT(*) AS n FROM batched
  WINDOW HOPPING (SIZE 10 MILLISECONDS, ADVANCE BY 5 MILLISECONDS, GRACE PERIOD 2 MILLISECONDS) GROUP BY meter_id EMIT FINAL;
CREATE TABLE meter_sessions AS SELECT meter_id, COUNT(*) AS n FROM other WINDOW SESSION (13 MILLISECONDS) GROUP BY meter_id;
"""
STREAMS_INPUTS = [
    {"topic": "batched", "key": f"m{i % 7}", "timestamp": i, "value": {"METER_ID": i % 5, "READINGS": [i % 97, 60, i % 13]}}
    for i in range(60)
] + [{"topic": "other", "key": f"o{i}", "timestamp": i + 1, "value": {"METER_ID": i % 6, "X": i}} for i in range(0, 60, 2)]

TABLES_SCRIPT = """
CREATE STREAM clicks (k INT KEY, user_id INT, n INT) WITH (kafka_topic='clicks', value_format='JSON');
CREATE TABLE users (id INT PRIMARY KEY, team INT, name STRING) WITH (kafka_topic='users', value_format='JSON');
CREATE TABLE teams (id INT PRIMARY KEY, title STRING) WITH (kafka_topic='teams', value_format='JSON');
CREATE STREAM enriched AS SELECT c.user_id, c.n, u.name FROM clicks c LEFT JOIN users u ON c.user_id = u.id;
CREATE TABLE members AS SELECT u.id AS id, u.name, t.title FROM users u JOIN teams t ON u.team = t.id;
CREATE TABLE per_team AS SELECT t.title AS title, COUNT(*) AS n FROM users u JOIN teams t ON u.team = t.id GROUP BY t.title;
CREATE TABLE pairs AS SELECT u.id AS id, u.name, x.title FROM users u FULL OUTER JOIN teams x ON u.id = x.id;
"""
TABLES_INPUTS = [
    {"topic": "users", "key": i % 20, "timestamp": i,
     "value": None if i % 11 == 10 else {"TEAM": (i // 3) % 5, "NAME": f"u{i}"}} for i in range(0, 90, 2)
] + [{"topic": "teams", "key": i % 5, "timestamp": i, "value": None if i % 17 == 0 else {"TITLE": f"t{i}"}}
     for i in range(1, 90, 6)
] + [{"topic": "clicks", "key": i, "timestamp": i, "value": {"USER_ID": i % 23, "N": i}} for i in range(3, 90, 2)]

FLINK_SCRIPT = """
CREATE TABLE fo (id STRING, k STRING, t TIMESTAMP(3), WATERMARK FOR t AS t - INTERVAL '3' SECOND)
  WITH ('connector' = 'kafka', 'topic' = 'fo', 'format' = 'json');
CREATE TABLE fs (id STRING, k STRING, t TIMESTAMP(3), WATERMARK FOR t AS t - INTERVAL '3' SECOND)
  WITH ('connector' = 'kafka', 'topic' = 'fs', 'format' = 'json');
CREATE TABLE fr (k STRING, v INT, t TIMESTAMP(3), PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR t AS t)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'fr', 'key.format' = 'json', 'value.format' = 'json');
INSERT INTO shipped SELECT o.id, s.id AS sid FROM fo o LEFT JOIN fs s ON o.k = s.k AND s.t BETWEEN o.t AND o.t + INTERVAL '5' SECOND;
INSERT INTO versioned SELECT o.id, r.v FROM fo o LEFT JOIN fr FOR SYSTEM_TIME AS OF o.t AS r ON o.k = r.k;
INSERT INTO regular SELECT s.id, r.v FROM fs s FULL JOIN fr r ON s.k = r.k;
INSERT INTO windowed SELECT k, TUMBLE_START(t, INTERVAL '10' SECOND) AS ws, COUNT(*) AS n FROM fo
  GROUP BY TUMBLE(t, INTERVAL '10' SECOND), k;
CREATE TABLE shipped_rows (id STRING, sid STRING) WITH ('connector' = 'jdbc', 'url' = 'jdbc:sqlite:sinks.db',
  'table-name' = 'shipped_rows');
INSERT INTO shipped_rows SELECT o.id, s.id AS sid FROM fo o LEFT JOIN fs s ON o.k = s.k AND s.t BETWEEN o.t AND o.t + INTERVAL '5' SECOND;
CREATE TABLE key_counts (k STRING, n BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'jdbc',
  'url' = 'jdbc:sqlite:sinks.db', 'table-name' = 'key_counts');
INSERT INTO key_counts SELECT k, COUNT(*) AS n FROM fs GROUP BY k;
"""
# the database tables the Flink script writes into (in the SQLite file sinks.db of each run's home): an append
# table, written once per part of a micro-batch, and an upsert table
DATABASE_TABLES = {"shipped_rows": "CREATE TABLE shipped_rows (id TEXT, sid TEXT)",
                   "key_counts": "CREATE TABLE key_counts (k TEXT PRIMARY KEY, n BIGINT)"}


def _at(seconds: int) -> str:
    return f"1970-01-01 00:{seconds // 60:02d}:{seconds % 60:02d}.000"


FLINK_INPUTS = [  # event times run up to 4 s behind ingestion order, so some records are late
    {"topic": "fo", "timestamp": 10 * i, "value": {"id": f"o{i}", "k": f"k{i % 6}", "t": _at(i + 90 - (i * 7) % 5)}}
    for i in range(60)
] + [{"topic": "fs", "timestamp": 10 * i + 3, "value": {"id": f"s{i}", "k": f"k{i % 4}", "t": _at(i + 92 - (i * 3) % 4)}}
     for i in range(0, 60, 2)
] + [{"topic": "fr", "timestamp": 10 * i + 6, "key": {"k": f"k{i % 6}"},
      "value": None if i % 13 == 12 else {"k": f"k{i % 6}", "v": i, "t": _at(i + 88)}} for i in range(0, 60, 3)]

SQLSTREAM_SCRIPT = """
CREATE STREAM qa (k STRING, v INT) WITH (kafka_topic='qa', value_format='JSON');
CREATE STREAM qb (k STRING, w INT) WITH (kafka_topic='qb', value_format='JSON');
CREATE TABLE qt (k STRING PRIMARY KEY, name STRING) WITH (kafka_topic='qt', value_format='JSON');
CREATE STREAM ranged AS SELECT STREAM a.v, b.w FROM qa OVER (RANGE INTERVAL '1' SECOND PRECEDING) AS a
  FULL JOIN qb OVER (RANGE INTERVAL '2' SECOND PRECEDING) AS b ON a.k = b.k;
CREATE STREAM counted AS SELECT STREAM a.v, b.w FROM qa OVER (ROWS 4 PRECEDING) AS a JOIN qb OVER (ROWS 2 PRECEDING) AS b ON a.k = b.k;
CREATE STREAM framed AS SELECT STREAM t.k, a.v FROM qa OVER (ORDER BY FLOOR(ROWTIME TO SECOND) RANGE CURRENT ROW) AS a
  RIGHT JOIN qt AS t ON a.k = t.k;
"""
SQLSTREAM_INPUTS = [
    {"topic": "qa", "timestamp": 100 * i, "value": {"K": f"k{i % 5}", "V": i}} for i in range(60)
] + [{"topic": "qb", "timestamp": 100 * i + 50, "value": {"K": f"k{i % 3}", "W": i}} for i in range(0, 60, 2)
     ] + [{"topic": "qt", "timestamp": 100 * i + 30, "key": f"k{i % 6}", "value": {"NAME": f"n{i}"}} for i in range(0, 60, 7)]

# one script, so the three Spark runs (reference, killed, restarted) are paid once for every operator
SCRIPT = STREAMS_SCRIPT + TABLES_SCRIPT + FLINK_SCRIPT + SQLSTREAM_SCRIPT
INPUTS = STREAMS_INPUTS + TABLES_INPUTS + FLINK_INPUTS + SQLSTREAM_INPUTS
SINKS = ("readings", "REKEYED", "JOINED", "PER_METER", "METER_SESSIONS", "ENRICHED", "MEMBERS", "PER_TEAM", "PAIRS", "shipped", "versioned", "regular",
         "windowed", "RANGED", "COUNTED", "FRAMED")


def _run(home, script, *extra, crash_at=None):
    """Starts `streamjoin run` on `home` (killing itself at the crash point ``crash_at``, if given); what it prints
    goes to `home/run-N.log`, so a failure can show it."""
    cmd = [sys.executable, "-m", "streamjoin.cli", "--home", str(home), "run", str(script), "--max-records-per-batch", "32", *extra]
    env = {**os.environ, CRASH_AT: crash_at} if crash_at else None
    log = home / f"run-{len(list(home.glob('run-*.log')))}.log"
    with open(log, "wb") as out:  # run in the home, where the script's relative SQLite path points
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=home, env=env)
    proc.log = log
    return proc


def _finished(proc) -> bool:
    """Waits for a `--once` run; on a non-zero exit, fails with the end of what it printed."""
    rc = proc.wait(timeout=300)
    assert rc == 0, f"exit {rc}; the end of {proc.log}:\n" + proc.log.read_text(errors="replace")[-6000:]
    return True


def _crashed_at(proc, point) -> bool:
    """Waits for a run to kill itself at its crash point (a `--once` run that ended first tested nothing)."""
    rc = proc.wait(timeout=300)
    said = proc.log.read_text(errors="replace")
    assert rc == -signal.SIGKILL and f"crash point {point}" in said, f"exit {rc}; the end of {proc.log}:\n" + said[-6000:]
    return True


def _outputs(home, sinks):
    store = TopicStore(os.path.join(home, "topics"))
    return {t: [(r.key, r.value, r.timestamp) for r in store.records(t)] for t in sinks}


def _database_rows(home):
    with sqlite3.connect(home / "sinks.db") as conn:
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in DATABASE_TABLES}


def _prepare(home, script_path, text, inputs):
    script_path.write_text(text)
    produce_inputs(TopicStore(os.path.join(home, "topics")), sorted(inputs, key=lambda r: r["timestamp"]))
    with sqlite3.connect(home / "sinks.db") as conn:
        for create in DATABASE_TABLES.values():
            conn.execute(create)


def test_kill_and_restart_gives_the_uninterrupted_output(tmp_path):
    sinks, first = SINKS, SINKS[0]
    script = tmp_path / "app.sql"
    reference, crashed = tmp_path / "reference", tmp_path / "crashed"
    _prepare(reference, script, SCRIPT, INPUTS)
    _prepare(crashed, script, SCRIPT, INPUTS)
    assert _finished(_run(reference, script, "--once"))
    expected, expected_rows = _outputs(reference, sinks), _database_rows(reference)
    assert all(expected[t] for t in sinks) and all(expected_rows.values())

    proc = _run(crashed, script)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        partial = _outputs(crashed, sinks)
        if 0 < len(partial[first]) < len(expected[first]) // 2:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = _outputs(crashed, sinks)
    assert len(partial[first]) < len(expected[first]), "the kill came too late to test anything"

    # restarting: killed at a random moment of its start (the JVM's, the queries' recovery from their checkpoints)
    wait = random.uniform(0.5, 8.0)
    proc = _run(crashed, script)
    time.sleep(wait)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # the first batch any query runs after the restart (the last one left, at least, has input: the first sink is
    # not complete) dies after its sink write; then the batch it left uncommitted dies after all it writes
    for point in ("sink-written", "batch-written"):
        assert _crashed_at(_run(crashed, script, "--once", crash_at=f"{point}:1"), point)

    assert _finished(_run(crashed, script, "--once"))
    assert _outputs(crashed, sinks) == expected, f"(one run killed {wait:.1f} s into its start)"
    assert _database_rows(crashed) == expected_rows, f"(one run killed {wait:.1f} s into its start)"
