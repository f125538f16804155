"""A query killed mid-input (SIGKILL, not a clean stop) and restarted from its checkpoint writes exactly the
output of an uninterrupted run: nothing lost, nothing twice."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from streamjoin.conformance.runner import produce_inputs
from streamjoin.connectors.topic_store import TopicStore

SCRIPT = """
CREATE STREAM batched (k STRING KEY, meter_id INT, readings ARRAY<INT>) WITH (kafka_topic='batched', value_format='JSON');
INSERT INTO readings SELECT STREAM meter_id, reading FROM batched LATERAL readings AS reading WHERE reading > 50;
CREATE STREAM rekeyed AS SELECT * FROM batched PARTITION BY meter_id;
CREATE STREAM other (k STRING KEY, meter_id INT, x INT) WITH (kafka_topic='other', value_format='JSON');
CREATE STREAM joined AS SELECT b.meter_id AS meter_id, b.readings, o.x FROM batched b
  FULL OUTER JOIN other o WITHIN 3 MILLISECONDS GRACE PERIOD 2 MILLISECONDS ON b.meter_id = o.meter_id;
"""
INPUTS = [
    {"topic": "batched", "key": f"m{i % 7}", "timestamp": i, "value": {"METER_ID": i % 5, "READINGS": [i % 97, 60, i % 13]}}
    for i in range(60)
] + [{"topic": "other", "key": f"o{i}", "timestamp": i + 1, "value": {"METER_ID": i % 6, "X": i}} for i in range(0, 60, 2)]
INPUTS.sort(key=lambda r: r["timestamp"])
SINKS = ("readings", "REKEYED", "JOINED")


def _run(home, script, *extra):
    cmd = [sys.executable, "-m", "streamjoin.cli", "--home", str(home), "run", str(script), "--max-records-per-batch", "3", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _outputs(home):
    store = TopicStore(os.path.join(home, "topics"))
    return {t: [(r.key, r.value, r.timestamp) for r in store.records(t)] for t in SINKS}


def _prepare(home, script_path):
    script_path.write_text(SCRIPT)
    produce_inputs(TopicStore(os.path.join(home, "topics")), INPUTS)


def test_kill_and_restart_gives_the_uninterrupted_output(tmp_path):
    script = tmp_path / "app.sql"
    reference, crashed = tmp_path / "reference", tmp_path / "crashed"
    _prepare(reference, script)
    _prepare(crashed, script)
    assert _run(reference, script, "--once").wait(timeout=300) == 0
    expected = _outputs(reference)
    assert all(expected[t] for t in SINKS)

    proc = _run(crashed, script)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        partial = _outputs(crashed)
        if 0 < len(partial["readings"]) < len(expected["readings"]) // 2:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = _outputs(crashed)
    assert len(partial["readings"]) < len(expected["readings"]), "the kill came too late to test anything"

    assert _run(crashed, script, "--once").wait(timeout=300) == 0
    assert _outputs(crashed) == expected
