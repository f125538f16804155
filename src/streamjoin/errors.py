"""Errors streamjoin reports to its users. Each names where in the script the problem is."""
from __future__ import annotations

from typing import Optional


class StreamjoinError(Exception):
    """Base class of every error streamjoin raises on purpose."""


class StatementError(StreamjoinError):
    """A statement that is refused before anything runs: names the statement, line, column and rule."""

    def __init__(self, message: str, *, rule: str, pos=None, statement_index: Optional[int] = None):
        self.message = message
        self.rule = rule
        self.pos = pos
        self.statement_index = statement_index
        super().__init__(self._text())

    def _text(self) -> str:
        where = []
        if self.statement_index is not None:
            where.append(f"statement {self.statement_index + 1}")
        if self.pos is not None and getattr(self.pos, "line", 0):
            where.append(f"line {self.pos.line}, column {self.pos.column}")
        prefix = ", ".join(where)
        return f"{prefix + ': ' if prefix else ''}{self.message} [{self.rule}]"

    def at_statement(self, index: int, default_pos=None) -> "StatementError":
        """The same error, located in statement ``index`` (keeping a more precise position if known)."""
        pos = self.pos if (self.pos is not None and getattr(self.pos, "line", 0)) else default_pos
        return StatementError(self.message, rule=self.rule, pos=pos, statement_index=index)


class NotYetSupported(StatementError):
    """A statement streamjoin understands but whose operator is not built yet (names the issue)."""

    def __init__(self, what: str, *, issue: int, pos=None, statement_index: Optional[int] = None):
        self.what = what
        self.issue = issue
        super().__init__(f"{what} is not supported yet (issue #{issue})", rule="not-yet-supported",
                         pos=pos, statement_index=statement_index)

    def at_statement(self, index: int, default_pos=None) -> "NotYetSupported":
        pos = self.pos if (self.pos is not None and getattr(self.pos, "line", 0)) else default_pos
        return NotYetSupported(self.what, issue=self.issue, pos=pos, statement_index=index)
