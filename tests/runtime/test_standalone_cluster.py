"""A real Spark standalone cluster (a master and two workers started from the installed pyspark's jars)
runs seed cases, stateless and stateful, with the same results as local mode. The workers' Python has PySpark and
streamjoin's dependencies but not streamjoin: the driver ships it (``runtime.session.package_zip``). Topics and
checkpoints are on a path they all share, named by a ``file://`` URI; the stateful case runs on a Kafka broker, its
sink writing from the executors."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest

from ..conftest import SEED_CASES

SPARK_HOME = Path(pyspark.__file__).parent
KAFKA = ["--bootstrap-servers", "local"]  # a throw-away broker on 127.0.0.1
CASES = [("PARTITION BY re-keys a stream", []), ("Lenses single lateral join", []),
         ("stream-stream left join, KSQL semantic table", KAFKA)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _daemon(args, log: Path, env) -> subprocess.Popen:
    cmd = [str(SPARK_HOME / "bin" / "spark-class"), *args]
    return subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _python_without_streamjoin(folder: Path) -> str:
    """A virtual environment that sees this one's installed packages (a ``.pth`` line naming its site-packages) but
    not streamjoin, whose editable install is itself a ``.pth`` file there, which Python reads only in a site
    directory of its own."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    (site,) = folder.glob("lib/python*/site-packages")
    (site / "shared.pth").write_text(str(Path(pyspark.__file__).parent.parent) + "\n")
    python = str(folder / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    assert subprocess.run([python, "-c", "import pyspark, pyarrow, pandas"], env=env).returncode == 0
    assert subprocess.run([python, "-c", "import streamjoin"], env=env, capture_output=True).returncode != 0
    return python


@pytest.fixture
def cluster(tmp_path):
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=_python_without_streamjoin(tmp_path / "worker-python"))
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = [_daemon(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                      "--webui-port", str(_free_port())], tmp_path / "master.log", env)]
    time.sleep(5)
    for i in (1, 2):
        procs.append(_daemon(["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
                              "--memory", "1g", "--webui-port", str(_free_port()), "--work-dir", str(tmp_path / f"w{i}")],
                             tmp_path / f"worker{i}.log", env))
    deadline = time.monotonic() + 60
    while (tmp_path / "master.log").read_text().count("Registering worker") < 2:
        assert time.monotonic() < deadline, "the workers did not register"
        time.sleep(0.5)
    yield url, tmp_path / "master.log", env
    for p in procs:
        os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        p.wait(timeout=30)


def test_seed_cases_on_a_standalone_cluster(cluster, tmp_path):
    url, master_log, env = cluster
    results_file = tmp_path / "results.json"
    for name, extra in CASES:
        cmd = [sys.executable, "-m", "streamjoin.cli", "--home", "file://" + str(tmp_path / "home"), "test", str(SEED_CASES),
               "--filter", name, "--master", url, "--records-per-batch", "1", "--json", str(results_file), *extra]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        results = json.loads(results_file.read_text())
        assert done.returncode == 0 and results and all(r["status"] == "pass" for r in results), done.stdout[-3000:]
    assert master_log.read_text().count("Launching executor") >= 2 * len(CASES)
