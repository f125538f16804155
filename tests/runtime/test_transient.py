"""Transient queries: a bare SELECT prints its rows (a changelog with its change kinds), ends at its LIMIT, and
leaves no topic, catalog entry or checkpoint behind."""
from __future__ import annotations

import io
import os

import pytest

from streamjoin import Engine
from streamjoin.runtime.transient import RowPrinter

DDL = """
CREATE STREAM clicks (user_id INT KEY, page STRING) WITH (kafka_topic='clicks', value_format='JSON');
CREATE TABLE users (user_id INT PRIMARY KEY, name STRING) WITH (kafka_topic='users', value_format='JSON');
INSERT INTO users (user_id, name) VALUES (1, 'ann');
INSERT INTO users (user_id, name) VALUES (2, 'bob');
INSERT INTO clicks (user_id, page) VALUES (1, 'home');
INSERT INTO clicks (user_id, page) VALUES (3, 'cart');
INSERT INTO clicks (user_id, page) VALUES (2, 'shop');
INSERT INTO clicks (user_id, page) VALUES (1, 'help');
"""


def rows(printed: str) -> list[list[str]]:
    """The cells of each table line (header and rows) of the printed output."""
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in printed.splitlines() if line.startswith("|")]


def test_a_bare_select_prints_its_joined_rows_until_its_limit_and_leaves_nothing_behind(spark, tmp_path, capsys):
    engine = Engine(spark, home=str(tmp_path))
    ended = []
    started = engine.execute(DDL + "SELECT c.user_id, page, name FROM clicks c JOIN users u ON c.user_id = u.user_id "
                                   "EMIT CHANGES LIMIT 2;", on_transient=lambda q: ended.append(q.wait()))
    out = capsys.readouterr().out
    assert started == [] and ended == ["limit"]
    assert rows(out) == [["C_USER_ID", "PAGE", "NAME"], ["1", "home", "ann"], ["2", "shop", "bob"]]
    assert out.rstrip().endswith("Limit Reached\nQuery terminated")
    assert not [t for t in engine.store.topics() if "TRANSIENT" in t.upper()]
    assert not os.path.exists(tmp_path / "transient") and not os.path.exists(tmp_path / "checkpoints")
    assert engine.catalog.source("TRANSIENT_1") is None and not spark.streams.active
    engine.stop()


def test_a_tables_result_prints_as_a_changelog_and_the_script_goes_on(spark, tmp_path, capsys):
    engine = Engine(spark, home=str(tmp_path))
    started = engine.execute(DDL + "SELECT user_id, COUNT(*) AS n FROM clicks GROUP BY user_id EMIT CHANGES;"
                                   "CREATE STREAM named AS SELECT c.user_id, page FROM clicks c;")
    out = capsys.readouterr().out
    assert rows(out) == [["op", "USER_ID", "N"], ["+I", "1", "1"], ["+I", "3", "1"], ["+I", "2", "1"],
                         ["-U", "1", "1"], ["+U", "1", "2"]]
    assert [q.query_id for q in started] == ["CSAS_NAMED"]  # the statement after the SELECT ran
    engine.stop()


# (mode, is the result a changelog, batches of (row, key, deletes)) -> the printed lines after the header
PRINTED = [
    ("tableau", False, [[(("a", 1), (1,), False), (("b", 2), (2,), False)]], ["a 1", "b 2"]),
    ("changelog", False, [[(("a", 1), (1,), False)]], ["+I a 1"]),
    ("tableau", True, [[(("a", 1), (1,), False)], [(("a", 2), (1,), False), ((None, None), (1,), True)]],
     ["+I a 1", "-U a 1", "+U a 2", "-D a 2"]),
    ("tableau", True, [[((None, None), (9,), True)]], []),  # a deletion of a key never shown prints nothing
    ("table", True, [[(("a", 1), (1,), False), (("b", 1), (2,), False)], [((None, None), (1,), True)]],
     ["COL KEY", "a 1", "b 1", "2 rows", "COL KEY", "b 1", "1 rows"]),
    ("table", False, [[(("a", 1), (1,), False)], [(("a", 1), (1,), False)]],
     ["COL KEY", "a 1", "1 rows", "COL KEY", "a 1", "a 1", "2 rows"]),
]


@pytest.mark.parametrize("mode, changelog, batches, expected", PRINTED)
def test_each_result_mode_prints_its_view_of_the_changes(mode, changelog, batches, expected):
    out = io.StringIO()
    printer = RowPrinter(["COL", "KEY"], changelog=changelog, mode=mode, out=out)
    for batch in batches:
        printer.batch(*map(list, zip(*batch)))
    lines = [" ".join(cell.strip() for cell in line.strip("|").split("|")) if line.startswith("|") else line
             for line in out.getvalue().splitlines() if not line.startswith("+")]
    assert lines[1 if mode != "table" else 0:] == expected


def test_limit_counts_result_rows_and_stops_printing():
    out = io.StringIO()
    printer = RowPrinter(["COL"], changelog=True, limit=2, out=out)
    printer.batch([("a",), ("b",), ("c",)], [(1,), (1,), (2,)], [False, False, False])
    assert printer.done.is_set() and out.getvalue().splitlines()[-4:] == ["| +I | a            |", "| -U | a            |",
                                                                         "| +U | b            |", "Limit Reached"]
