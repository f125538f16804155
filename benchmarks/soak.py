"""soak: a steady feed through a script with every kind of join, for ``--minutes`` minutes (default 20), as
``streamjoin run`` runs it on the embedded store; reported per minute: the input rate, the latency of results
(append to readable in the sink: p50, p99, and the worst query's p99), the state rows every query holds
(``metrics()``), and the memory (resident set) of the driver's Python process, the JVM and Spark's Python workers.

The script: a ksqlDB stream-table join (a 100-row topic table), stream-stream (``WITHIN 1 MINUTE GRACE PERIOD 10
SECONDS``), table-table and a GROUP BY over a join (100 groups); Flink's interval join (±1 minute), event-time
temporal join, and a regular join under ``table.exec.state.ttl`` (1 minute). Each id appended brings a click and a
view (ksqlDB), a click, a view and its user's row (Flink) and an account row, so every window fills within about
a minute and a half and then only slides: from then on state rows and memory should stay flat. ``flat`` in the
output compares the last minute with the third: state rows and each memory figure, as a ratio.

``SOAK_RATE`` sets the ids appended per second (default 20: 120 records/s over the six input topics).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time

from common import session
from latency import (ACCOUNTS, CLICKS, FLINK, TABLE_ROWS, USERS, VIEWS, _records, _result_id, _set_up_tables,
                     _store_reader, _wait_for_batches, own_sink_query, run_script)

DEFAULT_ROWS = 0  # unused: the feed is timed
DEFAULT_BATCHES = 0
RATE = int(os.environ.get("SOAK_RATE", "20"))
MINUTES = 20

JOINS = ("stream-table", "stream-stream", "table-table", "interval", "temporal")  # latency's queries of these
REGULAR = ("SET 'table.exec.state.ttl' = '1 min';\n"
           "INSERT INTO OUT_REGULAR SELECT C.id, U.name FROM C JOIN U ON C.user_id = U.user_id;")
GROUPED = ("CREATE TABLE OUT_GROUP_BY_JOIN AS SELECT U.USER_ID AS USER_ID, COUNT(*) AS N FROM CLICKS C "
           "JOIN USERS U ON C.USER_ID = U.USER_ID GROUP BY U.USER_ID;")


def script() -> str:
    """Every join kind in one script, each query into its own sink (OUT_<kind>)."""
    return CLICKS + VIEWS + USERS + ACCOUNTS + FLINK + "\n".join(map(own_sink_query, JOINS)) + "\n" + GROUPED + "\n" + REGULAR


def run(*, rows: int, batches: int, only: list[str], minutes: int = MINUTES) -> dict:
    from streamjoin.connectors.topic_store import TopicStore

    spark = session()
    work = tempfile.mkdtemp(prefix="sjsoak-")
    try:
        store = TopicStore(os.path.join(work, "topics"))
        _set_up_tables(store, work)
        running, stop = run_script(spark, work, script())
        try:
            for query in running:
                _wait_for_batches(query.spark_query, 1)
            minutes_seen = _feed(store, running, minutes)
        finally:
            stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    third, last = minutes_seen[min(2, len(minutes_seen) - 1)], minutes_seen[-1]
    flat = {k: round(last[k] / third[k], 2) if third[k] else None
            for k in ("state_rows", "driver_mb", "jvm_mb", "python_workers_mb")}
    return {"rate_ids_per_s": RATE, "minutes": minutes_seen, "flat_last_over_third": flat}


def _feed(store, running: list, minutes: int) -> list[dict]:
    """Append ``RATE`` ids a second for ``minutes`` minutes while reading the sinks; one figure row per minute."""
    sinks = [q.topic for q in running]
    read_new = _store_reader(store, sinks)
    sent: dict[int, float] = {}
    seen: list[tuple[str, int, float]] = []  # (sink, id, first read) of results carrying an input id
    firsts: set = set()
    done = threading.Event()

    def watch():
        while not done.is_set():
            for sink, key, value, now in read_new(sinks):
                i = _result_id(key, value)
                if i is not None and (sink, i) not in firsts and i in sent and sink != "OUT_GROUP_BY_JOIN":
                    firsts.add((sink, i))
                    seen.append((sink, i, now))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    rows, started, i, records = [], time.monotonic(), 0, 0
    minute_start, records_from = started, 0
    try:
        while len(rows) < minutes:
            due = started + i / RATE
            time.sleep(max(0.0, due - time.monotonic()))
            began, now_ms = time.monotonic(), int(time.time() * 1000)
            by_topic: dict = {}
            for topic, record in _soak_records(i, now_ms):
                by_topic.setdefault(topic, []).append(record)
                records += 1
            store.append(list(by_topic.items()))
            sent[i] = began
            i += 1
            if time.monotonic() - minute_start >= 60:
                window = [seen.pop(0) for _ in range(len(seen))]  # taken as a whole: the watcher only appends
                rows.append(_minute(len(rows) + 1, (records - records_from) / (time.monotonic() - minute_start),
                                    window, sent, running))
                print(json.dumps(rows[-1]), flush=True)
                minute_start, records_from = time.monotonic(), records
                for old in [n for n in list(sent) if n < i - 300 * RATE]:  # this process's own bookkeeping stays flat too:
                    del sent[old]  # an id's results come within five minutes or not at all
                firsts.difference_update({f for f in list(firsts) if f[1] < i - 300 * RATE})
    finally:
        done.set()
        watcher.join()
    return rows


def _soak_records(i: int, now_ms: int) -> list:
    """Id ``i``'s records: a ksqlDB click and view, a Flink click and view, its user's row again (Flink: the
    versions' and the regular join's table side), and an account row."""
    fuser = [pair for pair in _records("fclick", i, now_ms) if pair[0] == "fusers"]
    return _records("pair", i, now_ms) + _records("fpair", i, now_ms) + fuser + _records("account", i, now_ms)


def _minute(number: int, rate: float, window: list, sent: dict, running: list) -> dict:
    by_sink: dict[str, list] = {}
    for sink, i, now in window:
        by_sink.setdefault(sink, []).append(1000 * (now - sent[i]))
    every = sorted(v for values in by_sink.values() for v in values)
    memory = _memory_mb()
    return {"minute": number, "records_per_s": round(rate), "results": len(every),
            "p50_ms": _pick(every, 0.5), "p99_ms": _pick(every, 0.99),
            "worst_p99_ms": max((_pick(sorted(v), 0.99) for v in by_sink.values()), default=None),
            "state_rows": sum(q.metrics().get("state_rows", 0) for q in running), **memory}


def _pick(values: list, q: float):
    return round(values[min(len(values) - 1, int(q * len(values)))]) if values else None


def _memory_mb() -> dict:
    """Resident memory (MB) of this process (the driver's Python), its JVM and Spark's Python workers (every
    other Python process under it)."""
    parents, commands, rss = {}, {}, {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                commands[int(entry)] = f.read().split(b"\0")[0].decode(errors="replace")
            with open(f"/proc/{entry}/status") as f:
                rss[int(entry)] = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
        except (OSError, StopIteration, ValueError):
            continue
    ours, changed = {os.getpid()}, True
    while changed:
        grown = ours | {pid for pid, parent in parents.items() if parent in ours}
        changed, ours = grown != ours, grown
    ours.discard(os.getpid())
    jvm = sum(rss.get(p, 0) for p in ours if commands.get(p, "").endswith("java"))
    python = sum(rss.get(p, 0) for p in ours if "python" in os.path.basename(commands.get(p, "")))
    return {"driver_mb": round(rss.get(os.getpid(), 0)), "jvm_mb": round(jvm), "python_workers_mb": round(python)}


def report(results: dict) -> None:
    print(f"soak at {results['rate_ids_per_s']} ids/s ({TABLE_ROWS} users)")
    print(f"{'minute':>6} {'records/s':>9} {'results':>8} {'p50 ms':>7} {'p99 ms':>7} {'worst p99':>9} {'state rows':>10}"
          f" {'driver MB':>9} {'JVM MB':>7} {'workers MB':>10}")
    for r in results["minutes"]:
        print(f"{r['minute']:>6} {r['records_per_s']:>9} {r['results']:>8} {_shown(r['p50_ms']):>7} {_shown(r['p99_ms']):>7}"
              f" {_shown(r['worst_p99_ms']):>9} {r['state_rows']:>10} {r['driver_mb']:>9} {r['jvm_mb']:>7}"
              f" {r['python_workers_mb']:>10}")
    print("last minute / third minute:", results["flat_last_over_third"])


def _shown(value) -> str:
    return "-" if value is None else str(value)

