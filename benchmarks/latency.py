"""latency: how long after its input a query's result is readable in its sink, as ``streamjoin run`` runs it.

Each variant is one script run by the engine on a fresh embedded store (default trigger: as soon as
possible; progress lines every 5 s, as the command prints them). Once the query has caught up with its
set-up records (a table's rows), a feeder appends input at a steady rate for ``SECONDS`` — at 4 records/s
one record per append, at 2,000 records/s 20 records per append every 10 ms — each record with a
fresh id and the wall clock as its time; a reader polls the sink topic every 5 ms. A record's latency is
from the moment its append began to the moment its result was first read. Reported per variant and rate:
p50/p95/p99 (ms), results seen against expected, the median micro-batch split from Spark's progress
(latestOffset, queryPlanning, addBatch (tasks, state, sink), walCommit, commitOffsets), and after the feed,
with no input at all: the cores the process tree keeps busy and the checkpoint files written in ``IDLE_S``.
With ``run.py latency --phases`` the split goes on into Spark's tasks (``common.stage_split``: jobs, tasks and each
stage's wall time a batch) and streamjoin's Python workers (milliseconds a batch in each phase of ``operators.state``).
``together`` runs the ksqlDB variants' five queries in one script on shared inputs (as a script of several
queries runs), and reports each query's latency.

Baselines on the same source and sink: Spark's own stateless query (``readStream`` of the embedded topic,
``where``, ``foreachBatch`` appending to the store) and Spark's own stream-stream inner join (±1 minute,
10 s watermarks). ``p99_ratio`` is a variant's p99 over Spark's own join's at the same rate (the stateless
floor's: over Spark's own stateless query's); the targets are at most 1.0 (1.2 for the floor).

``LATENCY_STORE=kafka`` runs every variant and baseline on a Kafka-protocol broker instead (the test broker,
started on 127.0.0.1 afresh for each measurement): the engine with ``bootstrap.servers``, the baselines reading
through streamjoin's Kafka source and writing with a producer; the feeder produces each append and flushes it
(no linger), the reader is a consumer of the sink topics. Its idle cores include the broker's process and that
consumer's polling.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import tempfile
import threading
import time

from common import process_tree_cpu_seconds, python_phases, session, stage_split

DEFAULT_ROWS = 0  # unused: the feed is timed (SECONDS at each of RATES)
DEFAULT_BATCHES = 0
RATES = tuple(int(r) for r in os.environ.get("LATENCY_RATES", "4,2000").split(","))
SECONDS = int(os.environ.get("LATENCY_SECONDS", "30"))  # of feed per variant and rate
KAFKA = os.environ.get("LATENCY_STORE", "embedded") == "kafka"
IDLE_S = 10
WARM_UP_S = 30  # of feed per warm-up run
TABLE_ROWS = 100

CLICKS = "CREATE STREAM CLICKS (ID BIGINT KEY, USER_ID INT, T BIGINT) WITH (kafka_topic='clicks', value_format='JSON');\n"
VIEWS = "CREATE STREAM VIEWS (ID BIGINT KEY, PAGE INT) WITH (kafka_topic='views', value_format='JSON');\n"
USERS = "CREATE TABLE USERS (USER_ID INT PRIMARY KEY, NAME STRING) WITH (kafka_topic='users', value_format='JSON');\n"
USERS_FILE = "CREATE TABLE USERS (USER_ID INT PRIMARY KEY, NAME STRING) WITH (path='{path}', value_format='JSON');\n"
ACCOUNTS = "CREATE TABLE ACCOUNTS (USER_ID INT PRIMARY KEY, ID BIGINT) WITH (kafka_topic='accounts', value_format='JSON');\n"
FLINK = """CREATE TABLE C (id BIGINT, user_id INT, t TIMESTAMP(3), WATERMARK FOR t AS t)
  WITH ('connector' = 'kafka', 'topic' = 'fclicks', 'format' = 'json');
CREATE TABLE V (id BIGINT, page INT, t TIMESTAMP(3), WATERMARK FOR t AS t)
  WITH ('connector' = 'kafka', 'topic' = 'fviews', 'format' = 'json');
CREATE TABLE U (user_id INT, name STRING, t TIMESTAMP(3), PRIMARY KEY (user_id) NOT ENFORCED, WATERMARK FOR t AS t)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'fusers', 'key.format' = 'json', 'value.format' = 'json');
"""

# name -> (script, what one input id appends: 'click', 'pair', 'fclick', 'fpair' or 'account'; see _records)
VARIANTS = {
    "stateless": (CLICKS + "CREATE STREAM OUT AS SELECT ID, USER_ID FROM CLICKS WHERE USER_ID IS NOT NULL;", "click"),
    "stream-table": (CLICKS + USERS + "CREATE STREAM OUT AS SELECT C.USER_ID AS USER_ID, C.ID AS ID, U.NAME FROM CLICKS C "
                     "LEFT JOIN USERS U ON C.USER_ID = U.USER_ID;", "click"),
    "stream-table-static": (CLICKS + USERS_FILE + "CREATE STREAM OUT AS SELECT C.USER_ID AS USER_ID, C.ID AS ID, U.NAME FROM CLICKS C "
                            "LEFT JOIN USERS U ON C.USER_ID = U.USER_ID;", "click"),
    "stream-stream": (CLICKS + VIEWS + "CREATE STREAM OUT AS SELECT C.ID AS ID, V.PAGE FROM CLICKS C JOIN VIEWS V "
                      "WITHIN 1 MINUTE GRACE PERIOD 10 SECONDS ON C.ID = V.ID;", "pair"),
    "interval": (FLINK + "INSERT INTO OUT SELECT C.id, V.page FROM C JOIN V ON C.id = V.id "
                 "AND V.t BETWEEN C.t - INTERVAL '1' MINUTE AND C.t + INTERVAL '1' MINUTE;", "fpair"),
    "temporal": (FLINK + "INSERT INTO OUT SELECT C.id, U.name FROM C JOIN U FOR SYSTEM_TIME AS OF C.t "
                 "ON C.user_id = U.user_id;", "fclick"),
    "table-table": (USERS + ACCOUNTS + "CREATE TABLE OUT AS SELECT A.USER_ID AS USER_ID, A.ID AS ID, U.NAME "
                    "FROM ACCOUNTS A JOIN USERS U ON A.USER_ID = U.USER_ID;", "account"),
    "group-by-join": (CLICKS + USERS + "CREATE TABLE OUT AS SELECT C.ID AS ID, COUNT(*) AS N FROM CLICKS C "
                      "JOIN USERS U ON C.USER_ID = U.USER_ID GROUP BY C.ID;", "click"),
}
BASELINES = ("spark-stateless", "spark-native-join")
TOGETHER = ("stateless", "stream-table", "stream-stream", "table-table", "group-by-join")  # one script: "together"


def _together() -> str:
    """The ksqlDB variants' queries in one script, each into its own sink (OUT_<variant>)."""
    return CLICKS + VIEWS + USERS + ACCOUNTS + "\n".join(map(own_sink_query, TOGETHER))


def own_sink_query(name: str) -> str:
    """The variant's query, into a sink of its own: OUT_<variant>."""
    return VARIANTS[name][0].split(";\n")[-1].replace(" OUT ", f" OUT_{name.replace('-', '_').upper()} ")


def run(*, rows: int, batches: int, only: list[str]) -> dict:
    spark = session()
    results = {}
    # Warm up: Python workers, and the JVM's compiler, which keeps most of a core busy for the first minute of
    # micro-batches (C2 compiling Spark's planning and task paths) and would slow whichever variant runs first.
    for name in ("spark-native-join", "stream-stream"):
        _measure(spark, name, rate=2000, seconds=WARM_UP_S)
    for rate in RATES:
        for name in (*BASELINES, *VARIANTS, "together"):
            if not only or name in only:
                results.update(_measure(spark, name, rate=rate, seconds=SECONDS))
    _ratios(results)
    return results


def _ratios(results: dict) -> None:
    """``p99_ratio`` (module docstring)."""
    for key, r in results.items():
        name, rate = key.split("@")
        name = name.split(":")[-1]  # together:<variant>
        base = results.get(f"spark-{'stateless' if name == 'stateless' else 'native-join'}@{rate}", {}).get("p99_ms")
        r["p99_ratio"] = round(r["p99_ms"] / base, 2) if base and r.get("p99_ms") else None


def report(results: dict) -> None:
    print(f"{'variant':28} {'records':>8} {'results':>8} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'p99 ratio':>9}"
          f" {'idle cores':>10} {'idle files':>10}  median batch split (ms)")
    for key, r in results.items():
        split = " ".join(f"{k}={v:g}" for k, v in r["ms_by_phase"].items())
        print(f"{key:28} {r['records']:>8} {r['results']:>8} {_shown(r['p50_ms']):>7} {_shown(r['p95_ms']):>7}"
              f" {_shown(r['p99_ms']):>7} {_shown(r['p99_ratio']):>9} {r['idle_cores']:>10} {r['idle_checkpoint_files']:>10}"
              f"  {split}")


def _shown(value) -> str:
    return "-" if value is None else str(value)


# ------------------------------------------------------------------ one measurement


def _measure(spark, name: str, *, rate: int, seconds: float) -> dict:
    """``{"<variant>@<rate>/s": figures}``; for "together", one entry per query of the shared script
    ("together:<variant>@<rate>/s"), each with the idle figures of the whole script."""
    from streamjoin.connectors.local_broker import local_broker
    from streamjoin.connectors.topic_store import TopicStore

    work = tempfile.mkdtemp(prefix="sjlat-")
    root = os.path.join(work, "topics")
    with contextlib.ExitStack() as held:
        held.callback(shutil.rmtree, work, ignore_errors=True)
        bootstrap = held.enter_context(local_broker()) if KAFKA else None
        store = held.enter_context(contextlib.closing(_KafkaStore(bootstrap))) if bootstrap else TopicStore(root)
        _set_up_tables(store, work)
        if bootstrap:  # the input topics, and a baseline's sink topic (the engine makes its own)
            for topic in ("clicks", "views", "fclicks", "fviews", "accounts", *(["out"] if name in BASELINES else [])):
                store.create(topic)
        queries, sinks, stop = _start(spark, name, work, bootstrap or root)
        feeds = {"spark-stateless": ["click"], "spark-native-join": ["pair"], "together": ["pair", "account"]}
        try:
            for query in queries:
                _wait_for_batches(query, 1)
            phases_before = python_phases()
            sent, seen = _feed_and_watch(store, sinks, feeds.get(name) or [VARIANTS[name][1]], rate, seconds)
            python = _python_split(phases_before, python_phases(), queries)
            idle = _idle(work)
            splits = [{**_split(query), **stage_split(spark, query), **python} for query in queries]
        finally:
            stop()
        labels = [f"together:{v}" for v in TOGETHER] if name == "together" else [name]
        results = {}
        for label, sink, split in zip(labels, sinks, splits):
            latencies = sorted(seen[sink][i] - sent[i] for i in seen[sink] if i in sent)
            results[f"{label}@{rate}/s"] = {"records": len(sent), "results": len(latencies), **_percentiles(latencies),
                                            **idle, "ms_by_phase": split}
        return results


class _KafkaStore:
    """The embedded store's calls the benchmark makes, on a broker: ``append`` produces with one producer
    and no linger, flushed per call (the time an append takes counts in the latency, as on the store);
    ``read_new`` reads what the sink topics gained since the last call with one consumer."""

    def __init__(self, bootstrap: str):
        from streamjoin.connectors.kafka_client import KafkaTopics, consumer, producer

        self.topics = KafkaTopics(bootstrap)
        self.out = producer(bootstrap, **{"linger.ms": 0})
        self.reader = consumer(bootstrap, **{"auto.offset.reset": "earliest", "enable.partition.eof": False})
        self.created: set = set()
        self.assigned: set = set()
        self.sequence = 0

    def create(self, topic: str) -> None:
        if topic not in self.created:
            self.topics.create(topic)
            self.created.add(topic)

    def append(self, batches) -> None:
        from streamjoin.connectors.kafka_client import ORDER_HEADER, stamp_headers

        for topic, records in batches:
            self.create(topic)
            for rec in records:
                self.sequence += 1
                stamp, headers = stamp_headers(int(rec.timestamp), [(ORDER_HEADER, str(self.sequence).encode())])
                self.out.produce(topic, key=rec.key, value=rec.value, timestamp=stamp, headers=headers)
        self.out.flush(30)

    def read_new(self, sinks: list) -> list:
        """(sink, key, value, monotonic time read) of the records the sinks gained; waits at most 5 ms."""
        from confluent_kafka import TopicPartition

        missing = [t for t in sinks if t not in self.assigned and self.topics.exists(t)]
        if missing:
            self.assigned.update(missing)
            self.reader.assign([TopicPartition(t, p, 0) for t in sorted(self.assigned)
                                for p in range(self.topics.partitions(t))])
        if not self.assigned:
            time.sleep(0.005)
            return []
        got = self.reader.consume(1000, 0.005)
        now = time.monotonic()
        return [(m.topic(), m.key(), m.value(), now) for m in got if m.error() is None]

    def close(self) -> None:
        self.reader.close()
        self.topics.close()


def _set_up_tables(store, work: str) -> None:
    from streamjoin.connectors.topic_store import Record

    users = [(k, f"user-{k}") for k in range(TABLE_ROWS)]
    store.append([("users", [Record(str(k).encode(), json.dumps({"NAME": n}).encode(), 0) for k, n in users]),
                  ("fusers", [Record(json.dumps({"user_id": k}).encode(),
                                     json.dumps({"user_id": k, "name": n, "t": "1970-01-01 00:00:00"}).encode(), 0)
                              for k, n in users])])
    with open(os.path.join(work, "users.json"), "w") as f:
        f.writelines(json.dumps({"USER_ID": k, "NAME": n}) + "\n" for k, n in users)


def _start(spark, name: str, work: str, source: str):
    """Start the variant: the engine on its script, or a Spark baseline, on the store at ``source`` (the
    embedded store's folder, or the broker's address). Returns (Spark queries, their sink topics, stop)."""
    if name in BASELINES:
        query = _baseline(spark, name, work, source)
        return [query], ["out"], query.stop
    script = _together() if name == "together" else VARIANTS[name][0]
    running, stop = run_script(spark, work, script.replace("{path}", os.path.join(work, "users.json")),
                               source if KAFKA else None)
    return [q.spark_query for q in running], [q.topic for q in running], stop


def run_script(spark, work: str, script: str, bootstrap=None):
    """Run ``script`` as ``streamjoin run`` does, in ``work`` (its home): the engine's queries, and a thread
    printing their status lines every 5 s, as the command does without a terminal. Returns (the running
    queries, stop)."""
    from streamjoin.runtime.engine import Engine
    from streamjoin.runtime.progress import Status, status_lines

    engine = Engine(spark, home=work, bootstrap_servers=bootstrap)
    running = engine.execute(script)
    stopping = threading.Event()

    def progress():
        status = Status(engine)
        while not stopping.wait(5):
            status_lines(status.queries())

    thread = threading.Thread(target=progress, daemon=True)
    thread.start()

    def stop():
        stopping.set()
        thread.join()
        engine.stop()

    return running, stop


def _baseline(spark, name: str, work: str, source: str):
    from pyspark.sql import functions as F

    from streamjoin.connectors.topic_store import Record, TopicStore

    if KAFKA:
        raw = spark.readStream.format("streamjoin_kafka").option("bootstrap", source)
    else:
        raw = spark.readStream.format("streamjoin_topics").option("root", source)
    if name == "spark-stateless":
        clicks = raw.option("topics", "clicks").load()
        fields = F.from_json(F.col("value").cast("string"), "USER_ID INT")
        out = clicks.select("key", "timestamp", fields.alias("v")).where("v.USER_ID IS NOT NULL")
    else:
        both = raw.option("topics", "clicks,views").load()

        def side(topic, prefix):
            return (both.where(F.col("topic") == topic)
                    .select(F.col("key").alias(f"{prefix}key"), F.timestamp_millis("timestamp").alias(f"{prefix}ts"))
                    .withWatermark(f"{prefix}ts", "10 seconds"))

        out = side("clicks", "c").join(side("views", "v"), F.expr(
            "ckey = vkey AND vts BETWEEN cts - INTERVAL 1 MINUTE AND cts + INTERVAL 1 MINUTE"))
        out = out.select(F.col("ckey").alias("key"), F.unix_millis("cts").alias("timestamp"))

    clients = []

    def write(batch, batch_id):
        rows = batch.select("key", "timestamp").toArrow()
        records = [Record(k, json.dumps({"ID": int(k)}).encode(), t)
                   for k, t in zip(rows.column("key").to_pylist(), rows.column("timestamp").to_pylist())]
        if KAFKA:  # one producer for the query, flushed per batch, as streamjoin's sink does
            if not clients:
                from streamjoin.connectors.kafka_client import producer

                clients.append(producer(source))
            for r in records:
                clients[0].produce("out", value=r.value, key=r.key, timestamp=r.timestamp)
            clients[0].flush(30)
        else:
            TopicStore(source).append([("out", records)], writer=name, batch_id=batch_id)

    return (out.writeStream.foreachBatch(write).option("checkpointLocation", os.path.join(work, "checkpoints", name))
            .start())


def _wait_for_batches(query, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        progress = query.lastProgress
        if progress and progress["batchId"] >= count - 1:
            return
        time.sleep(0.05)


def _records(feed: str, i: int, now_ms: int) -> list:
    """The records that make id ``i``'s result, all in one append: (topic, Record) pairs."""
    from streamjoin.connectors.topic_store import Record

    key, user = str(i).encode(), i % TABLE_ROWS
    stamp = f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(now_ms / 1000))}.{now_ms % 1000:03d}"
    if feed == "click":
        return [("clicks", Record(key, json.dumps({"USER_ID": user, "T": now_ms}).encode(), now_ms))]
    if feed == "pair":
        return [("views", Record(key, json.dumps({"PAGE": i}).encode(), now_ms)),
                ("clicks", Record(key, json.dumps({"USER_ID": user, "T": now_ms}).encode(), now_ms))]
    if feed == "fclick":  # with its user's row again at the same time: the versions' watermark moves on too
        return [("fusers", Record(json.dumps({"user_id": user}).encode(),
                                  json.dumps({"user_id": user, "name": f"user-{user}", "t": stamp}).encode(), now_ms)),
                ("fclicks", Record(None, json.dumps({"id": i, "user_id": user, "t": stamp}).encode(), now_ms))]
    if feed == "fpair":
        return [("fviews", Record(None, json.dumps({"id": i, "page": i, "t": stamp}).encode(), now_ms)),
                ("fclicks", Record(None, json.dumps({"id": i, "user_id": user, "t": stamp}).encode(), now_ms))]
    if feed == "account":  # an account row moves to id i
        return [("accounts", Record(str(user).encode(), json.dumps({"ID": i}).encode(), now_ms))]
    raise ValueError(feed)


def _feed_and_watch(store, sinks: list, feeds: list, rate: int, seconds: float) -> tuple[dict, dict]:
    """Append ids at ``rate`` per second for ``seconds`` while reading the sinks; then wait up to 20 s for
    the last results. Returns (id -> append began, sink -> id -> result first read), monotonic seconds."""
    sent, seen, done = {}, {sink: {} for sink in sinks}, threading.Event()
    read_new = store.read_new if KAFKA else _store_reader(store, sinks)

    def watch():
        while not done.is_set() or (min(map(len, seen.values())) < len(sent) and time.monotonic() < done.deadline):
            for sink, key, value, now in read_new(sinks):
                i = _result_id(key, value)
                if i is not None:
                    seen[sink].setdefault(i, now)

    done.deadline = float("inf")
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    per_append = max(1, rate // 100)
    started, i = time.monotonic(), 0
    while time.monotonic() - started < seconds:
        due = started + i / rate
        time.sleep(max(0.0, due - time.monotonic()))
        began, now_ms = time.monotonic(), int(time.time() * 1000)
        pairs = [pair for n in range(i, i + per_append) for feed in feeds for pair in _records(feed, n, now_ms)]
        by_topic: dict = {}
        for topic, record in pairs:
            by_topic.setdefault(topic, []).append(record)
        store.append(list(by_topic.items()))
        for n in range(i, i + per_append):
            sent[n] = began
        i += per_append
    done.deadline = time.monotonic() + 20
    done.set()
    watcher.join()
    return sent, seen


def _store_reader(store, sinks: list):
    """``read_new(sinks)`` on the embedded store: a consumer polling every 5 ms; it reads the sinks only when
    the store has a new commit. (sink, key, value, monotonic time read) of each record the sinks gained."""
    after, read_at = dict.fromkeys(sinks, store.committed_seq()), [None]

    def read_new(sinks: list) -> list:
        committed = store.committed_seq()
        if committed == read_at[0]:
            time.sleep(0.005)
            return []
        read_at[0], got = committed, []
        for sink in sinks:
            table = store.read_table(sink, after_seq=after[sink]) if store.exists(sink) else None
            now = time.monotonic()
            if table is not None and table.num_rows:
                after[sink] = table.column("seq")[-1].as_py()
                got += [(sink, k, v, now) for k, v in zip(table.column("key").to_pylist(), table.column("value").to_pylist())]
        time.sleep(0.005)
        return got

    return read_new


def _result_id(key, value):
    try:
        row = json.loads(value) if value else {}
    except ValueError:
        return None
    for field in ("ID", "id"):
        if field in row:
            return int(row[field])
    try:
        return int(json.loads(key)) if key else None
    except (ValueError, TypeError):
        return None


def _idle(work: str) -> dict:
    """With no input: cores the process tree keeps busy, and checkpoint files written, over ``IDLE_S``."""
    time.sleep(2)
    files_before, cpu_before, started = _files(work), process_tree_cpu_seconds(), time.monotonic()
    time.sleep(IDLE_S)
    cpu, elapsed = process_tree_cpu_seconds() - cpu_before, time.monotonic() - started
    written = sorted(os.path.relpath(f, work) for f in _files(work) - files_before)
    return {"idle_cores": round(cpu / elapsed, 3), "idle_checkpoint_files": len(written), "idle_files_written": written[:8]}


def _files(work: str) -> set:
    root = os.path.join(work, "checkpoints")
    return {os.path.join(d, f) for d, _, names in os.walk(root) for f in names}


def _python_split(before: dict, after: dict, queries: list) -> dict:
    """With ``--phases``: the milliseconds streamjoin's Python workers spent a micro-batch in each phase (pack,
    input, state_read, step, state_write, output), summed over the batch's tasks and the queries' operators."""
    batches = sum(1 for q in queries for p in q.recentProgress if p.get("numInputRows", 0) > 0)
    if not after or not batches:
        return {}
    totals: dict = {}
    for worker, phases in after.items():
        for phase, seconds in phases.items():
            totals[phase] = totals.get(phase, 0.0) + seconds - before.get(worker, {}).get(phase, 0.0)
    return {f"python {phase}": round(seconds * 1000 / batches, 1) for phase, seconds in sorted(totals.items()) if seconds > 0}


def _split(query) -> dict:
    """Median milliseconds per phase over the micro-batches that had input."""
    progress = [p for p in query.recentProgress if p.get("numInputRows", 0) > 0]
    phases = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets", "triggerExecution")
    return {k: statistics.median([p["durationMs"].get(k, 0) for p in progress]) for k in phases} if progress else {}


def _percentiles(latencies: list) -> dict:
    if not latencies:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None}
    pick = lambda q: round(1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))])  # noqa: E731
    return {"p50_ms": pick(0.50), "p95_ms": pick(0.95), "p99_ms": pick(0.99)}
