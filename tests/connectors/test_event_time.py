"""The query clock computed by the source (``connectors.event_time.Clock``), on plain record tables."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from streamjoin.connectors.event_time import NO_TIME, Clock

N = NO_TIME


def records(rows):
    """(topic, record timestamp, JSON value or None) in ingestion order."""
    return pa.table({
        "topic": pa.array([t for t, _, _ in rows], pa.string()),
        "timestamp": pa.array([ts for _, ts, _ in rows], pa.int64()),
        "value": pa.array([None if v is None else json.dumps(v).encode() for _, _, v in rows], pa.binary()),
    })


CASES = [
    # (name, fields, delays, state before, records, clock per record, state after)
    ("one topic, record timestamps", {"a": None}, None, {}, [("a", 5, {}), ("a", 3, {}), ("a", 9, {})],
     [5, 5, 9], {"streamTime": 9}),
    ("continues from the state", {"a": None}, None, {"streamTime": 7}, [("a", 5, {}), ("a", 8, {})],
     [7, 8], {"streamTime": 8}),
    ("two topics, one reads a value field", {"a": None, "b": "TS"}, None, {},
     [("b", 100, {"TS": 4}), ("a", 2, {}), ("b", 1, {"TS": 10}), ("a", 6, None)],
     [4, 4, 10, 10], {"streamTime": 10}),
    ("a record without a time does not move it", {"b": "TS"}, None, {}, [("b", 1, {"X": 1}), ("b", 1, {"TS": 3})],
     [N, 3], {"streamTime": 3}),
    ("watermark: the minimum over the inputs, none until each has a time", {"a": None, "b": None}, {"a": 1, "b": 2}, {},
     [("a", 10, {}), ("b", 20, {}), ("a", 30, {})],
     [N, 9, 18], {"streamTime": 18, "topicTimes": {"a": 30, "b": 20}}),
    ("watermark of an input absent from the batch comes from the state", {"a": None, "b": None}, {"a": 0, "b": 0},
     {"streamTime": 5, "topicTimes": {"a": 5, "b": 7}}, [("a", 9, {})],
     [7], {"streamTime": 7, "topicTimes": {"a": 9, "b": 7}}),
]


@pytest.mark.parametrize("fields, delays, state, rows, clock, after", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_clock(fields, delays, state, rows, clock, after):
    times, state_after = Clock(fields, delays).run(records(rows), state)
    assert times.tolist() == clock
    assert state_after == after


def test_side_clocks_are_each_topics_running_maximum_and_continue_from_the_state():
    """With ``sides``, every record also carries each side topic's own clock (DIALECT §3: a KSQL window
    store keeps records by its own side's clock); a topic not read yet has none."""
    rows = [("b", 2, {}), ("a", 5, {}), ("a", 3, {}), ("b", 9, {})]
    clock, state = Clock({"a": None, "b": None}, sides=("a", "b")).run(records(rows), {"sideTimes": {"b": 4}})
    assert clock.tolist() == [[2, N, 4], [5, 5, 4], [5, 5, 4], [9, 5, 9]]
    assert state == {"streamTime": 9, "sideTimes": {"a": 5, "b": 9}}
    more, state = Clock({"a": None, "b": None}, sides=("a", "b")).run(records([("a", 4, {})]), state)
    assert more.tolist() == [[9, 5, 9]] and state["sideTimes"] == {"a": 5, "b": 9}


def test_clock_steps_keep_the_largest_clock_value_of_each_grid_span():
    import pyarrow as pa

    from streamjoin.connectors.embedded_source import clock_steps

    stream_time = pa.array([None, 5, 5, 9, 10, 19, 19, 31, 40, 41], pa.int64())
    assert clock_steps(stream_time, 10) == [9, 19, 31, 41]
    assert clock_steps(stream_time, 1) == [5, 9, 10, 19, 31, 40, 41]
    assert clock_steps(pa.array([None], pa.int64()), 10) == []


# (key field as the clock names it, record keys, event time per record): Lenses EVENTTIME BY _key / _key.f
KEY_TIMES = [
    ("key:", [b"1500", b"x", None, b"2019-03-30T05:03:30Z"], [1500, N, N, 1553922210000]),
    ("key:ts", [b'{"ts": 40, "id": "a"}', b'{"id": "b"}', b"not json", None], [40, N, N, N]),
]


@pytest.mark.parametrize("field,keys,times", KEY_TIMES, ids=[k[0] for k in KEY_TIMES])
def test_event_time_read_from_the_record_key(field, keys, times):
    from streamjoin.connectors.event_time import event_times

    table = records([("a", 7, {}) for _ in keys]).append_column("key", pa.array(keys, pa.binary()))
    assert event_times(table, field).tolist() == times


def test_a_batchs_cached_clock_is_found_only_from_the_state_it_was_computed_from(tmp_path):
    """The driver caches each planned batch's clock for the worker that reads it. Queries over the same topics
    share the cache: a file is named by the batch's slice and the clock state it starts from, so a query that
    started elsewhere (another offset, another state) never takes another's clock; writing is never an error."""
    import numpy as np

    from streamjoin.connectors.embedded_source import _ClockCache

    clock = Clock({"t": "ts"})
    mine, theirs = _ClockCache(str(tmp_path), ["t"], clock), _ClockCache(str(tmp_path), ["t"], clock)
    early, late = {"streamTime": None}, {"streamTime": 500}
    mine.put(10, 20, early, np.arange(10))
    assert theirs.get(10, 20, early, 10).tolist() == list(range(10))  # shared
    assert theirs.get(10, 20, late, 10) is None  # the same slice from another state: recomputed
    theirs.drop_upto(20)
    assert mine.get(10, 20, early, 10) is None  # removed by the other query: recomputed, not an error
    blocked = _ClockCache(str(tmp_path / "file"), ["t"], clock)
    (tmp_path / "file").write_text("not a directory")
    blocked.put(0, 5, early, np.arange(5))  # cannot be written: no error, the worker computes it
    assert blocked.get(0, 5, early, 5) is None
    blocked.drop_upto(5)


def test_the_worker_reads_the_clock_the_driver_cached_for_its_batch(tmp_path, monkeypatch):
    """The driver computes each planned batch's clock once (``latestOffset``); the worker reading the batch finds
    it (not recomputing it from every record's time), batch after batch."""
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from streamjoin.connectors import embedded_source
    from streamjoin.connectors.topic_store import Record, TopicStore

    TopicStore(tmp_path).append([("t", [Record(b"k", json.dumps({"ts": i * 10}).encode(), i) for i in range(100)])])
    reader = embedded_source.EmbeddedTopicReader({"root": str(tmp_path), "topics": "t", "eventtime": json.dumps({"t": "ts"})})
    found, get = [], embedded_source._ClockCache.get
    monkeypatch.setattr(embedded_source._ClockCache, "get", lambda self, *args: found.append(get(self, *args)) or found[-1])
    start = reader.initialOffset()
    for _ in range(3):
        end = reader.latestOffset(json.loads(json.dumps(start)), ReadMaxRows(40))  # offsets travel as JSON
        for partition in reader.partitions(json.loads(json.dumps(start)), json.loads(json.dumps(end))):
            list(reader.read(partition))
        reader.commit(end)
        start = end
    assert len(found) == 3 and all(clock is not None for clock in found)


@pytest.mark.parametrize("cached", [True, False])
def test_a_large_clocked_batch_read_in_parts_is_the_batch_read_whole(tmp_path, monkeypatch, cached):
    """Split among readers, a batch's records, their clocks (the query's and each side's) and its tick rows are
    those of the batch read by one task; only the last part brings the ticks. Without the driver's cached clock,
    each part runs the clock over the whole batch again."""
    import pyarrow as pa

    from streamjoin.connectors import embedded_source
    from streamjoin.connectors.topic_store import Record, TopicStore

    monkeypatch.setattr(embedded_source, "SPLIT_ROWS", 10)
    TopicStore(tmp_path).append([(t, [Record(b"k", json.dumps({"ts": (i * 37) % 101}).encode(), i) for i in range(40)])
                                 for t in ("a", "b")])
    options = {"root": str(tmp_path), "topics": "a,b", "eventtime": json.dumps({"a": "ts", "b": "ts"}),
               "sidetopics": json.dumps(["a", "b"]), "ticks": "2", "clocksteps": "7"}

    def batch(readers):
        reader = embedded_source.EmbeddedTopicReader({**options, "readers": str(readers)})
        start = reader.initialOffset()
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        if not cached:
            monkeypatch.setattr(embedded_source._ClockCache, "get", lambda self, *args: None)
        parts = reader.partitions(start, end)
        rows = pa.Table.from_batches([b for p in parts for b in reader.read(p)]).sort_by([("seq", "ascending"), ("topic", "ascending")])
        monkeypatch.undo()
        monkeypatch.setattr(embedded_source, "SPLIT_ROWS", 10)
        return len(parts), rows.to_pylist()

    whole, split = batch(1), batch(3)
    assert whole[0] == 1 and split[0] == 3
    assert split[1] == whole[1] and sum(r["topic"] == embedded_source.TICK_TOPIC for r in split[1]) == 2


PATTERNS = [  # (java.time pattern, text, epoch ms or None): ksqlDB's TIMESTAMP_FORMAT, as the clock reads it
    ("yyyy-MM-dd'T'HH:mm:ssX", "2018-05-11T21:58:33Z", 1526075913000),
    ("yyyy-MM-dd'T'HH:mm:ss.SX", "2019-08-27T13:31:09.2+0000", 1566912669200),
    ("yy-MM-dd HH:mm:ssX", "10-04-19 12:00:17Z", 1271678417000),
    ("yy-MM-dd HH:mm:ss", "99-01-01 00:00:00", 4070908800000),  # yy is 2000-2099, as in Java and Spark
    ("dd/MM/yy HH:mm:ssXXX", "01/01/24 02:00:00+01:00", 1704070800000),
    ("yyyy-MM-dd HH:mm:ss.SSS", "2020-01-02 03:04:05.123", 1577934245123),  # no zone: UTC
    ("yyyy-MM-dd''HH", "2020-01-02'03", 1577934000000),
    ("yyyy-MM-dd", "not a date", None),
    ("yyyy-MM-dd", "2020-01-02 03:04", None),
]


@pytest.mark.parametrize("pattern, text, millis", PATTERNS)
def test_a_time_held_as_text_is_read_in_its_timestamp_format(pattern, text, millis):
    from streamjoin.connectors.time_formats import parse_millis

    assert parse_millis(text, pattern) == millis


def test_the_clock_reads_a_field_held_as_text_in_its_pattern():
    clock = Clock({"a": "T"}, patterns={"a": "yyyy-MM-dd HH:mm:ss"})
    times, _ = clock.run(records([("a", 1, {"T": "1970-01-01 00:00:05"}), ("a", 2, {"T": "bad"}),
                                  ("a", 3, {"T": "1970-01-01 00:00:04"})]), {})
    assert times.tolist() == [5000, 5000, 5000]
