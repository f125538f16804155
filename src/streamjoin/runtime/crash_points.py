"""Crash points: named places in a micro-batch where the engine can be made to die as a machine dies (SIGKILL,
nothing cleaned up), for the tests that prove a restart exact. A kill from outside lands where it happens to; the
moments that matter most to exactly-once output last milliseconds, so a test names them instead.

``STREAMJOIN_CRASH_AT=<point>:<n>`` kills the process the n-th time (counted over all its queries) any query's
``foreachBatch`` function (``runtime.batch_sink``) reaches ``<point>``:
- ``sink-written``: the batch's output is in the sink; what the batch observed (dead letters, late records,
  counts) is not written yet, and Spark has not committed the batch;
- ``batch-written``: everything the batch writes is written; Spark has not committed it.
The Spark JVM goes first, then this process; the Python workers the JVM started end with it. Unset, a point
costs one environment lookup."""
from __future__ import annotations

import os
import signal
import sys
import threading

from ..errors import StreamjoinError

ENV = "STREAMJOIN_CRASH_AT"
POINTS = ("sink-written", "batch-written")

_lock = threading.Lock()
_reached: dict = {}


def crash_point() -> tuple[str, int] | None:
    """The point and count ``STREAMJOIN_CRASH_AT`` names, or None; an error for a text that names neither."""
    text = os.environ.get(ENV)
    if not text:
        return None
    point, _, count = text.strip().rpartition(":")
    if point not in POINTS or not count.isdigit() or int(count) < 1:
        raise StreamjoinError(f"{ENV}={text!r}: expected <point>:<n>, a point of {', '.join(POINTS)} and n >= 1")
    return point, int(count)


def reached(point: str, spark) -> None:
    """Dies here if this is the time ``STREAMJOIN_CRASH_AT`` names."""
    wanted = crash_point()
    if wanted is None or wanted[0] != point:
        return
    with _lock:
        _reached[point] = times = _reached.get(point, 0) + 1
    if times != wanted[1]:
        return
    sys.stderr.write(f"streamjoin: crash point {point}:{times} reached: killing the JVM and this process\n")
    sys.stderr.flush()
    jvm = getattr(spark.sparkContext._gateway, "proc", None)
    if jvm is not None:
        os.kill(jvm.pid, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
