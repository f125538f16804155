"""The Python API for topics (``streamjoin.Topics``) on the embedded store: one topic or several in one ingestion
order, tombstones, raw values, reading back; the same API on Kafka is tested in tests/connectors/test_kafka.py."""
from __future__ import annotations

import pytest

from streamjoin import Topics
from streamjoin.connectors.topic_store import TopicStore
from streamjoin.topics import BROKER


def test_produce_to_one_topic_and_read_it_back(tmp_path):
    with Topics(str(tmp_path)) as topics:
        assert topics.produce("orders", [{"key": 1, "value": {"ITEM": "a"}, "timestamp": 10},
                                         {"key": {"ID": 2}, "value": None, "timestamp": 11},
                                         {"key": None, "value": b"x,1", "timestamp": 12}], partitions=2) == 3
        assert topics.list() == ["orders"]
        read = sorted(topics.read("orders"), key=lambda r: r["timestamp"])
    assert [(r["key"], r["value"], r["timestamp"]) for r in read] == [
        ("1", {"ITEM": "a"}, 10), ('{"ID": 2}', None, 11), (None, "x,1", 12)]
    assert TopicStore(str(tmp_path / "topics")).partitions("orders") == 2


def test_records_of_several_topics_keep_the_order_given():
    import tempfile

    with tempfile.TemporaryDirectory() as home:
        topics = Topics(home)
        topics.produce([{"topic": "a", "key": 1, "value": {"N": 1}, "timestamp": 5},
                        {"topic": "b", "key": 1, "value": {"N": 2}, "timestamp": 4},
                        {"topic": "a", "key": 1, "value": {"N": 3}, "timestamp": 6}])
        store = TopicStore(f"{home}/topics")
        order = sorted((r.seq, t, r.value) for t in ("a", "b") for r in store.records(t))
    assert [(t, v) for _, t, v in order] == [("a", b'{"N": 1}'), ("b", b'{"N": 2}'), ("a", b'{"N": 3}')]


def test_a_record_without_a_topic_is_refused_and_nothing_is_written(tmp_path):
    topics = Topics(str(tmp_path))
    with pytest.raises(ValueError, match="record 2 names no topic"):
        topics.produce([{"topic": "a", "value": 1}, {"value": 2}])
    assert topics.list() == []


@pytest.mark.parametrize("where, broker", [("127.0.0.1:9092", True), ("kafka-1:9092,kafka-2:9093", True),
                                           (".streamjoin", False), ("/data/home", False), ("c:/home", False)])
def test_a_host_and_port_names_a_broker_anything_else_a_home(where, broker):
    assert bool(BROKER.fullmatch(where)) == broker
