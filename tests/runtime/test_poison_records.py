"""Poison records: for every input format, a record that cannot be read is dead-lettered with its topic, partition,
offset and a one-line reason naming the field, its value (cut short) and the type it should have; it is counted, and
the query goes on with the next record.

One script reads a topic per format (ksqlDB JSON, DELIMITED, AVRO and KAFKA values, a KAFKA key; Flink JSON and
debezium-json); each topic holds good records between the bad ones. A case row: the record's key and value bytes,
its timestamp, and the words its dead letter's reason must hold (None: a good record, which must come out).
"""
from __future__ import annotations

import json

import pytest

from streamjoin import Engine
from streamjoin.connectors.dead_letters import DEFAULT_TOPIC, KEPT_BYTES
from streamjoin.connectors.topic_store import Record

SCRIPT = """
CREATE STREAM kj (ID INT KEY, N INT, B BIGINT, T TIMESTAMP, D DATE, S STRING) WITH (kafka_topic='kj', value_format='JSON');
CREATE STREAM kj_out AS SELECT * FROM kj;
CREATE STREAM kd (ID INT KEY, N INT, T TIMESTAMP, S STRING) WITH (kafka_topic='kd', value_format='DELIMITED');
CREATE STREAM kd_out AS SELECT * FROM kd;
CREATE STREAM ka (ID INT KEY, N INT, S STRING) WITH (kafka_topic='ka', value_format='AVRO');
CREATE STREAM ka_out AS SELECT * FROM ka;
CREATE STREAM kk (ID STRING KEY, N BIGINT) WITH (kafka_topic='kk', key_format='KAFKA', value_format='KAFKA');
CREATE STREAM kk_out AS SELECT * FROM kk;
CREATE TABLE fj (id INT, n INT, t TIMESTAMP(3), s STRING)
  WITH ('connector' = 'kafka', 'topic' = 'fj', 'format' = 'json');
CREATE TABLE fj_out WITH ('connector' = 'kafka', 'topic' = 'fj_out', 'format' = 'json') AS SELECT * FROM fj;
CREATE TABLE fd (id INT, n INT, t TIMESTAMP(3), PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'kafka', 'topic' = 'fd', 'format' = 'debezium-json');
CREATE TABLE fd_out WITH ('connector' = 'kafka', 'topic' = 'fd_out', 'format' = 'debezium-json') AS SELECT * FROM fd;
"""

HUGE = b'{"N": "' + b"9" * (10 * 1024 * 1024) + b'"}'  # a 10 MB value: a number far out of INT's range

RECORDS = {  # topic -> (key, value, timestamp, words of the reason | None)
    "kj": [
        (b"1", b'{"N": 1, "S": "ok"}', 10, None),
        (b"2", b'{"N": 1,', 11, ["'{\"N\": 1,'", "not JSON", "KJ"]),
        (b"3", b'{"N": "many"}', 12, ["field N", "'many'", "INTEGER"]),
        (b"4", b'{"T": "1970-01-01 24:00:00.000"}', 13, ["field T", "'1970-01-01 24:00:00.000'", "TIMESTAMP"]),
        (b"5", b'{"D": "2020-13-45"}', 14, ["field D", "'2020-13-45'", "DATE"]),
        (b"6", b'{"N": 3000000000}', 15, ["field N", "'3000000000'", "INTEGER"]),
        (b"7", b'{"S": "\xff\xfe"}', 16, ["not UTF-8"]),
        (b"8", HUGE, 17, ["field N", "INTEGER"]),  # kept cut short: its letter shows the value
        (b"9", b'{"B": 1e40}', 18, ["field B", "BIGINT"]),
        (b"three", b'{"N": 1}', 19, ["key", "'three'", "INTEGER"]),
        (b"11", b'{"N": 11}', -1, ["timestamp", "-1"]),  # what a Kafka record without a time holds
        (b"12", b'{"N": 12}', 20, None),
    ],
    "kd": [
        (b"1", b"1,2020-01-01T00:00:00,ok", 10, None),
        (b"2", b"many,,x", 11, ["field N", "'many'", "INTEGER"]),
        (b"3", b"1,notatime,x", 12, ["field T", "'notatime'", "TIMESTAMP"]),
        (b"4", b"3000000000,,x", 13, ["field N", "'3000000000'", "INTEGER"]),
        (b"5", b"1,,\xff\xfe", 14, ["not UTF-8"]),
        (b"6", b"1,,ok", 15, None),
    ],
    "ka": [  # N and S are unions of null and their type: a branch index, then the value (zigzag varints)
        (b"1", b"\x02\x02\x02\x04ok", 10, None),
        (b"2", b"\xff\xff\xff", 11, ["not AVRO", "KA"]),
        (b"3", b"\x02\x02\x02", 12, ["not AVRO", "KA"]),
        (b"4", b"\x02\x06\x02\x04ok", 13, None),
    ],
    "kk": [
        (b"a", b"1", 10, None),
        (b"b", b"ten", 11, ["'ten'", "BIGINT"]),
        (b"c", b"3", 12, None),
    ],
    "fj": [
        (None, b'{"id": 1, "n": 1, "s": "ok"}', 10, None),
        (None, b'{"id": 2, "n": "many"}', 11, ["field n", "'many'", "INTEGER"]),
        (None, b'{"id": 3, "t": "1970-01-01 24:00:00.000"}', 12, ["field t", "'1970-01-01 24:00:00.000'", "TIMESTAMP"]),
        (None, b'{"id": 4, "n": 3000000000}', 13, ["field n", "'3000000000'", "INTEGER"]),
        (None, b'{"id": 5, "s": "\xff"}', 14, ["not UTF-8"]),
        (None, b"not json", 15, ["'not json'", "not JSON"]),
        (None, b'{"id": 6, "n": 6}', 16, None),
        (None, b'{"id": 7, "n": 7}', -1, None),  # a Flink table's time is its WATERMARK column's, if any
    ],
    "fd": [
        (None, b'{"op": "c", "after": {"id": 1, "n": 1}}', 10, None),
        (None, b'{"op": "x", "after": {"id": 2}}', 11, ["'op'", "c, r, u or d"]),
        (None, b'{"op": "c", "after": {"id": 3, "n": "many"}}', 12, ["after row's field n", "'many'", "INTEGER"]),
        (None, b'{"op": "c", "after": {"id": 4, "t": "1970-01-01 24:00:00.000"}}', 13,
         ["after row's field t", "'1970-01-01 24:00:00.000'", "TIMESTAMP"]),
        (None, b'{"op": "c"', 14, ["not debezium-json"]),
        (None, b'{"op": "c", "after": {"id": 5, "n": 5}}', 15, None),
    ],
}
SINKS = {"kj": "KJ_OUT", "kd": "KD_OUT", "ka": "KA_OUT", "kk": "KK_OUT", "fj": "fj_out", "fd": "fd_out"}


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory):
    engine = Engine(spark, home=str(tmp_path_factory.mktemp("poison")))
    engine.execute(SCRIPT)
    engine.store.append([(topic, [Record(key, value, stamp) for key, value, stamp, _ in rows])
                         for topic, rows in RECORDS.items()])
    engine.process_all_available()
    metrics = {q.sink.upper(): q.metrics() for q in engine.queries}
    letters = [json.loads(r.value) for r in engine.store.records(DEFAULT_TOPIC)]
    outputs = {topic: engine.store.records(sink) for topic, sink in SINKS.items()}
    engine.stop()
    return metrics, letters, outputs


@pytest.mark.parametrize("topic", sorted(RECORDS))
def test_each_bad_record_is_dead_lettered_with_a_reason_that_names_it(run, topic):
    _, letters, _ = run
    by_offset = {letter["offset"]: letter for letter in letters if letter["topic"] == topic}
    for offset, (_, value, stamp, words) in enumerate(RECORDS[topic]):
        if words is None:
            assert offset not in by_offset, by_offset[offset]["error"]
            continue
        letter = by_offset[offset]
        assert (letter["partition"], letter["timestamp"]) == (0, stamp)
        assert "\n" not in letter["error"] and len(letter["error"]) < 300, letter["error"]
        assert all(word in letter["error"] for word in words), (words, letter["error"])


@pytest.mark.parametrize("topic", sorted(RECORDS))
def test_the_good_records_around_them_come_out_and_the_bad_ones_are_counted(run, topic):
    metrics, _, outputs = run
    good = [row for row in RECORDS[topic] if row[3] is None]
    assert len(outputs[topic]) == len(good)
    assert metrics[SINKS[topic].upper()]["dead_letters"] == len(RECORDS[topic]) - len(good)


def test_a_huge_value_is_kept_cut_short_with_its_length(run):
    _, letters, _ = run
    [letter] = [x for x in letters if x["topic"] == "kj" and x["offset"] == 7]
    assert letter["value_bytes"] == len(HUGE) and letter["value"] == HUGE[:KEPT_BYTES].decode()
