"""``streamjoin shell``: type statements of any of the four dialects and watch their results, as in ksqlDB's CLI
and Flink's SQL client.

A statement ends at its ``;`` (it may span lines). Persistent statements (CREATE ... AS SELECT, INSERT INTO ...
SELECT, CREATE PUMP) start their queries in the background — the same queries, ids and checkpoints as
``streamjoin run`` on the same home — and the prompt comes back at once. A bare SELECT prints its rows until
its LIMIT or Ctrl-C (``runtime.transient``). The shell's own commands, as ksqlDB's CLI has them:
``SHOW | LIST STREAMS | TABLES | TOPICS | QUERIES | PROPERTIES``, ``DESCRIBE [EXTENDED] name``, ``EXPLAIN
query_id`` (or a statement), ``TERMINATE query_id | ALL``, ``PRINT topic [FROM BEGINNING] [LIMIT n]``,
``UNSET 'name'``, ``RUN SCRIPT 'file'``, ``EXIT`` / ``QUIT``, ``HELP``; and Flink's ``SET
'sql-client.execution.result-mode' = 'tableau' | 'changelog' | 'table'``. A refused statement prints its error
(with line and column) and the shell goes on.

The prompt appears at once: Spark starts in the background, and the first statement that needs it waits
(saying so once). Input is read with prompt_toolkit (history across sessions in ``<home>/shell_history``,
keyword and name completion) from a terminal, and line by line from a pipe.
"""
from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from typing import Callable, Optional

from .sql import read_script, split_input
from .topics import value_text

KEYWORDS = (
    "SELECT FROM WHERE JOIN LEFT RIGHT FULL OUTER INNER ON WITHIN GRACE PERIOD GROUP BY HAVING WINDOW TUMBLING "
    "HOPPING SESSION SIZE ADVANCE EMIT CHANGES FINAL LIMIT PARTITION CREATE STREAM TABLE AS INSERT INTO VALUES WITH "
    "DROP DESCRIBE EXTENDED EXPLAIN SHOW LIST STREAMS TABLES TOPICS QUERIES PROPERTIES TERMINATE ALL PRINT BEGINNING "
    "SET UNSET RUN SCRIPT EXIT QUIT HELP KEY PRIMARY AND OR NOT NULL IS CAST CASE WHEN THEN ELSE END"
).split()
_LEADING_COMMENTS = re.compile(r"^(?:\s|--[^\n]*|/\*.*?\*/)*", re.S)
_NAME = r"""(`[^`]+`|"[^"]+"|'[^']+'|[\w.$-]+)"""
COMMANDS: list[tuple[str, re.Pattern]] = [(name, re.compile(pattern, re.I | re.S)) for name, pattern in [
    ("show", r"(?:SHOW|LIST)\s+(STREAMS|TABLES|TOPICS|QUERIES|PROPERTIES)(?:\s+EXTENDED)?"),
    ("describe_extended", r"DESCRIBE\s+EXTENDED\s+" + _NAME),
    ("explain_query", r"EXPLAIN\s+" + _NAME),
    ("terminate", r"TERMINATE\s+" + _NAME),
    ("print", r"PRINT\s+" + _NAME + r"(\s+FROM\s+BEGINNING)?(?:\s+LIMIT\s+(\d+))?"),
    ("unset", r"UNSET\s+'([^']+)'"),
    ("run_script", r"RUN\s+SCRIPT\s+'([^']+)'"),
    ("exit", r"EXIT|QUIT"),
    ("help", r"HELP"),
]]
HELP = __doc__.split("\n\n")[1]


class Shell:
    """The shell's state: the engine (made in the background) and where output goes."""

    def __init__(self, make_engine: Callable[[], object], out=None):
        self.out = out or sys.stdout
        self._engine = None
        self._failed: Optional[BaseException] = None
        self._said_waiting = False

        def start():
            try:
                self._engine = make_engine()
            except BaseException as err:  # reported when a statement needs the engine
                self._failed = err

        self._starting = threading.Thread(target=start, daemon=True)
        self._starting.start()

    # ------------------------------------------------------------------ the engine, once Spark is up

    @property
    def engine(self):
        if self._starting.is_alive() and not self._said_waiting:
            self.say("(waiting for Spark to start)")
            self._said_waiting = True
        self._starting.join()
        if self._failed is not None:
            raise self._failed
        return self._engine

    def names(self) -> list[str]:
        """Names to complete: streams, tables, running queries (none while Spark starts)."""
        if self._engine is None:
            return []
        return [s.name for s in self._engine.catalog.sources.values()] + [q.query_id for q in self._engine.queries]

    # ------------------------------------------------------------------ statements

    def run_input(self, text: str) -> bool:
        """Run every complete statement of ``text``; False once one of them is EXIT."""
        statements, _ = split_input(text if text.rstrip().endswith(";") else text + ";")
        return all(self.run_statement(s) for s in statements)

    def run_statement(self, text: str) -> bool:
        """One statement (without its ';'): a shell command, or SQL for the engine. False on EXIT."""
        from .errors import StreamjoinError
        from .sql import SqlSyntaxError

        body = _LEADING_COMMENTS.sub("", text).strip()
        try:
            for name, pattern in COMMANDS:
                match = pattern.fullmatch(body)
                if match and (name != "explain_query" or self._query(match.group(1), quiet=True)):
                    return getattr(self, "_" + name)(*match.groups()) is not False
            self._sql(text)
        except (StreamjoinError, SqlSyntaxError, OSError) as err:
            self.say(f"error: {err}")
        except Exception as err:  # a query that failed in Spark: the shell goes on
            self.say(f"error: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
        return True

    def _sql(self, text: str) -> None:
        engine = self.engine
        started = engine.execute(text + ";", on_transient=lambda query: query.wait())
        for output in engine.outputs:
            self.say(output)
        engine.outputs.clear()
        for query in started:
            self.say(f"Created query with ID {query.query_id}")
        if not started:
            self._confirm(text)

    def _confirm(self, text: str) -> None:
        """What a statement that started no query did, in a line (as ksqlDB's CLI confirms it)."""
        from .sql import ast, parse_statement

        stmt = parse_statement(text)
        if isinstance(stmt, ast.CreateSource):
            self.say(f"{stmt.kind.title()} {stmt.name.text} created")
        elif isinstance(stmt, ast.Drop):
            self.say(f"{stmt.name.text} dropped")
        elif isinstance(stmt, ast.SetProperty):
            self.say(f"Property '{stmt.name}' set to '{stmt.value}'")
        elif isinstance(stmt, ast.InsertValues):
            self.say(f"{len(stmt.rows)} row{'s' * (len(stmt.rows) != 1)} inserted into {stmt.target.text}")

    # ------------------------------------------------------------------ commands

    def _show(self, what: str) -> None:
        from .connectors.kafka_client import masked, masked_text

        engine = self.engine
        what = what.upper()
        if what in ("STREAMS", "TABLES"):
            sources = [s for s in engine.catalog.sources.values() if s.kind == what[:-1]]
            self.table(["Name", "Topic", "Key format", "Value format"],
                       [(s.name, s.topic, s.key_format, s.value_format) for s in sorted(sources, key=lambda s: s.name)])
        elif what == "TOPICS":
            self.table(["Topic"], [(t,) for t in sorted(engine.store.topics())])
        elif what == "QUERIES":
            self.table(["Query ID", "Status", "Sink", "Statement"],
                       [(q.query_id, "RUNNING" if q.spark_query.isActive else "STOPPED", q.sink,
                         " ".join(masked_text(q.planned.statement.text).split())) for q in engine.queries])
        else:
            self.table(["Property", "Value"], sorted((k, masked(k, v)) for k, v in engine.catalog.properties.items()))

    def _describe_extended(self, name: str) -> None:
        from .plan.nodes import Scan, walk

        engine = self.engine
        self._sql(f"DESCRIBE {name}")
        info = engine.catalog.source(_unquoted(name))
        writers = [q for q in engine.queries if q.sink == info.name]
        readers = [q for q in engine.queries if any(isinstance(n, Scan) and n.source.name == info.name
                                                    for n in walk(q.planned.plan))]
        for title, queries in (("Queries that write into it", writers), ("Queries that read from it", readers)):
            self.say(f"{title}: " + (", ".join(f"{q.query_id} ({q.rows_written()} rows written)" for q in queries)
                                     or "none"))

    def _explain_query(self, query_id: str) -> None:
        from .lower import operator_table
        from .plan.explain import explain_text

        query = self._query(query_id)
        self.say(f"-- {query.query_id}")
        self.say(explain_text(query.planned.plan, operator_table.declared_state, self.engine.catalog.properties))

    def _terminate(self, target: str) -> None:
        engine = self.engine
        queries = list(engine.queries) if target.upper() == "ALL" else [self._query(target)]
        for query in queries:
            query.stop()
            engine.queries.remove(query)
            self.say(f"Query {query.query_id} terminated")

    def _print(self, topic: str, from_beginning: Optional[str], limit: Optional[str]) -> None:
        """A topic's records as they arrive (with FROM BEGINNING, those it holds first), until LIMIT or Ctrl-C."""
        store = self.engine.store
        name = next((t for t in store.topics() if t.casefold() == _unquoted(topic).casefold()), None)
        if name is None:
            self.say(f"error: no topic {_unquoted(topic)}")
            return
        seen = 0 if from_beginning else len(store.records(name))
        shown, wanted = 0, int(limit) if limit else None
        try:
            while wanted is None or shown < wanted:
                records = store.records(name)
                for r in records[seen:][:None if wanted is None else wanted - shown]:
                    key = r.key.decode("utf-8", "replace") if r.key is not None else None
                    stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(r.timestamp / 1000)) + f".{r.timestamp % 1000:03d} Z"
                    value = value_text(r.value)
                    value = json.dumps(value) if isinstance(value, (dict, list)) else value
                    self.say(f"rowtime: {stamp}, key: {key}, value: {value}, partition: {r.partition}")
                    shown += 1
                seen = len(records)
                if wanted is None or shown < wanted:
                    time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        self.say("Topic printing ceased")

    def _unset(self, name: str) -> None:
        properties = self.engine.catalog.properties
        if properties.pop(name, None) is None:
            self.say(f"error: {name} is not set")
        else:
            self.say(f"Unset '{name}'")

    def _run_script(self, path: str) -> bool:
        return self.run_input(read_script(path))

    def _exit(self) -> bool:
        return False

    def _help(self) -> None:
        self.say(HELP)

    # ------------------------------------------------------------------ helpers

    def _query(self, query_id: str, quiet: bool = False):
        engine = self._engine if quiet else self.engine
        found = next((q for q in (engine.queries if engine else []) if q.query_id.casefold() == _unquoted(query_id).casefold()), None)
        if found is None and not quiet:
            from .errors import StreamjoinError

            raise StreamjoinError(f"no running query {_unquoted(query_id)}")
        return found

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def table(self, header: list[str], rows) -> None:
        rows = [[str(v) for v in row] for row in rows]
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
        rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
        line = lambda values: "|" + "|".join(f" {v:<{w}} " for v, w in zip(values, widths)) + "|"  # noqa: E731
        self.say("\n".join([rule, line(header), rule, *map(line, rows), rule]))

    def close(self) -> None:
        if self._engine is not None:
            self._engine.stop()


def _unquoted(name: str) -> str:
    return name[1:-1] if name[:1] in "`\"'" else name


# ------------------------------------------------------------------ reading input


def loop(shell: Shell, home: str, stdin=None) -> int:
    """Read statements until EXIT or end of input, from a terminal with prompt_toolkit, else line by line."""
    stdin = stdin or sys.stdin
    read = _terminal_reader(shell, home) if stdin.isatty() and sys.stdout.isatty() else _line_reader(stdin)
    shell.say("streamjoin shell: statements end with ';'. HELP lists the commands, EXIT leaves.")
    typed = ""
    try:
        while True:
            try:
                line = read("streamjoin> " if not typed.strip() else "        ... ")
            except KeyboardInterrupt:  # Ctrl-C at the prompt drops what was typed
                typed = ""
                continue
            except EOFError:
                break
            typed += line + "\n"
            statements, typed = split_input(typed)
            try:
                if not all(shell.run_statement(s) for s in statements):
                    break
            except KeyboardInterrupt:  # Ctrl-C while a statement started its queries: the shell goes on
                shell.say("(interrupted)")
    finally:
        shell.close()
    return 0


def _line_reader(stdin) -> Callable[[str], str]:
    def read(prompt: str) -> str:
        line = stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    return read


def _terminal_reader(shell: Shell, home: str) -> Callable[[str], str]:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import Completer, Completion
    from prompt_toolkit.history import FileHistory

    class Words(Completer):
        def get_completions(self, document, complete_event):
            word = document.get_word_before_cursor(WORD=True)
            if not word:
                return
            for candidate in dict.fromkeys(KEYWORDS + shell.names()):
                if candidate.casefold().startswith(word.casefold()) and candidate != word:
                    yield Completion(candidate, start_position=-len(word))

    os.makedirs(home, exist_ok=True)
    session = PromptSession(history=FileHistory(os.path.join(home, "shell_history")), completer=Words(),
                            complete_while_typing=False)
    return lambda prompt: session.prompt(prompt)
