"""One lookup cache per executor: a small server process that keeps the 'PARTIAL' caches of the lookup joins an
executor runs, shared by all the executor's Python workers.

Spark runs a task's Python code in one of several worker processes of its executor (one per busy core), and which
worker gets which partition is Spark's choice. A cache in each worker would hold every hot key once per worker,
and whether a micro-batch sees a cached row or the database's newer one would depend on which worker ran it. So a
worker does not keep the cache itself: it sends the partition's distinct keys to its executor's lookup server and
gets their rows back (``lookup``), cached or fetched by the server.

- **Which server.** An executor's Python workers are all children of one process (PySpark's daemon, or the
  executor itself when there is no daemon): the server of a worker is the one named by its parent's pid, reached on a
  Unix socket in a directory only this user can enter (``_socket_path``). The first worker to need it starts it
  (under a file lock, so one starts); it stops when that parent is gone, so it lives exactly as long as the
  executor's Python side.
- **Requests.** A 4-byte length and a JSON header (the table, its endpoint, columns, key columns, schemas and
  cache limits: everything ``Lookup`` is made from), then the keys as an Arrow IPC stream. The answer: a JSON
  header (the round trips the server made for it, or the error it met) and the rows as an Arrow IPC stream.
  Each table and cache is a ``Lookup`` of the server's, used by one request at a time.
- **Failures** reach the worker as a ``database.RemoteError`` with the server's words, so the worker's retries
  and error text (``database.with_retries``) are those of a local ``Lookup``; a server that cannot be reached is
  started again.
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

import pyarrow as pa

from .database import Endpoint, Lookup, RemoteError

START_TIMEOUT_S = 20.0


def describe(endpoint: Endpoint, table: str, key_columns, columns, schema: pa.Schema, key_schema: pa.Schema,
             cache: tuple) -> dict:
    """The JSON-able description of a ``Lookup`` that a request carries."""
    return {"kind": endpoint.kind, "target": endpoint.target, "table": table, "key_columns": list(key_columns),
            "columns": list(columns), "schema": _schema_text(schema), "key_schema": _schema_text(key_schema),
            "cache": list(cache)}


class RemoteLookup:
    """A worker's handle on its executor's cache of one table: ``rows`` and ``round_trips`` as ``Lookup``'s."""

    def __init__(self, description: dict):
        self.header = json.dumps(description, sort_keys=True).encode()
        self.round_trips = 0

    def rows(self, keys: pa.Table) -> pa.Table:
        answer, rows = _client().ask(self.header, keys)
        self.round_trips += answer.get("trips", 0)
        if "error" in answer:
            raise RemoteError(answer["error"])
        return rows


# ---------------------------------------------------------------------------------------------- the worker's side

_CLIENT: Optional["_Client"] = None


def _client() -> "_Client":
    global _CLIENT
    if _CLIENT is None or _CLIENT.parent != os.getppid():
        _CLIENT = _Client(os.getppid())
    return _CLIENT


class _Client:
    def __init__(self, parent: int):
        self.parent, self.path = parent, _socket_path(parent)
        self.sock: Optional[socket.socket] = None

    def ask(self, header: bytes, keys: pa.Table) -> tuple[dict, pa.Table]:
        for attempt in (1, 2):  # a server gone since the last request (or never started) is started again
            try:
                if self.sock is None:
                    self.sock = self._connect()
                _send(self.sock, header, keys)
                return _receive(self.sock)
            except (ConnectionError, FileNotFoundError, EOFError):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _connect(self) -> socket.socket:
        try:
            return _connected(self.path)
        except (ConnectionError, FileNotFoundError):
            pass
        with open(self.path + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one worker starts the server; the others wait and connect
            try:
                return _connected(self.path)
            except (ConnectionError, FileNotFoundError):
                pass
            if os.path.exists(self.path):
                os.unlink(self.path)  # left by a server that died
            # the worker's own import path: Spark may have put streamjoin there (a zip of --py-files, say)
            importable = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            subprocess.Popen([sys.executable, "-m", __name__, self.path, str(self.parent)], env=importable,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                try:
                    return _connected(self.path)
                except (ConnectionError, FileNotFoundError):
                    if time.monotonic() > deadline:
                        raise ConnectionError(f"the lookup cache server at {self.path} did not start") from None
                    time.sleep(0.02)


def _connected(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def _socket_path(parent: int) -> str:
    home = os.path.join(tempfile.gettempdir(), f"streamjoin-{os.getuid()}")
    os.makedirs(home, mode=0o700, exist_ok=True)
    info = os.stat(home)
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{home} must belong to this user alone")
    return os.path.join(home, f"lookup-{parent}.sock")


# ---------------------------------------------------------------------------------------------- the wire

def _send(sock: socket.socket, header: bytes, table: Optional[pa.Table]) -> None:
    sink = pa.BufferOutputStream()
    if table is not None:
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    body = sink.getvalue()
    sock.sendall(struct.pack("!II", len(header), body.size) + header)
    sock.sendall(body)


def _receive(sock: socket.socket) -> tuple[dict, Optional[pa.Table]]:
    header_size, body_size = struct.unpack("!II", _exactly(sock, 8))
    header = json.loads(_exactly(sock, header_size))
    body = _exactly(sock, body_size)
    return header, (pa.ipc.open_stream(body).read_all() if body_size else None)


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray(size)
    view, got = memoryview(data), 0
    while got < size:
        n = sock.recv_into(view[got:])
        if not n:
            raise EOFError("the lookup cache server closed the connection")
        got += n
    return bytes(data)


def _schema_text(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def _schema(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


# ---------------------------------------------------------------------------------------------- the server

class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str):
        super().__init__(path, _Handler)
        self.lookups: dict[bytes, tuple[Lookup, threading.Lock]] = {}
        self.registry = threading.Lock()

    def lookup(self, header: bytes) -> tuple[Lookup, threading.Lock]:
        with self.registry:
            if header not in self.lookups:
                d = json.loads(header)
                self.lookups[header] = (Lookup(Endpoint(d["kind"], d["target"]), d["table"], d["key_columns"],
                                               d["columns"], _schema(d["schema"]), _schema(d["key_schema"]),
                                               tuple(d["cache"])), threading.Lock())
            return self.lookups[header]


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while True:
            try:
                header_size, body_size = struct.unpack("!II", _exactly(self.request, 8))
                header = _exactly(self.request, header_size)
                keys = pa.ipc.open_stream(_exactly(self.request, body_size)).read_all()
            except (EOFError, ConnectionError):
                return
            lookup, lock = self.server.lookup(header)
            with lock:
                before = lookup.round_trips
                try:
                    rows, answer = lookup.rows(keys), {}
                except Exception as err:  # noqa: BLE001 - the worker raises it, with retries and its wording
                    rows, answer = None, {"error": f"{type(err).__name__}: {err}"}
                answer["trips"] = lookup.round_trips - before
            _send(self.request, json.dumps(answer).encode(), rows)


def serve(path: str, parent: int) -> None:
    """Serve on ``path`` until process ``parent`` is gone."""
    server = _Server(path)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        while _alive(parent):
            time.sleep(0.5)
    finally:
        for left in (path, path + ".lock"):
            try:
                os.unlink(left)
            except FileNotFoundError:
                pass
        os._exit(0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
