"""Transient queries: a bare ``SELECT`` (ksqlDB's push query, Flink's and SQLstream's query) shows its rows as
they arrive, and leaves nothing behind.

A transient query is lowered as a persistent one is, but its micro-batches go to a ``RowPrinter`` instead of a
topic, and its checkpoint is a directory of its own under ``<home>/transient/``, removed when it ends. It ends
after ``LIMIT n`` rows, when its caller stops it (Ctrl-C: ``TransientQuery.wait``), or, run ``once``, when it has
read what its inputs hold.

What is printed: a table with the query's columns. A stream's rows are printed as they are. A table's result
(an aggregate, a table join) is a changelog: each row is shown with its change kind as Flink's SQL client shows
it — ``+I`` a key's first row, ``-U`` / ``+U`` the old and new row of an update, ``-D`` a deletion.
``LIMIT`` counts result rows (an update is one).
"""
from __future__ import annotations

import base64
import datetime
import json
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import IO, Callable, Optional

from ..operators.state import hashable
from . import storage
from ..plan.nodes import SEQ, SUB, TOMBSTONE, Sink

WIDTH = 12  # the least width of a printed column


@dataclass
class RowPrinter:
    """Prints a transient query's result rows under a header of its column names, in one of three modes (SET
    'sql-client.execution.result-mode', as Flink's SQL client names its views):
    ``tableau`` prints each row as it comes (with its change kind when the result is a changelog),
    ``changelog`` prints every row with its change kind (a stream's rows are all ``+I``), ``table`` prints the
    whole result as it stands (a table's live rows, a stream's rows so far) after each micro-batch changed it."""

    columns: list[str]
    changelog: bool = False  # the result is a table's: rows update and delete earlier rows of their key
    limit: Optional[int] = None
    mode: str = "tableau"
    out: IO = field(default_factory=lambda: sys.stdout)
    rows: int = 0  # result rows printed
    latest: dict = field(default_factory=dict)  # key -> the row last shown for it (a stream's: only in table mode)
    done: threading.Event = field(default_factory=threading.Event)  # set when LIMIT is reached

    def __post_init__(self) -> None:
        self.kinds = self.mode == "changelog" or (self.mode == "tableau" and self.changelog)  # an op column
        names = ["op"] * self.kinds + self.columns
        self.widths = [2] * self.kinds + [max(WIDTH, len(n)) for n in self.columns]
        self.rule = "+" + "+".join("-" * (w + 2) for w in self.widths) + "+"
        if self.mode != "table":
            self.say(self.rule, self._line(names), self.rule)

    def batch(self, rows: list[tuple], keys: list[tuple], deletes: list[bool]) -> None:
        """One micro-batch's result rows, in result order, with each row's key and whether it deletes the key."""
        changes = []  # (change kind, row)
        for row, key, delete in zip(rows, keys, deletes):
            if self.done.is_set():
                break
            if not self.changelog:
                changes.append(("+I", row))
                if self.mode == "table":
                    self.latest[self.rows] = row
            elif delete:
                old = self.latest.pop(key, None)
                if old is None:  # a deletion of a key never shown
                    continue
                changes.append(("-D", old))
            else:
                old = self.latest.get(key)
                self.latest[key] = row
                changes += [("-U", old), ("+U", row)] if old is not None else [("+I", row)]
            self.rows += 1
            if self.limit is not None and self.rows >= self.limit:
                self.done.set()
        if self.mode == "table" and changes:
            self.say(self.rule, self._line(self.columns), self.rule, *map(self._line, self.latest.values()), self.rule,
                        f"{len(self.latest)} rows")
        elif changes:
            self.say(*[self._line((kind, *row) if self.kinds else row) for kind, row in changes])
        if self.done.is_set():
            self.say("Limit Reached")

    def _line(self, values) -> str:
        return "|" + "|".join(f" {shown(v):<{w}} " for v, w in zip(values, self.widths)) + "|"

    def say(self, *lines: str) -> None:
        self.out.write("".join(line + "\n" for line in lines))
        self.out.flush()


def shown(value) -> str:
    """A value as the result table shows it: SQL's ``null``, ``true``/``false``, timestamps as the JSON sink
    writes them, arrays, maps and structs as JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d}"
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, (list, dict, tuple)):
        return json.dumps(value, default=str, separators=(",", ":"))
    return str(value)


@dataclass
class TransientQuery:
    """A started transient query: its id, the Spark query, its printer and its checkpoint (removed at stop)."""

    query_id: str
    spark_query: object
    printer: RowPrinter
    checkpoint: str
    release: Callable[[], None] = lambda: None
    spark: object = None  # the session, which deletes the checkpoint (any URI) at stop

    def wait(self, once: bool = False) -> str:
        """Until LIMIT is reached, or (``once``) the input there is now has been read, or Ctrl-C; then stop (also
        when the query failed: its error is raised). Returns why it ended: ``limit``, ``done`` or ``interrupted``."""
        ended = "done"
        try:
            if once:
                self.spark_query.processAllAvailable()
            else:
                while not self.printer.done.wait(0.2) and self.spark_query.isActive:
                    pass
                if not self.spark_query.isActive:
                    self.spark_query.awaitTermination()  # raises the query's error, if it failed
        except KeyboardInterrupt:
            ended = "interrupted"
        finally:
            self.stop()
            self.printer.say("Query terminated")
        return "limit" if self.printer.done.is_set() else ended

    def stop(self) -> None:
        self.spark_query.stop()
        self.release()
        storage.delete(self.spark, self.checkpoint)
        parent = storage.local_path(os.path.dirname(self.checkpoint))
        try:
            if parent is not None:
                os.rmdir(parent)  # <home>/transient, when no other transient query runs
        except OSError:
            pass


def printed_batch(sink: Sink, printer: RowPrinter) -> Callable:
    """The ``foreachBatch`` function of a transient query: each batch's rows, in result order, to ``printer``."""
    shown_ids = [f.id for f in sink.input.fields if not f.hidden]
    key_ids = list(sink.key)

    def print_batch(batch, batch_id: int) -> None:
        if printer.done.is_set():
            batch.write.format("noop").mode("overwrite").save()  # past LIMIT: nothing more to show
            return
        order = [c for c in (SEQ, SUB) if c in batch.columns]
        deleting = TOMBSTONE in batch.columns
        wanted = list(dict.fromkeys(shown_ids + key_ids + order + ([TOMBSTONE] if deleting else [])))
        table = batch.select(*wanted).toArrow()
        if order:
            table = table.sort_by([(c, "ascending") for c in order])
        values = {c: table.column(c).to_pylist() for c in dict.fromkeys(shown_ids + key_ids)}
        rows = list(zip(*[values[c] for c in shown_ids])) if shown_ids else [()] * table.num_rows
        keys = list(zip(*[values[c] for c in key_ids])) if key_ids else [()] * table.num_rows
        deletes = table.column(TOMBSTONE).to_pylist() if deleting else [False] * table.num_rows
        printer.batch(rows, [hashable(k) for k in keys], [bool(d) for d in deletes])

    return print_batch

