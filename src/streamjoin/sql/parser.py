"""SQL front end: script text in, syntax tree (ast.py) out.

Design:

* ``grammar.lark`` is an LALR(1) grammar for lark's contextual lexer, which only makes a word a keyword
  where the parser can accept that keyword; elsewhere it is an identifier. ``_IdentEverywhere`` lets the
  lexer match an identifier in every state, so a keyword never matches the start of a longer word (JOINX).
* A script is first cut at its top-level semicolons by a small scanner that skips string literals, quoted
  identifiers and comments. Each non-empty statement is then parsed on its own, so an error names the
  statement it is in, and empty statements (``;;``, a trailing ``;``, comments only) are skipped.
* ``transform.AstBuilder`` turns a statement's parse tree into ast nodes, with positions relative to the
  whole script.
* Lark's errors become ``SqlSyntaxError``, whose expected tokens are given readable names: keywords by
  their word, punctuation by its symbol, other terminals by ``_TERMINAL_NAMES``.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable, Iterator

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError
from lark.lark import PostLex

from ..errors import StreamjoinError, location
from .ast import Expr, Pos, ScriptStatement, Statement
from .transform import AstBuilder, InvalidSyntax, shift

__all__ = ["SqlSyntaxError", "parse_expression", "parse_script", "parse_statement"]

END_OF_INPUT = "end of input"


class SqlSyntaxError(StreamjoinError):
    """A statement that does not parse.

    ``statement_index`` is 0-based (the message counts from 1, like other streamjoin errors); ``line`` and
    ``column`` are 1-based and relative to the whole script. ``expected`` is the sorted list of readable
    token names the parser could have accepted, ``found`` the offending token's text or 'end of input'.
    ``reason`` says what went wrong: 'syntax error', 'unterminated string literal', ...
    """

    def __init__(self, reason: str, *, statement_index: int, pos: Pos, found: str,
                 expected: Iterable[str] = ()):
        self.reason = reason
        self.statement_index = statement_index
        self.pos = pos
        self.line = pos.line
        self.column = pos.column
        self.found = found
        self.expected = sorted(set(expected))
        super().__init__(self._text())

    def _text(self) -> str:
        at = END_OF_INPUT if self.found == END_OF_INPUT else repr(self.found)
        text = f"{location(self.pos)}{self.reason} at {at}"
        if self.expected:
            names = ", ".join(name if name[0].isalpha() else repr(name) for name in self.expected)
            text += f": expected {'one of ' if len(self.expected) > 1 else ''}{names}"
        return f"{text} (statement {self.statement_index + 1})"


class _IdentEverywhere(PostLex):
    """Makes the contextual lexer match IDENT in every parser state (the parser then refuses it if it must)."""

    always_accept = ("IDENT",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        return stream


@functools.cache
def _parser() -> Lark:
    """The grammar's LALR parser, built on first use (a third of a second): a process that imports the syntax
    tree's modules without parsing (a Spark Python worker running an operator) never pays for it."""
    return Lark(
        resources.files(__package__).joinpath("grammar.lark").read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        start=["statement", "expr"],
        propagate_positions=True,
        maybe_placeholders=True,
        postlex=_IdentEverywhere(),
    )

_TERMINAL_NAMES = {
    "IDENT": "identifier",
    "STRING": "string literal",
    "INTEGER": "number",
    "DECIMAL": "number",
    "DURATION": "duration",
}


def _readable_name(terminal) -> str:
    if terminal.pattern.type == "str":
        word = terminal.pattern.value
        return word.upper() if word[0].isalpha() else word
    return _TERMINAL_NAMES.get(terminal.name, terminal.name)  # WS and comments are never expected


@functools.cache
def _readable() -> dict[str, str]:
    """Each terminal's name as an error message shows it."""
    return {"$END": END_OF_INPUT, **{t.name: _readable_name(t) for t in _parser().terminals}}

# ---------------------------------------------------------------- splitting a script into statements

_SCRIPT_PIECE = re.compile(
    r"""'(?:[^']|'')*'          # string literal
      | "(?:[^"]|"")*"          # quoted identifier
      | `(?:[^`]|``)*`          # back-quoted identifier
      | --[^\n]*                # line comment
      | /\*.*?\*/               # block comment
      | [^'"`;/-]+ | [^;]       # anything else but a semicolon
      | (?P<end>;)""",
    re.S | re.X,
)
_BLANK = re.compile(r"(?:\s|--[^\n]*|/\*.*?\*/)*", re.S)


@dataclass(frozen=True)
class _Statement:
    """The text of one non-empty statement of a script (without its ';') and where it starts."""

    index: int
    text: str
    offset: int
    origin: Pos


def _position(script: str, offset: int) -> Pos:
    return Pos(script.count("\n", 0, offset) + 1, offset - script.rfind("\n", 0, offset))


def _split(script: str) -> list[_Statement]:
    bounds, start = [], 0
    for piece in _SCRIPT_PIECE.finditer(script):
        if piece.group("end"):
            bounds.append((start, piece.start()))
            start = piece.end()
    bounds.append((start, len(script)))
    texts = [(begin, script[begin:end]) for begin, end in bounds if not _BLANK.fullmatch(script[begin:end])]
    return [_Statement(i, text, begin, _position(script, begin)) for i, (begin, text) in enumerate(texts)]


# ---------------------------------------------------------------- parsing


def _parse(source: _Statement, start: str):
    try:
        tree = _parser().parse(source.text, start=start)
        return tree, AstBuilder(source.origin, source.text).transform(tree)
    except UnexpectedInput as e:
        raise _syntax_error(e, source) from None
    except VisitError as e:
        if isinstance(e.orig_exc, InvalidSyntax):
            bad = e.orig_exc
            raise SqlSyntaxError(bad.reason, statement_index=source.index, pos=bad.pos, found=bad.found,
                                 expected=bad.expected) from None
        raise


def _syntax_error(error: UnexpectedInput, source: _Statement) -> SqlSyntaxError:
    parser = error.interactive_parser
    # Lark's final state (a whole statement read) lists no terminals: the end of input is what it expects.
    expected = [_readable()[t] for t in (parser.accepts() if parser else ())] or [END_OF_INPUT]
    line, column = error.line, error.column
    if isinstance(error, UnexpectedToken):
        reason, found = "syntax error", str(error.token)
        if error.token.type == "$END":
            found = END_OF_INPUT
            if error.token.end_line is not None:  # lark places it on the last token: point just after it
                line, column = error.token.end_line, error.token.end_column
    else:
        assert isinstance(error, UnexpectedCharacters)
        found = source.text[error.pos_in_stream]
        reason = {"'": "unterminated string literal", '"': "unterminated quoted identifier",
                  "`": "unterminated quoted identifier"}.get(found, "unexpected character")
    return SqlSyntaxError(reason, statement_index=source.index, pos=shift(source.origin, line, column),
                          found=found, expected=expected)


def _parse_statement(source: _Statement) -> ScriptStatement:
    tree, statement = _parse(source, "statement")
    text = source.text[tree.meta.start_pos:tree.meta.end_pos]
    return ScriptStatement(statement, text, source.index, pos=statement.pos)


def split_input(text: str) -> tuple[list[str], str]:
    """Typed input cut at its top-level semicolons: the texts of its complete statements (without their ';'),
    and what follows the last ';' (a statement still being typed; blank when there is none)."""
    statements, start = [], 0
    for piece in _SCRIPT_PIECE.finditer(text):
        if piece.group("end"):
            if not _BLANK.fullmatch(text[start:piece.start()]):
                statements.append(text[start:piece.start()].strip())
            start = piece.end()
    rest = text[start:]
    return statements, "" if _BLANK.fullmatch(rest) else rest


def read_script(path) -> str:
    """A script file's text: UTF-8 whatever the machine's locale, a leading byte-order mark (as Windows editors
    write one) dropped. Bytes that are not UTF-8 are refused with where they are."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise StreamjoinError(f"{path}: Line: {line}, Col: {column}: byte 0x{data[err.start]:02x} is not UTF-8 text; "
                              "save the script as UTF-8") from None
    return text


def parse_script(text: str) -> list[ScriptStatement]:
    """The statements of a script separated by ';' (the last ';' optional; empty statements ignored)."""
    return [_parse_statement(source) for source in _split(text)]


def parse_statement(text: str) -> Statement:
    """Exactly one statement, with or without a trailing ';'."""
    sources = _split(text)
    if len(sources) > 1:
        semicolon = sources[0].offset + len(sources[0].text)
        raise SqlSyntaxError("more than one statement", statement_index=0, pos=_position(text, semicolon),
                             found=";", expected=[END_OF_INPUT])
    source = sources[0] if sources else _Statement(0, text, 0, Pos(1, 1))
    return _parse_statement(source).statement


def parse_expression(text: str) -> Expr:
    """One expression, such as ``a.b + 1`` or ``FLOOR(ROWTIME TO HOUR)``."""
    return _parse(_Statement(0, text, 0, Pos(1, 1)), "expr")[1]
