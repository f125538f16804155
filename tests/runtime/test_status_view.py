"""The status view of ``streamjoin run``: a table redrawn in place on a terminal, lines elsewhere, and counters
read again only after a new micro-batch (no Spark here: the view's own logic over plain values; the real queries'
status is read in tests/runtime/test_engine_api.py and, for Kafka lag, tests/connectors/test_kafka.py)."""
from __future__ import annotations

import io
from types import SimpleNamespace

from streamjoin.runtime.progress import COLUMNS, LiveView, QueryStatus, Status, status_lines, status_table

RUNNING = QueryStatus("CSAS_J", True, 7, 12.4, 30.0, 120, "J", "stream time 1970-01-01 00:01:01.000", 40, 2, 1, 0, 3, None)
ON_KAFKA = QueryStatus("CTAS_COUNTS", False, None, 0.0, 0.0, 0, "COUNTS", "no clock", 0, 0, 0, 0, 0, 17)


def test_the_table_aligns_a_row_per_query_under_its_header():
    header, first, second = status_table([RUNNING, ON_KAFKA])
    assert header.split() == [w for c in COLUMNS for w in c.split()]
    for column in ("BATCH", "OUT", "LATE", "LAG"):
        at = header.index(column)
        assert first[at:].split()[0] == {"BATCH": "7", "OUT": "120", "LATE": "2", "LAG": "-"}[column]
        assert second[at:].split()[0] == {"BATCH": "-", "OUT": "0", "LATE": "0", "LAG": "17"}[column]


def test_lines_say_the_same_without_a_terminal():
    running, on_kafka = status_lines([RUNNING, ON_KAFKA])
    assert running.startswith("CSAS_J: batch 7, 12/s in, 30/s processed, out 120 rows to J, stream time 1970-01-01")
    assert "dropped 2 late, 1 null keys, 0 null values; 3 dead letters; running" in running and "lag" not in running
    assert on_kafka.endswith("; Kafka lag 17; stopped")


def test_a_redraw_moves_back_over_the_last_drawing_and_clears_it():
    out = io.StringIO()
    view = LiveView(out)
    view.draw(["a", "b", "c"])
    view.draw(["d", "e"])
    view.draw(["f"])
    assert out.getvalue() == "a\nb\nc\n" + "\x1b[3F\x1b[J" + "d\ne\n" + "\x1b[2F\x1b[J" + "f\n"


def test_counters_are_read_again_only_after_a_new_micro_batch_and_not_more_often_than_asked():
    reads = []
    progress = {"batchId": 0, "sources": []}
    now = [0.0]

    def metrics():
        reads.append(progress["batchId"])
        return {"state_rows": 1, "late": 0, "null_key": 0, "null_value": 0, "dead_letters": 0}

    query = SimpleNamespace(query_id="Q", topic="T", metrics=metrics, rows_written=lambda: 0,
                            spark_query=SimpleNamespace(isActive=True, lastProgress=progress))
    status = Status(SimpleNamespace(queries=[query], store=object()), counters_every_s=10, clock=lambda: now[0])
    for at, batch in ((0, 0), (11, 0), (12, 1), (15, 2), (21, 2), (23, 3), (40, 3)):
        now[0], progress["batchId"] = at, batch
        status.queries()
    assert reads == [0, 1, 3]  # batch 2 ran within 10 s of the read of batch 1, and 3 was read once
