"""`streamjoin topic produce --envelope`: one file feeds several topics in one ingestion order (no Spark)."""
from __future__ import annotations

import io
import json

from streamjoin.cli import main
from streamjoin.connectors.topic_store import TopicStore

LINES = [
    {"topic": "orders", "key": 1, "value": {"ITEM": "a"}, "timestamp": 10},
    {"topic": "shipments", "key": 1, "value": {"AT": 5}, "timestamp": 11},
    {"topic": "orders", "key": 2, "value": {"ITEM": "b"}, "timestamp": 12},
    {"key": 3, "value": None, "timestamp": 13},  # no "topic": the one named on the command line
]


def test_envelope_lines_feed_several_topics_in_their_order(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(json.dumps(line) + "\n" for line in LINES)))
    assert main(["--home", str(tmp_path), "topic", "produce", "--envelope", "orders"]) == 0
    assert "4 records appended to orders, shipments" in capsys.readouterr().err
    store = TopicStore(str(tmp_path / "topics"))
    read = sorted(((r.seq, topic, r.key, r.value, r.timestamp) for topic in ("orders", "shipments")
                   for r in store.records(topic)))
    assert [(t, k, v, ts) for _, t, k, v, ts in read] == [
        ("orders", b"1", b'{"ITEM": "a"}', 10), ("shipments", b"1", b'{"AT": 5}', 11),
        ("orders", b"2", b'{"ITEM": "b"}', 12), ("orders", b"3", None, 13)]


def test_a_line_without_a_topic_is_refused_when_none_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO('{"key": 1, "value": {}}\n'))
    assert main(["--home", str(tmp_path), "topic", "produce", "--envelope"]) == 2
    assert "line 1 names no topic" in capsys.readouterr().err
