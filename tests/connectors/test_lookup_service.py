"""The executor's lookup cache server (``connectors.lookup_service``), with a real SQLite table and real processes:
the workers of one parent share one cache, a server is started once however many workers ask at the same time,
a database error reaches the worker, and the server leaves when the parent does."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from streamjoin.connectors import database
from streamjoin.connectors.lookup_service import _Client, _socket_path, describe

ROWS = pa.schema([("name", pa.string()), ("k0", pa.int64())])
KEYS = pa.schema([("k0", pa.int64())])


@pytest.fixture
def table(tmp_path):
    import adbc_driver_sqlite.dbapi as driver

    path = str(tmp_path / "dims.db")

    def run(sql: str) -> None:
        with driver.connect(path) as conn, conn.cursor() as cur:
            cur.execute(sql)
            conn.commit()

    run("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    run("INSERT INTO customers VALUES (1, 'Ann'), (2, 'Bob')")
    return database.parse_url(f"jdbc:sqlite:{path}"), run


@pytest.fixture
def parent():
    """A stand-in for PySpark's daemon: the process whose Python workers share a server."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process
    process.kill()
    process.wait()


def _header(endpoint, table="customers") -> bytes:
    return json.dumps(describe(endpoint, table, ["id"], ["name"], ROWS, KEYS, (100, 3_600_000, None, True)),
                      sort_keys=True).encode()


def _ask(client: _Client, header: bytes, *keys) -> tuple[dict, list]:
    answer, rows = client.ask(header, pa.table({"k0": pa.array(keys, pa.int64())}))
    return answer, (rows.column("name").to_pylist() if rows is not None else None)


def test_the_workers_of_one_executor_share_one_cache_and_its_server_leaves_with_the_executor(table, parent):
    endpoint, run = table
    header = _header(endpoint)
    with ThreadPoolExecutor(4) as pool:  # four workers at once: one server starts, all get answers
        answers = list(pool.map(lambda _: _ask(_Client(parent.pid), header, 1), range(4)))
    assert all(names == ["Ann"] for _, names in answers) and sum(a["trips"] for a, _ in answers) == 1
    run("UPDATE customers SET name = 'Anna' WHERE id = 1")
    assert _ask(_Client(parent.pid), header, 1, 2) == ({"trips": 1}, ["Ann", "Bob"])  # 1 cached, 2 read

    failure, names = _ask(_Client(parent.pid), _header(endpoint, "no_such_table"), 1)
    assert names is None and "no_such_table" in failure["error"] and failure["trips"] == 0

    path = _socket_path(parent.pid)
    assert os.path.exists(path)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(path) and not os.path.exists(path + ".lock")
