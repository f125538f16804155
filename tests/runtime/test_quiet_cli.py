"""``streamjoin run`` prints streamjoin's own output only: Spark's log and its Python workers' chatter go to a
file under the home, whose path it prints once; ``--verbose`` brings them back."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

SCRIPT = """
CREATE STREAM L (ID INT KEY, V STRING) WITH (kafka_topic='left', value_format='JSON');
CREATE STREAM R (ID INT KEY, W STRING) WITH (kafka_topic='right', value_format='JSON');
INSERT INTO L (ROWTIME, ID, V) VALUES (1, 1, 'a');
INSERT INTO R (ROWTIME, ID, W) VALUES (2, 1, 'b');
CREATE STREAM J AS SELECT L.ID AS ID, V, W FROM L JOIN R WITHIN 1 SECOND ON L.ID = R.ID;
"""


def test_run_is_quiet_and_spark_logs_go_to_a_file(tmp_path):
    script = tmp_path / "app.sql"
    script.write_text(SCRIPT)
    home = tmp_path / "home"
    done = subprocess.run([sys.executable, "-m", "streamjoin.cli", "--home", str(home), "run", str(script), "--once"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    log = home / "logs" / "spark.log"
    assert done.stderr.strip() == f"Spark's logs go to {log} (--verbose shows them here)"
    assert "CSAS_J" in done.stdout and "Python worker" not in done.stdout
    assert "Python worker" in log.read_text()  # the join's stateful workers said they started, into the file


@pytest.mark.parametrize("home, log", [
    ("/srv/sj", "/srv/sj/logs/spark.log"),
    ("sj", "sj/logs/spark.log"),
    ("file:///srv/sj", "/srv/sj/logs/spark.log"),  # a URI's path, not a folder named "file:" under the current one
    ("s3a://bucket/sj", os.path.join(tempfile.gettempdir(), "streamjoin", "logs", "spark.log")),
])
def test_the_spark_log_is_a_local_file_whatever_the_home(home, log):
    from streamjoin.cli import _log_path

    assert _log_path(home) == log
