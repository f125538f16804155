"""``streamjoin shell`` driven through a pseudo-terminal, as a user types: statements over several lines, a
transient SELECT with LIMIT, Ctrl-C on a running SELECT, SHOW QUERIES, TERMINATE, EXIT."""
from __future__ import annotations

import io
import os
import pty
import re
import select
import sys
import time
from pathlib import Path

STREAMJOIN = str(Path(sys.executable).with_name("streamjoin"))


class Terminal:
    """A program on a pseudo-terminal: what it printed so far, and keys typed into it."""

    def __init__(self, argv: list[str], env: dict):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: a new session whose controlling terminal is the pty
            os.execve(argv[0], argv, env)
        self.seen = ""

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def expect(self, pattern: str, timeout: float = 90.0) -> re.Match:
        """Wait until the output since the last match holds ``pattern``; consume up to its end."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, _plain(self.seen))
            if found:
                self.seen = _plain(self.seen)[found.end():]
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"no {pattern!r} in:\n{_plain(self.seen)}")
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    self.seen += os.read(self.fd, 65536).decode("utf-8", "replace")
                except OSError:  # the program ended
                    raise AssertionError(f"ended before {pattern!r}:\n{_plain(self.seen)}") from None

    def wait(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:
                os.read(self.fd, 65536)  # keep the pty drained
            except OSError:
                pass
            time.sleep(0.1)
        os.kill(self.pid, 9)
        raise AssertionError("the shell did not end")


def _plain(text: str) -> str:
    """Terminal output without its control sequences and carriage returns."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r", "", text)


def test_a_user_session_in_the_shell(tmp_path):
    env = dict(os.environ, TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1", STREAMJOIN_HOME=str(tmp_path))
    shell = Terminal([STREAMJOIN, "shell"], env)
    try:
        shell.expect(r"streamjoin>")  # before Spark is up
        shell.type("CREATE STREAM clicks (user_id INT KEY, page STRING)\r")
        shell.expect(r"\.\.\.")  # the statement goes on
        shell.type("  WITH (kafka_topic='clicks', value_format='JSON');\r")
        shell.expect(r"Stream clicks created")
        shell.type("CREATE TABLE users (user_id INT PRIMARY KEY, name STRING) WITH (kafka_topic='users', value_format='JSON');\r")
        shell.expect(r"Table users created")
        shell.type("INSERT INTO users (user_id, name) VALUES (1, 'ann'); INSERT INTO clicks (user_id, page) VALUES (1, 'home');\r")
        shell.expect(r"1 row inserted into clicks")
        shell.type("INSERT INTO clicks (user_id, page) VALUES (2, 'cart');\r")
        shell.expect(r"1 row inserted into clicks")
        shell.type("CREATE STREAM enriched AS SELECT c.user_id AS user_id, page, name FROM clicks c "
                   "LEFT JOIN users u ON c.user_id = u.user_id;\r")
        shell.expect(r"Created query with ID CSAS_ENRICHED")
        shell.type("SELECT * FROM enriched EMIT CHANGES LIMIT 2;\r")
        joined = shell.expect(r"(?s)\| USER_ID +\| PAGE +\| NAME +\|.*?Limit Reached").group(0)
        assert re.findall(r"\| (\w+) +\| (\w+) +\| (\w+) +\|", joined)[1:] == [("1", "home", "ann"), ("2", "cart", "null")]
        shell.expect(r"Query terminated\s+streamjoin>")
        shell.type("SELECT page FROM clicks EMIT CHANGES;\r")  # no LIMIT: runs until Ctrl-C
        shell.expect(r"\| cart +\|")
        shell.type("\x03")
        shell.expect(r"Query terminated\s+streamjoin>")
        shell.type("DESCRIBE enr\t")  # Tab completes a stream's name
        shell.expect(r"ENRICHED")
        shell.type(";\r")
        shell.expect(r"Name: ENRICHED")
        shell.type("SHOW QUERIES;\r")
        shell.expect(r"\| CSAS_ENRICHED \| RUNNING \| ENRICHED \|")
        shell.type("TERMINATE CSAS_ENRICHED;\r")
        shell.expect(r"Query CSAS_ENRICHED terminated")
        shell.type("SELECT nope FROM clicks;\r")
        shell.expect(r"error: Line: 1, Col: 8: .*NOPE.*\[unknown-column\]")  # and the shell goes on
        shell.type("EXIT;\r")
        assert shell.wait() == 0
    finally:
        try:
            os.kill(shell.pid, 9)
        except ProcessLookupError:
            pass
        os.close(shell.fd)
    assert (tmp_path / "shell_history").read_text().count("INSERT INTO") == 3  # history kept for the next session
    assert not (tmp_path / "transient").exists()
    assert (tmp_path / "checkpoints" / "CSAS_ENRICHED").is_dir()  # the checkpoint `run` resumes the query from


def test_the_shells_commands(spark, tmp_path):
    """The commands a pseudo-terminal session does not type, on the suite's Spark session."""
    from streamjoin import Engine
    from streamjoin.shell import Shell

    out = io.StringIO()
    shell = Shell(lambda: Engine(spark, home=str(tmp_path)), out=out)
    script = tmp_path / "ddl.sql"
    script.write_text("CREATE STREAM clicks (user_id INT KEY, page STRING) WITH (kafka_topic='clicks', value_format='JSON');\n"
                      "INSERT INTO clicks (user_id, page) VALUES (4, 'home');")
    assert shell.run_input(f"RUN SCRIPT '{script}'; SET 'auto.offset.reset' = 'earliest'; SHOW PROPERTIES; "
                           "UNSET 'auto.offset.reset'; SHOW PROPERTIES; SHOW TOPICS;"
                           "PRINT clicks FROM BEGINNING LIMIT 1; CREATE STREAM pages AS SELECT user_id, page FROM clicks;"
                           "EXPLAIN CSAS_PAGES; DESCRIBE EXTENDED clicks; TERMINATE ALL; SHOW QUERIES")
    printed = out.getvalue()
    assert printed.count("| auto.offset.reset | earliest |") == 1 and "Unset 'auto.offset.reset'" in printed
    assert "| clicks |" in printed  # SHOW TOPICS
    assert re.search(r"rowtime: \d{4}/\d\d/\d\d [\d:.]+ Z, key: 4, value: \{\"PAGE\": \"home\"\}, partition: 0", printed)
    assert "-- CSAS_PAGES\nLogical plan:" in printed and "Queries that read from it: CSAS_PAGES" in printed
    assert "Query CSAS_PAGES terminated" in printed and not shell.engine.queries
    assert shell.run_input("EXIT") is False
    shell.close()
