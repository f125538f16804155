"""Errors streamjoin reports to its users. Each names where in the script the problem is."""
from __future__ import annotations

from typing import Optional


class StreamjoinError(Exception):
    """Base class of every error streamjoin raises on purpose."""


PREPARING = "Exception while preparing statement"  # ksqlDB's words before an error found as a statement is prepared


def location(pos) -> str:
    """``Line: L, Col: C: `` (ksqlDB's ``NodeLocation`` prefix) for a position in a script; empty without one."""
    return f"{pos}: " if pos is not None and getattr(pos, "line", 0) else ""


class StatementError(StreamjoinError):
    """A statement that is refused before anything runs: names the statement, line, column and rule."""

    def __init__(self, message: str, *, rule: str, pos=None, statement_index: Optional[int] = None, stage: str = ""):
        self.message = message
        self.rule = rule
        self.pos = pos
        self.statement_index = statement_index
        self.stage = stage  # ksqlDB's name for the step that refuses it, when its text starts with one
        super().__init__(self._text())

    def _text(self) -> str:
        """``[stage: ]Line: L, Col: C: message [rule] (statement N)``: the location as ksqlDB writes it (1-based,
        in the whole script), so its users' expectations of an error's text hold."""
        return f"{self.stage + ': ' if self.stage else ''}{location(self.pos)}{self.message} [{self.rule}]" + (
            f" (statement {self.statement_index + 1})" if self.statement_index is not None else "")

    def at_statement(self, index: int, default_pos=None) -> "StatementError":
        """The same error, located in statement ``index`` (keeping a more precise position if known)."""
        pos = self.pos if (self.pos is not None and getattr(self.pos, "line", 0)) else default_pos
        return StatementError(self.message, rule=self.rule, pos=pos, statement_index=index, stage=self.stage)


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
