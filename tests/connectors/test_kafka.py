"""Kafka topics on a real broker (Tansu, started on 127.0.0.1 by the test): the source resumes exactly from
its checkpoint, honours startingOffsets and the batch limit, keeps keys, values, timestamps,
headers and tombstones, and reports lost data; seed conformance cases (and a headers case) give the same
results on Kafka; a query killed with SIGKILL (from outside, and at its crash points around the sink write) and restarted writes each result to its Kafka topic exactly
once."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from streamjoin.conformance.cases import load_cases
from streamjoin.conformance.runner import run_case
from streamjoin.connectors.dead_letters import KEPT_BYTES
from streamjoin.connectors.kafka_client import KafkaTopics, high_watermarks, probe, producer, reading_consumer
from streamjoin.connectors.local_broker import local_broker
from streamjoin.connectors.topic_store import Record
from streamjoin.runtime.crash_points import ENV as CRASH_AT

from ..conftest import SEED_CASES

OUR_CASES = Path(__file__).parents[1] / "conformance" / "cases"


@pytest.fixture(scope="module")
def broker():
    with local_broker() as bootstrap:
        yield bootstrap


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _read(spark, bootstrap, topic, checkpoint, **options):
    """Run the source until it has read everything available; returns (rows, rows per micro-batch)."""
    rows, sizes = [], []

    def collect(df, _batch_id):
        got = df.collect()
        sizes.append(len(got))
        rows.extend(got)

    reader = spark.readStream.format("streamjoin_kafka").option("bootstrap", bootstrap).option("topics", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    query = reader.load().writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint).start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return rows, sizes


def test_source_keeps_records_and_resumes_from_its_checkpoint(spark, broker, tmp_path):
    topics, topic = KafkaTopics(broker), _topic("src")
    topics.create(topic, 2)
    headers = (("trace", b"t1"), ("trace", b"t2"), ("none", None))
    first = [Record(b"k1", b'{"v": 1}', 0, 0, headers=headers), Record(None, b'{"v": 2}', 5, 1), Record(b"k1", None, 7, 0)]
    topics.append([(topic, first)])
    rows, _ = _read(spark, broker, topic, str(tmp_path / "cp"), headers="true")
    got = sorted((r.partition, r.offset, r.key, r.value, r.timestamp,
                  tuple((h.key, h.value) for h in r.headers)) for r in rows)
    assert got == [(0, 0, b"k1", b'{"v": 1}', 0, headers), (0, 1, b"k1", None, 7, ()), (1, 0, None, b'{"v": 2}', 5, ())]

    topics.append([(topic, [Record(b"k2", b'{"v": 3}', 9, 1), Record(b"k3", b'{"v": 4}', 11, 0)])])
    rows, _ = _read(spark, broker, topic, str(tmp_path / "cp"))  # the same checkpoint: only the new records
    assert sorted((r.partition, r.offset, r.value) for r in rows) == [(0, 2, b'{"v": 4}'), (1, 1, b'{"v": 3}')]


def test_source_starting_offsets_latest_and_batch_limit(spark, broker, tmp_path):
    topics, topic = KafkaTopics(broker), _topic("limits")
    topics.create(topic, 1)
    topics.append([(topic, [Record(None, b"{}", t) for t in range(1, 4)])])
    rows, _ = _read(spark, broker, topic, str(tmp_path / "latest"), startingOffsets="latest")
    assert rows == []
    rows, sizes = _read(spark, broker, topic, str(tmp_path / "limited"), maxRecordsPerBatch="2", ordered="true")
    assert [r.seq for r in rows] == [1, 2, 3] and sizes == [2, 1]


def test_the_status_view_counts_the_records_a_query_has_not_read_yet_as_its_lag(spark, broker, tmp_path):
    from streamjoin.runtime.progress import kafka_lag

    topics, topic = KafkaTopics(broker), _topic("lag")
    topics.create(topic, 2)
    topics.append([(topic, [Record(b"%d" % i, b"{}", i) for i in range(4)])])
    query = (spark.readStream.format("streamjoin_kafka").option("bootstrap", broker).option("topics", topic).load()
             .writeStream.foreachBatch(lambda df, _: None).option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    progress = query.lastProgress
    assert kafka_lag(progress, topics.end_offsets) == 0
    topics.append([(topic, [Record(b"%d" % i, b"{}", i) for i in range(4, 7)])])
    assert kafka_lag(progress, topics.end_offsets) == 3


def test_source_reads_one_partition_whole_lists_at_a_time_and_keeps_zero_times(spark, broker, tmp_path):
    """One partition, no headers wanted: the fetch takes each consumed list column by column, except a
    list holding a zero time (sent as 1 with a header), which it reads record by record."""
    topics, topic = KafkaTopics(broker), _topic("plain")
    topics.create(topic, 1)
    sent = [Record(b"%d" % i, b'{"i": %d}' % i, 0 if i == 1500 else 10 + i) for i in range(3000)]
    topics.append([(topic, sent)])
    rows, sizes = _read(spark, broker, topic, str(tmp_path / "cp"), ordered="false", maxRecordsPerBatch="1000")
    assert sizes == [1000, 1000, 1000]
    assert [(r.offset, r.key, r.value, r.timestamp) for r in rows] == [(i, r.key, r.value, r.timestamp) for i, r in enumerate(sent)]


def test_lost_records_stop_the_query_unless_the_user_opts_out(spark, broker, tmp_path):
    topics, topic = KafkaTopics(broker), _topic("lost")
    topics.create(topic, 1)
    topics.append([(topic, [Record(None, b"{}", t) for t in range(1, 6)])])
    _read(spark, broker, topic, str(tmp_path / "cp"))
    topics.delete(topic)  # recreated with fewer records: offsets 0-4 the checkpoint read are gone
    topics.create(topic, 1)
    topics.append([(topic, [Record(None, b'{"again": 1}', 1)])])
    with pytest.raises(Exception, match="gone from"):
        _read(spark, broker, topic, str(tmp_path / "cp"))
    rows, _ = _read(spark, broker, topic, str(tmp_path / "cp"), failOnDataLoss="false")
    assert [r.value for r in rows] == [b'{"again": 1}']


def test_the_topics_api_feeds_and_reads_a_broker(broker):
    from streamjoin import Topics

    a, b = _topic("api-a"), _topic("api-b")
    with Topics(broker) as topics:
        assert topics.produce([{"topic": a, "key": 1, "value": {"N": 1}, "timestamp": 5},
                               {"topic": b, "key": 2, "value": None, "timestamp": 6}], partitions=2) == 2
        assert {a, b} <= set(topics.list())
        assert [(r["key"], r["value"], r["timestamp"]) for r in topics.read(a)] == [("1", {"N": 1}, 5)]
        assert [(r["key"], r["value"]) for r in topics.read(b)] == [("2", None)]
        assert topics.store.partitions(a) == 2


def test_a_reading_consumer_is_kept_for_the_next_task_unless_a_topic_it_read_was_recreated(broker):
    with reading_consumer(broker, {"t": "id-1"}) as first:
        pass
    with reading_consumer(broker, {"u": "id-7"}) as again:
        assert again is first
    with reading_consumer(broker, {"t": "id-2"}) as other:  # "t" deleted and created again
        assert other is not first
    with pytest.raises(RuntimeError), reading_consumer(broker, {"t": "id-2"}) as failed:
        raise RuntimeError("fetch failed")
    with reading_consumer(broker, {"t": "id-2"}) as fresh:
        assert fresh is not failed


def test_end_offsets_deep_in_a_partition_of_many_small_batches(broker):
    """Tansu answers a fetch deep in a partition of thousands of batches with its high watermark and no record
    once finding the offset outlasts the probe's 1 ms fetch wait (a query over a topic fed at 2,000 records/s
    died after ~25 s); the end offset is taken from such an answer."""
    topic, out = _topic("deep"), producer(broker, **{"linger.ms": 0})
    KafkaTopics(broker).create(topic, 1)
    for _ in range(5000):  # 5,000 batches of 10: without the fallback, the probe at 49,985 got no answer here
        for _ in range(10):
            out.produce(topic, value=b"{}")
        out.flush(10)
    client = probe(broker)
    try:
        for start in (0, 49_985, 50_000):
            assert high_watermarks(client, {(topic, 0): start}, timeout=5) == {(topic, 0): 50_000}
    finally:
        client.close()


def test_a_lenses_query_infers_an_undeclared_topics_schema_from_its_first_records_on_the_broker(broker):
    from streamjoin.plan.catalog import Catalog
    from streamjoin.plan.inference import first_pairs
    from streamjoin.plan.statements import StatementPlanner
    from streamjoin.sql import parse_script

    topics, topic = KafkaTopics(broker), _topic("undeclared")
    topics.create(topic, partitions=2)
    topics.append([(topic, [Record(b"k%d" % i, b'{"n": %d}' % i, i, partition=i % 2) for i in range(6)])], partitions=2)
    assert len(topics.first_records(topic, 4)) == 4 and first_pairs(topics, "no-such-topic") == []
    planner = StatementPlanner(Catalog(), sample_topic=lambda t: first_pairs(topics, t))
    (described,) = [planner.plan(item) for item in parse_script(f"DESCRIBE `{topic}`;")]
    assert "n BIGINT" in described.output and "inferred" in described.output


KAFKA_CASES = (  # one or two per join family: the whole seed suite runs with `streamjoin test --bootstrap-servers`
    "stream-stream left join, KSQL semantic table",
    "stream without key joined to a table",
    "table-table outer join, KSQL semantic table",
    "Flink left interval join",
    "SQLstream left join of two 1-minute RANGE windows",
    "KSQL HEADERS and HEADER('k') columns",
)


def _kafka_cases():
    cases = load_cases([str(SEED_CASES), str(OUR_CASES / "metadata.json")])
    return [next(c for c in cases if name.casefold() in c.name.casefold()) for name in KAFKA_CASES]


@pytest.mark.parametrize("records_per_batch", [0, 1], ids=["all-at-once", "one-per-batch"])
def test_seed_cases_on_kafka(spark, broker, records_per_batch):
    failures = []
    for case in _kafka_cases():
        result = run_case(spark, case, records_per_batch=records_per_batch, bootstrap=broker)
        if result.status != "pass":
            failures.append(f"{case.name}: {result.detail}")
    assert not failures, "\n".join(failures)


def test_late_records_go_to_a_topic_on_the_broker_once_across_restarts(spark, broker, tmp_path):
    from streamjoin import Engine, Topics
    from streamjoin.conformance.runner import produce_inputs

    left, right, late = _topic("late-l"), _topic("late-r"), _topic("late")
    script = (f"SET 'streamjoin.late.topic' = '{late}';"
              f"CREATE STREAM L (ID INT KEY, V STRING) WITH (kafka_topic='{left}', value_format='JSON', partitions=1);"
              f"CREATE STREAM R (ID INT KEY, V STRING) WITH (kafka_topic='{right}', value_format='JSON', partitions=1);"
              "CREATE STREAM J AS SELECT L.ID AS ID, R.V AS RV FROM L JOIN R WITHIN 1 SECOND GRACE PERIOD 0 SECONDS"
              " ON L.ID = R.ID;")
    records = [(left, 1, 1_001), (right, None, 1_002), (right, 2, 9_000), (right, 3, 1_005), (left, 3, 9_001)]
    for part in (records[:2], records[2:]):  # a restart between the two
        engine = Engine(spark, home=str(tmp_path), records_per_batch=0, bootstrap_servers=broker)
        engine.execute(script)
        produce_inputs(engine.store, [{"topic": t, "key": k, "value": {"V": "v"}, "timestamp": ts} for t, k, ts in part])
        engine.process_all_available()
        engine.stop()
    with Topics(broker) as topics:
        written = [r["value"] for r in topics.read(late)]
    assert sorted((v["query"], v["reason"], v["topic"], v["offset"], v["rowtime"]) for v in written) == [
        ("CSAS_J", "late", right, 2, 1_005), ("CSAS_J", "null_key", right, 0, 1_002)]


def test_dead_letters_go_to_a_topic_on_the_broker_once_across_restarts(spark, broker, tmp_path):
    """A value over the dead letter's limit is kept cut short there (its reason does not quote it): the letter fits a
    broker's 1 MB records."""
    from streamjoin import Engine, Topics

    source, letters = _topic("poison"), _topic("letters")
    script = (f"SET 'streamjoin.dead.letter.topic' = '{letters}';"
              f"CREATE STREAM P (ID INT KEY, N INT) WITH (kafka_topic='{source}', value_format='JSON', partitions=1);"
              "CREATE STREAM OUT AS SELECT * FROM P;")
    big = b"x" * (600 * 1024)
    for part in ([(b"1", b'{"N": 1}', 1), (b"2", b'{"N": "many"}', 2)], [(b"3", big, 3), (b"4", b'{"N": 4}', 4)]):
        engine = Engine(spark, home=str(tmp_path), records_per_batch=0, bootstrap_servers=broker)  # a restart between
        engine.execute(script)
        engine.store.append([(source, [Record(key, value, stamp) for key, value, stamp in part])])
        engine.process_all_available()
        engine.stop()
    with Topics(broker) as topics:
        written = [r["value"] for r in topics.read(letters)]
    assert [(v["offset"], v["error"], v.get("value_bytes")) for v in written] == [
        (1, "the value's field N holds 'many', which is not INTEGER (P)", None),
        (2, "the value is not JSON with the columns of P", len(big))]
    assert written[1]["value"] == "x" * KEPT_BYTES


KILL_SCRIPT = """
SET 'streamjoin.ingestion.order' = 'produced';
CREATE STREAM views (k STRING KEY, page INT, n INT) WITH (kafka_topic='views', value_format='JSON', partitions=3);
CREATE TABLE pages (page INT PRIMARY KEY, title STRING) WITH (kafka_topic='pages', value_format='JSON', partitions=2);
CREATE STREAM titled AS SELECT v.page, v.n, p.title FROM views v LEFT JOIN pages p ON v.page = p.page;
CREATE STREAM paired AS SELECT a.page AS page, a.n AS n, b.n AS m FROM views a JOIN views b WITHIN 5 MILLISECONDS ON a.page = b.page;
CREATE TABLE per_page AS SELECT page, COUNT(*) AS c FROM views GROUP BY page;
"""
KILL_INPUTS = [("pages", i % 7, {"TITLE": f"t{i}"}, i) for i in range(0, 80, 9)] + [
    ("views", f"u{i % 11}", {"PAGE": i % 7, "N": i}, i) for i in range(80)]
KILL_SINKS = ("TITLED", "PAIRED", "PER_PAGE")


def _cli(home, script, bootstrap, *extra, crash_at=None):
    """`streamjoin run` on the broker (killing itself at the crash point ``crash_at``, if given); what it prints
    goes to `home/run-N.log`."""
    cmd = [sys.executable, "-m", "streamjoin.cli", "--home", str(home), "run", str(script),
           "--bootstrap-servers", bootstrap, "--max-records-per-batch", "16", *extra]
    home.mkdir(parents=True, exist_ok=True)
    log = home / f"run-{len(list(home.glob('run-*.log')))}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, CRASH_AT: crash_at} if crash_at else None)
    proc.log = log
    return proc


def _produce(bootstrap):
    from streamjoin.connectors.formats import encode_key
    import json

    topics = KafkaTopics(bootstrap)
    topics.create("views", 3)
    topics.create("pages", 2)
    topics.append([(t, [Record(encode_key(k), json.dumps(v).encode(), ts)]) for t, k, v, ts in
                   sorted(KILL_INPUTS, key=lambda r: r[3])])


def _sink_records(bootstrap):
    topics = KafkaTopics(bootstrap)
    return {t: [(r.partition, r.key, r.value, r.timestamp) for r in topics.records(t)] if topics.exists(t) else []
            for t in KILL_SINKS}


def test_kill_and_restart_writes_each_result_to_kafka_once(tmp_path):
    script = tmp_path / "app.sql"
    script.write_text(KILL_SCRIPT)
    with local_broker() as bootstrap:
        _produce(bootstrap)
        assert _cli(tmp_path / "reference", script, bootstrap, "--once").wait(timeout=300) == 0
        expected = _sink_records(bootstrap)
    assert all(expected.values())

    with local_broker() as bootstrap:
        _produce(bootstrap)
        proc = _cli(tmp_path / "crashed", script, bootstrap)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if 0 < len(_sink_records(bootstrap)["TITLED"]) < len(expected["TITLED"]) // 2:
                break
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert len(_sink_records(bootstrap)["TITLED"]) < len(expected["TITLED"]), "the kill came too late to test anything"
        # killed by itself after the first batch's write to Kafka, then after all its restart's first batch writes,
        # both before Spark commits the batch (``runtime.crash_points``)
        for point in ("sink-written", "batch-written"):
            proc = _cli(tmp_path / "crashed", script, bootstrap, "--once", crash_at=f"{point}:1")
            said = proc.wait(timeout=300), proc.log.read_text(errors="replace")
            assert said[0] == -signal.SIGKILL and f"crash point {point}" in said[1], said
        assert _cli(tmp_path / "crashed", script, bootstrap, "--once").wait(timeout=300) == 0
        assert _sink_records(bootstrap) == expected


def _sink_batch(spark, rows):
    from streamjoin.lower.sink import RECORD_SCHEMA

    return spark.createDataFrame(rows, RECORD_SCHEMA).repartition(3)  # the rows spread over tasks, out of order


@pytest.mark.parametrize("from_executors", [True, False], ids=["from-executors", "from-driver"])
def test_the_sink_writes_where_a_java_producer_would_in_ingestion_order_once(spark, broker, from_executors):
    """From the executors (a cluster) or the driver (one machine), each record lands in the partition librdkafka's Java-compatible partitioner picks for its key (a keyless
    one by its ingestion order), in ingestion order in each partition, with the writer's headers; a batch
    re-run after a crash that had written part of it writes only what is missing; an older batch nothing."""
    from streamjoin.connectors.kafka_partitioner import partitions_of
    from streamjoin.connectors.kafka_sink import WrittenSoFar, kafka_writer
    import pyarrow as pa

    topic, reference = _topic("sink-out"), _topic("sink-ref")
    topics = KafkaTopics(broker)
    topics.create(topic, 5)
    topics.create(reference, 5)
    keys = [None if i % 9 == 0 else b"key-%d" % (i % 23) for i in range(200)]
    rows = [(k, b"v%d" % i, 1000 + i, i // 2, i % 2) for i, k in enumerate(keys)]
    kafka_writer(broker, topic, lambda: "q@1", from_executors=from_executors)(_sink_batch(spark, rows), 0)

    out = producer(broker)  # librdkafka's own placement of the keyed records, for comparison
    delivered = {}
    for k in {k for k in keys if k is not None}:
        out.produce(reference, b"", k, on_delivery=lambda _err, msg: delivered.__setitem__(msg.key(), msg.partition()))
    out.flush(10)
    got = topics.records(topic)
    assert sorted(r.value for r in got) == sorted(b"v%d" % i for i in range(200))
    assert all(delivered[r.key] == r.partition for r in got if r.key is not None)
    assert all(r.partition == (int(r.value[1:]) // 2) % 5 for r in got if r.key is None)
    for p in range(5):
        values = [int(r.value[1:]) for r in got if r.partition == p]
        assert values == sorted(values)
    read_back = WrittenSoFar(broker, topic, "q@1")  # the headers: writer, batch, index in the partition
    read_back.load()
    assert {p: set(i) for p, i in read_back.present(0).items()} == {
        p: set(range(sum(r.partition == p for r in got))) for p in range(5)}

    # batch 1 crashed after two of partition 0's records arrived: the restarted writer adds the rest only
    more = [(b"key-%d" % i, b"w%d" % i, 5000 + i, 1000 + i, 0) for i in range(60)]
    first_two = [r for r in more if partitions_of(pa.array([r[0]]), None, 5)[0] == 0][:2]
    kafka_writer(broker, topic, lambda: "q@1", from_executors=from_executors)(_sink_batch(spark, first_two), 1)
    again = kafka_writer(broker, topic, lambda: "q@1", from_executors=from_executors)
    again(_sink_batch(spark, rows), 0)  # older: not written again
    again(_sink_batch(spark, more), 1)
    got = topics.records(topic)
    assert sorted(r.value for r in got) == sorted([b"v%d" % i for i in range(200)] + [b"w%d" % i for i in range(60)])
    assert again.rows_written == 60
